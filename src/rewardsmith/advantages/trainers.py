"""What each trainer's own advantage formula does with these rewards, in its own dtype.

Each emulation repeats the trainer's operations in the trainer's order, in float32 by
default, with torch's CPU reductions emulated by ``_torchlike`` (AVX2 order). For 16 rewards
of 0.3 in float32 they give these figures:

============  ==============================================================  ===========
trainer       formula                                                         16 x 0.3
============  ==============================================================  ===========
verl          (r - mean) / (std + 1e-6); singleton: mean 0, std 1             0.0289
trl           (r - mean) / (std + 1e-4); std by group, batch or none          0.0003
slime         c = r - mean; c / (std(c) + 1e-6)                               0.0298
miles         (r - mean) / (std + 1e-6) only where std > 0                    0.0289
openrlhf      (r - mean) / (std + 1e-9)                                       29.8
nemo          r - mean(others), / (std(others) + 1e-6) where std > 0          0
rewardsmith   exact: 0 for equal groups (``core``)                            0
============  ==============================================================  ===========

The residue is the float32 mean, one ulp below 0.3 (2**-25 = 2.98e-8). What a trainer then
divides it by depends on which path ``torch.std`` took: verl and miles take the std of one
group at a time (one output element: ``std_var_all_cpu``, centered on the same float32 mean,
so std = 3.08e-8 and the ratio is 0.0289); trl, slime and openrlhf reduce a batch of groups
along a dimension (Welford in float64: std is exactly 0, so the residue is divided by eps
alone). A batch of a single group is a one-row tensor, so those three take the first path
too (openrlhf then gives 0.938, not 29.8). NeMo's std is sqrt(E[x^2] - E[x]^2) of the
leave-one-out set in float32, which cancels badly. Its leave-one-out sums are a
``(1 - eye) @ x`` matmul, which torch hands to BLAS (MKL's ``sgemv``/``dgemv`` in the x86
wheels), not to ``torch.sum``. They are emulated in the order torch 2.13's MKL 2024.2 adds
them on the AMD EPYC this was checked on (groups of 1-199, float32 and float64), where MKL's
vectors are 128-bit (4 floats, 2 doubles) whatever ``MKL_ENABLE_INSTRUCTIONS`` says. For
16 x 0.3 that order leaves every rollout at 0; for 8 x 0.7, 2 of the 8 get 0.000199. MKL's
kernels for Intel CPUs, OpenBLAS and cuBLAS add in other orders, so NeMo's figure depends
on the BLAS and the CPU as much as on the reward. torch's sqrt (MKL's vsSqrt/vdSqrt) is
within 1 ulp but not correctly rounded, so where the std is not 0 NeMo's emulated
advantages can be 1 ulp off torch's.

Masked rollouts are dropped before the trainer sees the group, as a filtering trainer would.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import ConfigError
from ._torchlike import AVX2_LANES, torch_mean, torch_std
from .core import (
    Convention,
    _refuse_non_finite,
    _reward_vector,
    advantages_array,
    encode_groups,
    get_convention,
)

__all__ = [
    "TRAINERS",
    "TrainerFormula",
    "emulate_advantages",
    "emulate_array",
    "get_trainer",
    "trainer_names",
]

Float = NDArray[np.floating]


@dataclass(frozen=True)
class _Batch:
    """What a row emulation needs to know about the whole batch."""

    dtype: type[np.floating]
    lanes: int
    scale: str
    one_group: bool  # the trainer's (groups x size) tensor has a single row
    batch_std: float  # torch's std of every reward in the batch (for trl's scale="batch")


RowFn = Callable[[Float, _Batch], Float]


@dataclass(frozen=True)
class TrainerFormula:
    """One trainer's advantage formula: its name, the formula in words, and how to emulate it.

    Its constants (eps, std) are the trainer's :class:`Convention` in ``core.CONVENTIONS``.
    """

    name: str
    formula: str
    rows: RowFn | None  # None: computed exactly by rewardsmith

    @property
    def convention(self) -> Convention:
        return get_convention(self.name)

    @property
    def eps(self) -> float:
        return self.convention.eps

    @property
    def std(self) -> str:
        return "population" if self.convention.ddof == 0 else "unbiased"

    def __str__(self) -> str:
        return f"{self.name}: {self.formula} (eps {self.eps:g}, {self.std} std)"


def _f(batch: _Batch, value: float) -> Float:
    return np.asarray(value, dtype=batch.dtype)


def _verl(x: Float, b: _Batch) -> Float:
    if x.shape[1] == 1:
        # verl sets mean 0 and std 1 for a group of one: the advantage is the raw reward.
        return x / (_f(b, 1.0) + _f(b, 1e-6))
    mean = torch_mean(x, lanes=b.lanes)[:, None]
    std = torch_std(x, one_output=True, lanes=b.lanes).astype(b.dtype)[:, None]
    return (x - mean) / (std + _f(b, 1e-6))


def _trl(x: Float, b: _Batch) -> Float:
    centered = x - torch_mean(x, lanes=b.lanes)[:, None]
    if b.scale == "none":
        return centered
    if b.scale == "batch":
        std = np.full((x.shape[0], 1), b.batch_std).astype(b.dtype)
    else:
        std = torch_std(x, one_output=b.one_group, lanes=b.lanes).astype(b.dtype)[:, None]
    return centered / (std + _f(b, 1e-4))


def _slime(x: Float, b: _Batch) -> Float:
    centered = x - torch_mean(x, lanes=b.lanes)[:, None]
    std = torch_std(centered, one_output=b.one_group, lanes=b.lanes).astype(b.dtype)[:, None]
    return centered / (std + _f(b, 1e-6))


def _miles(x: Float, b: _Batch) -> Float:
    centered = x - torch_mean(x, lanes=b.lanes)[:, None]
    std = torch_std(x, one_output=True, lanes=b.lanes).astype(b.dtype)[:, None]
    with np.errstate(invalid="ignore"):
        return np.where(std > 0, centered / (std + _f(b, 1e-6)), centered)


def _openrlhf(x: Float, b: _Batch) -> Float:
    centered = x - torch_mean(x, lanes=b.lanes)[:, None]
    std = torch_std(x, one_output=b.one_group, lanes=b.lanes).astype(b.dtype)[:, None]
    return centered / (std + _f(b, 1e-9))


def _lane_sum(items: Float, head: int, stop: int, width: int, halves: bool = False) -> Float:
    """One row of MKL's dot kernel: ``items[:, :head]`` in order into lane 0, then vectors of
    ``width`` lanes over ``[head, stop)``, then the lanes halved down to one (``halves``: each
    4-lane half halved to 2 lanes first, then the two halves added)."""
    acc = np.zeros((items.shape[0], width), dtype=items.dtype)
    for j in range(head):
        acc[:, 0] = acc[:, 0] + items[:, j]
    for start in range(head, stop, width):
        acc = acc + items[:, start : start + width]
    if halves:
        acc = (acc[:, 0:2] + acc[:, 2:4]) + (acc[:, 4:6] + acc[:, 6:8])
    while acc.shape[1] > 1:
        half = acc.shape[1] // 2
        acc = acc[:, :half] + acc[:, half:]
    total: Float = acc[:, 0]
    return total


# Above this many rollouts in a group, NeMo's leave-one-out sums are not emulated kernel for
# kernel (that takes time quadratic in the group's size): each is the exact sum of the others,
# rounded once. NeMo itself builds an N x N matrix per group.
NEMO_EXACT_LIMIT = 50_000


def _loo_sums(x: Float) -> Float:
    """``(1 - eye) @ x`` per group, added in the order of MKL's ``?gemv('T')`` (see above),
    in memory linear in the group's size (no N x N matrix).

    Result rows go in blocks of four: vectors of 4 floats (2 doubles) after a head of 1-4
    (1-2) elements. The 1-3 rows left take other kernels after a head of 4 floats (2
    doubles), over whole 8-element units, then add the rest in order: a pair of rows takes
    8 and 4 float lanes (4 and 2 double lanes), a last single row 8 lanes.
    """
    size = x.shape[1]
    if size > NEMO_EXACT_LIMIT:
        total = x.sum(axis=1, dtype=np.float64)[:, None]
        loo: Float = (total - x.astype(np.float64)).astype(x.dtype)
        return loo
    double = x.dtype == np.float64
    blocked = 4 * (size // 4)
    left = size - blocked
    out = np.empty_like(x)
    if blocked:
        out[:, :blocked] = _blocked_loo_sums(x, blocked, 2 if double else 4)
    for row in range(blocked, size):
        items = x.copy()
        items[:, row] = x[:, row] * 0  # as (1 - eye) leaves it: a zero of the value's sign
        head = min(2 if double else 4, size)
        stop = head + 8 * ((size - head) // 8)
        single = left % 2 == 1 and row == size - 1
        width = 8 if single else ((4, 2) if double else (8, 4))[(row - blocked) % 2]
        if stop == head:
            width = 1
        total_row = _lane_sum(items, head, stop, width, halves=double and width == 8)
        for j in range(stop, size):
            total_row = total_row + items[:, j]
        out[:, row] = total_row
    return out


def _blocked_loo_sums(x: Float, rows: int, width: int) -> Float:
    """Rows ``0..rows-1`` of ``_loo_sums``: each is ``_lane_sum`` over ``x`` with that row's
    column zeroed (a head of ``head`` elements into lane 0, then ``vectors`` vectors of
    ``width`` lanes, then the lanes halved). Only the zeroed element's lane differs from the
    sum of all, so each lane is added once in order (prefix sums), and the lane of every row
    is finished by adding the rest of it to that row's prefix, for all rows at once."""
    groups, size = x.shape
    vectors = (size - 1) // width
    head = size - width * vectors
    lanes = width if vectors else 1
    zero = x * 0
    # Each lane's elements in the order they are added: lane 0 takes the head first.
    body = x[:, head:].reshape(groups, vectors, lanes) if vectors else x[:, :0].reshape(
        groups, 0, lanes)
    streams = [np.concatenate([x[:, :head], body[:, :, 0]], axis=1)]
    streams += [body[:, :, k] for k in range(1, lanes)]
    full = np.empty((groups, lanes), dtype=x.dtype)
    finished = []  # per lane: its sum when element p is zeroed, for every p
    for k, stream in enumerate(streams):
        start = np.zeros((groups, 1), dtype=x.dtype)
        prefix = np.cumsum(np.concatenate([start, stream], axis=1), axis=1)  # sequential
        full[:, k] = prefix[:, -1]
        # The element positions of lane k, as columns of x (to find each one's zero).
        columns = (np.concatenate([np.arange(head), head + lanes * np.arange(vectors)])
                   if k == 0 else head + k + lanes * np.arange(vectors))
        count = stream.shape[1]
        state = prefix[:, :count] + zero[:, columns]
        for step in range(1, count):
            state[:, : count - step] += stream[:, step:]
        finished.append(state)
    acc = np.broadcast_to(full[:, None, :], (groups, rows, lanes)).copy()
    row = np.arange(rows)
    lane = np.where(row < head, 0, (row - head) % lanes)
    position = np.where(row < head, row, np.where(lane == 0, head + (row - head) // lanes,
                                                  (row - head) // lanes))
    for k in range(lanes):
        pick = lane == k
        acc[:, pick, k] = finished[k][:, position[pick]]
    while acc.shape[2] > 1:
        half = acc.shape[2] // 2
        acc = acc[:, :, :half] + acc[:, :, half:]
    result: Float = acc[:, :, 0]
    return result


def _nemo(x: Float, b: _Batch) -> Float:
    size = x.shape[1]
    if size <= 1:
        return np.zeros_like(x)  # NeMo sets the baseline to the reward: no signal
    others = _f(b, float(size - 1))
    baseline = _loo_sums(x) / others
    square = _loo_sums(x * x) / others
    with np.errstate(invalid="ignore"):
        std = np.nan_to_num(np.sqrt(square - baseline * baseline), nan=0.0)
        centered = x - baseline
        return np.where(std > 0, centered / (std + _f(b, 1e-6)), centered)


TRAINERS: dict[str, TrainerFormula] = {
    t.name: t
    for t in (
        TrainerFormula("verl", "(r - mean) / (std + eps); singleton: A = r", _verl),
        TrainerFormula("trl", "(r - mean) / (std + eps); std by group, batch or none", _trl),
        TrainerFormula("slime", "c = r - mean; c / (std(c) + eps)", _slime),
        TrainerFormula("miles", "(r - mean) / (std + eps) only when std > 0", _miles),
        TrainerFormula("openrlhf", "(r - mean) / (std + eps)", _openrlhf),
        TrainerFormula("nemo", "r - mean(others), / (std(others) + eps) when std > 0", _nemo),
        TrainerFormula("rewardsmith", "(r - mean) / (std + eps), exactly 0 if all equal", None),
    )
}

_EMULATED_DTYPES = ("float32", "float64")


def trainer_names() -> tuple[str, ...]:
    """The names ``--trainer`` and ``trainer=`` accept."""
    return tuple(TRAINERS)


def get_trainer(name: str) -> TrainerFormula:
    """The formula of trainer ``name``; ConfigError listing the valid names otherwise."""
    get_convention(name)  # the one place that names the valid trainers in its error
    return TRAINERS[name.strip().lower()]


def emulate_array(
    rewards: ArrayLike,
    codes: ArrayLike,
    *,
    trainer: str,
    valid: ArrayLike | None = None,
    dtype: str = "float32",
    scale: str | None = None,
    method: str | None = None,
    ids: Sequence[Any] | None = None,
    lanes: int = AVX2_LANES,
) -> NDArray[np.float64]:
    """Advantages as ``trainer`` computes them: float64 holding ``dtype`` values, NaN if masked.

    Rows keep their batch order inside each group (summation order matters). ``scale`` is
    trl's option (``group``, ``batch`` or ``none``); ``method`` and ``scale`` also choose
    rewardsmith's own advantages; ``lanes`` is the SIMD width emulated in float32 lanes (8:
    torch's order on every x86 CPU, AVX-512 included, which reproduces the issue's figures).
    """
    spec = get_trainer(trainer)
    if method is not None and spec.name != "rewardsmith":
        raise ConfigError(
            f"method applies to rewardsmith's own advantages; {spec.name} has its own formula"
        )
    if spec.name not in ("trl", "rewardsmith") and scale is not None:
        raise ConfigError(f"trainer {spec.name!r} has no scale option (only trl and rewardsmith)")
    if spec.name == "trl" and scale is not None and scale not in ("group", "batch", "none"):
        raise ConfigError(f"unknown scale {scale!r} for trl: expected group, batch or none")
    r = np.asarray(rewards, dtype=np.float64).reshape(-1)
    group_codes = np.asarray(codes).reshape(-1)
    mask = np.ones(r.size, bool) if valid is None else np.asarray(valid, bool).reshape(-1)
    if group_codes.size != r.size or mask.size != r.size:
        raise ConfigError(f"got {r.size} rewards, {group_codes.size} groups, {mask.size} flags")
    if spec.rows is None:
        ours = advantages_array(
            r, group_codes, valid=mask, method=method or "grpo", scale=scale, dtype=dtype, ids=ids
        )
        return ours.astype(np.float64)
    if dtype not in _EMULATED_DTYPES:
        raise ConfigError(
            f"trainers are emulated in {' or '.join(_EMULATED_DTYPES)}, not {dtype!r}"
        )
    _refuse_non_finite(r, mask, ids)
    dt: type[np.floating] = np.float32 if dtype == "float32" else np.float64
    out = np.full(r.size, np.nan)
    positions = np.flatnonzero(mask)
    if positions.size == 0:
        return out
    _, dense = np.unique(group_codes[positions], return_inverse=True)
    dense = dense.reshape(-1)
    order = positions[np.argsort(dense, kind="stable")]
    sizes = np.bincount(dense)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    values = r.astype(dt)
    width = lanes if dt == np.float32 else lanes // 2  # a register holds half as many doubles
    batch_std = math.nan
    if spec.name == "trl" and scale == "batch":
        batch_std = float(torch_std(values[positions][None, :], one_output=True, lanes=width)[0])
    batch = _Batch(dt, width, scale or "group", sizes.size == 1, batch_std)
    for size in np.unique(sizes):
        first = starts[sizes == size]
        index = order[first[:, None] + np.arange(size)[None, :]]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out[index] = spec.rows(values[index], batch).astype(dt)
    return out


def emulate_advantages(
    rewards: Sequence[float | None],
    groups: Sequence[Hashable],
    *,
    trainer: str,
    dtype: str = "float32",
    scale: str | None = None,
    method: str | None = None,
    ids: Sequence[Any] | None = None,
) -> list[float | None]:
    """What ``trainer`` would compute for these rewards: None where masked, NaN kept."""
    if len(groups) != len(rewards):
        raise ConfigError(f"got {len(rewards)} rewards but {len(groups)} group labels")
    values, valid = _reward_vector(rewards, ids)
    codes, _ = encode_groups(groups)
    result = emulate_array(
        values,
        codes,
        trainer=trainer,
        valid=valid,
        dtype=dtype,
        scale=scale,
        method=method,
        ids=ids,
    )
    out: list[float | None] = result.tolist()
    for position in np.flatnonzero(~valid).tolist():
        out[position] = None
    return out
