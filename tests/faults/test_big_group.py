"""One big group: every per-group computation is linear in memory.

Before: NeMo's emulated leave-one-out sums built an N x N matrix per group (the default
trainer check runs it): 10,000 rollouts in one group took minutes, 1,000,000 asked for
terabytes and failed after scoring.
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest

from rewardsmith.advantages import check_trainers, emulate_array
from rewardsmith.advantages.trainers import _lane_sum, _loo_sums


def _reference_loo_sums(x: np.ndarray) -> np.ndarray:
    """The kernel order written out row by row over ``1 - eye`` (small sizes only)."""
    size = x.shape[1]
    double = x.dtype == np.float64
    keep = 1 - np.eye(size, dtype=x.dtype)
    blocked = 4 * (size // 4)
    out = np.empty_like(x)
    for row in range(size):
        items = x * keep[row]
        if row < blocked:
            width = 2 if double else 4
            vectors = (size - 1) // width
            out[:, row] = _lane_sum(items, size - width * vectors, size, width if vectors else 1)
            continue
        head = min(2 if double else 4, size)
        stop = head + 8 * ((size - head) // 8)
        single = (size - blocked) % 2 == 1 and row == size - 1
        width = 8 if single else ((4, 2) if double else (8, 4))[(row - blocked) % 2]
        total = _lane_sum(items, head, stop, 1 if stop == head else width,
                          halves=double and width == 8 and stop != head)
        for j in range(stop, size):
            total = total + items[:, j]
        out[:, row] = total
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_leave_one_out_sums_are_bit_for_bit_the_kernels(dtype: type) -> None:
    rng = np.random.default_rng(7)
    for size in [*range(1, 34), 64, 65, 131]:
        for x in (rng.choice([0.1, 0.2, 0.3, -0.7, 1.0], size=(3, size)),
                  rng.normal(size=(2, size)) * 1e3,
                  np.where(np.arange(size) % 3 == 0, -0.0, 0.1)[None, :]):
            x = x.astype(dtype)
            bits = np.uint64 if dtype == np.float64 else np.uint32
            assert np.array_equal(_loo_sums(x).view(bits), _reference_loo_sums(x).view(bits)), \
                (size, x)


def test_ten_thousand_rollouts_in_one_group_are_checked_quickly_in_little_memory() -> None:
    rewards = [float(i % 3) * 0.2 for i in range(10_000)]
    tracemalloc.start()
    started = time.monotonic()
    try:
        reports = check_trainers(rewards, ["g"] * len(rewards), ["nemo", "verl"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < 10  # was minutes
    assert peak < 100 << 20  # an N x N float32 matrix alone is 400 MB
    assert reports["nemo"].max_group_size == 10_000


def test_a_million_rollouts_in_one_group_are_emulated() -> None:
    size = 1_000_000
    rewards = np.where(np.arange(size) % 2 == 0, 1.0, 0.0)
    tracemalloc.start()
    try:
        out = emulate_array(rewards, np.zeros(size, dtype=np.intp), trainer="nemo")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 512 << 20  # was 3.6 TiB asked for
    assert np.isfinite(out).all()
    assert out[0] > 0 > out[1]
