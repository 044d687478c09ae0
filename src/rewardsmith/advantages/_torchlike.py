"""Float reductions in the order PyTorch's CPU kernels use, emulated with numpy.

Trainers compute advantages with torch. Whether a group of equal rewards comes out exactly 0
depends on how the group's sum was rounded, and that depends on the order of the additions,
not only on the dtype: numpy's pairwise sum of 16 x 0.3 in float32 is exact, torch's is not.

``torch_sum`` follows ``cascade_sum`` in ATen's ``SumKernel.cpp`` for a contiguous row:

* rows of at least one SIMD vector take the vectorized path: the row is read as vectors of
  ``lanes`` elements, four vector accumulators take every fourth vector (``row_sum`` with an
  ILP factor of 4, cascading every 16+ rows), leftover vectors go into the first accumulator,
  the four are added lane-wise, then the scalar tail is summed from 0 and the lanes are added
  to it one after another;
* shorter rows take the scalar path: the same four-accumulator scheme over single elements.

``lanes=8`` (float32; 4 for float64) is the order of every x86 CPU build of torch, whatever
``torch.backends.cpu.get_cpu_capability()`` says: ATen registers its sum kernel with
``REGISTER_DISPATCH``, which leaves the AVX-512 entry empty, so AVX-512 machines run the AVX2
kernel, and the DEFAULT kernel's generic vectors are 32 bytes too (checked bit for bit against
torch 2.13 under AVX512, AVX2 and DEFAULT by ``benchmarks/check_torch_emulation.py``). It
reproduces the published figures for 16 x 0.3 (the mean of 16 x 0.3 is one ulp low). Other
``lanes`` values describe no x86 torch build (16 would make that mean exact); on a GPU the
order is a tree again: the residue is a property of the machine as much as of the reward.
Large reductions that torch splits across threads are emulated as one thread.

``torch_std`` follows the two variance paths of ``torch.std``: a call with one output element
takes ``std_var_all_cpu`` (the mean from ``torch_sum`` in the input dtype, then the squared
deviations added one after another in float64), any other takes Welford's algorithm in
float64, element by element, as ATen's ``WelfordOps`` does. The first path keeps the float32
mean's residue, the second does not: for 16 x 0.3 one gives a std of 3.1e-8, the other 0.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["AVX2_LANES", "torch_mean", "torch_std", "torch_sum"]

AVX2_LANES = 8  # float32 lanes in a 256-bit register
_ILP = 4  # accumulators in ATen's row_sum
_LEVELS = 4  # cascade levels in ATen's multi_row_sum

FloatArray = NDArray[np.floating]


def _seq_sum(block: FloatArray, axis: int) -> FloatArray:
    """Left-to-right sum along ``axis`` in the block's own dtype (cumsum is sequential)."""
    if block.shape[axis] == 0:
        shape = list(block.shape)
        del shape[axis]
        return np.zeros(shape, dtype=block.dtype)
    out: FloatArray = np.take(np.cumsum(block, axis=axis, dtype=block.dtype), -1, axis=axis)
    return out


def _multi_row_sum(rows: FloatArray) -> FloatArray:
    """ATen's ``multi_row_sum``: column sums of ``rows`` (shape B x R x C) with cascading."""
    count = rows.shape[1]
    ceil_log2 = int(np.ceil(np.log2(count))) if count > 1 else 0
    level_power = max(4, ceil_log2 // _LEVELS)
    level_step = 1 << level_power
    level_mask = level_step - 1
    acc = np.zeros((_LEVELS, rows.shape[0], rows.shape[2]), dtype=rows.dtype)
    i = 0
    while i + level_step <= count:
        acc[0] = acc[0] + _seq_sum(rows[:, i : i + level_step], axis=1)
        i += level_step
        for j in range(1, _LEVELS):
            acc[j] = acc[j] + acc[j - 1]
            acc[j - 1] = 0
            if i & (level_mask << (j * level_power)):
                break
    for k in range(i, count):
        acc[0] = acc[0] + rows[:, k]
    for j in range(1, _LEVELS):
        acc[0] = acc[0] + acc[j]
    total: FloatArray = acc[0]
    return total


def _row_sum(items: FloatArray) -> FloatArray:
    """ATen's ``row_sum``: items has shape B x N x W (W = 1 for scalars, lanes for vectors)."""
    batch, count, width = items.shape
    whole = count // _ILP
    # Row r holds items 4r .. 4r+3 side by side: accumulator k takes every fourth item.
    rows = items[:, : whole * _ILP].reshape(batch, whole, _ILP * width)
    partial = _multi_row_sum(rows).reshape(batch, _ILP, width)
    first = partial[:, 0]
    for k in range(whole * _ILP, count):
        first = first + items[:, k]
    for k in range(1, _ILP):
        first = first + partial[:, k]
    return first


def torch_sum(values: FloatArray, *, lanes: int = AVX2_LANES) -> FloatArray:
    """Sum each row of ``values`` (shape B x N, or N for one row) in torch's CPU order."""
    data = np.asarray(values)
    single = data.ndim == 1
    rows = data.reshape(1, -1) if single else data
    batch, count = rows.shape
    if count >= lanes:
        vectors = count // lanes
        lane_sums = _row_sum(rows[:, : vectors * lanes].reshape(batch, vectors, lanes))
        total = np.zeros(batch, dtype=rows.dtype)
        for k in range(vectors * lanes, count):
            total = total + rows[:, k]
        for lane in range(lanes):
            total = total + lane_sums[:, lane]
    else:
        total = _row_sum(rows.reshape(batch, count, 1))[:, 0]
    return total[0:1].reshape(()) if single else total


def torch_mean(values: FloatArray, *, lanes: int = AVX2_LANES) -> FloatArray:
    """``tensor.mean(-1)`` on CPU: the emulated sum divided by the count, in the input dtype."""
    data = np.asarray(values)
    count = data.shape[-1]
    total = torch_sum(data, lanes=lanes)
    out: FloatArray = (total / data.dtype.type(count)).astype(data.dtype)
    return out


def _welford_m2(wide: FloatArray) -> FloatArray:
    """Sum of squared deviations along the last axis by ATen's Welford update, in order."""
    mean = np.zeros(wide.shape[:-1])
    m2 = np.zeros(wide.shape[:-1])
    for k in range(wide.shape[-1]):
        value = wide[..., k]
        delta = value - mean
        mean = mean + delta / (k + 1)
        m2 = m2 + delta * (value - mean)
    return m2


def torch_std(
    rows: FloatArray, *, one_output: bool, correction: int = 1, lanes: int = AVX2_LANES
) -> FloatArray:
    """``std`` of each row of ``rows`` (B x N) the way torch computes it on CPU.

    ``one_output`` says whether the torch call had a single output element (``t.std()``, or
    ``t.std(-1)`` on a tensor with one row): then torch takes ``std_var_all_cpu``, centered on
    its mean in the input dtype; otherwise Welford in float64. Returns float64 holding values
    rounded to the input dtype; a row with no more elements than ``correction`` gives NaN, as
    in torch.
    """
    data = np.asarray(rows)
    count = data.shape[-1]
    wide = data.astype(np.float64)
    if one_output:
        center = torch_mean(data, lanes=lanes).astype(np.float64)[:, None]
        squares = _seq_sum((wide - center) ** 2, axis=-1)
    else:
        squares = _welford_m2(wide)
    denom = count - correction
    if denom <= 0:
        return np.full(squares.shape, np.nan)
    std: FloatArray = np.sqrt(squares / denom).astype(data.dtype).astype(np.float64)
    return std
