"""Round reward totals onto a grid that float32 holds exactly.

A trainer's float32 group mean of equal rewards is exact when every partial sum is exact,
which is the case when the rewards are multiples of a step ``2**-k`` and small enough that
``group size x |reward| / step`` fits float32's 24-bit significand. 0/1 rewards always are;
0.3 never is. Quantizing totals to ``2**-10`` (an error of at most 0.0005) removes the
residue from every trainer's formula; see ``trainers``.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from typing import Any

from rewardsmith.errors import (
    AdvantageError,
    ConfigError,
)

__all__ = [
    "DEFAULT_STEP",
    "check_step",
    "is_float32_exact_grid",
    "quantize",
    "suggest_step",
]

DEFAULT_STEP = 2.0**-10
_SIGNIFICAND = 24  # float32 bits, the implicit one included
_STEP_BITS = 8  # a step's odd part may use this many bits: 0.75 = 3 * 2**-2 is fine
_FINEST_POWER = 30  # grids finer than 2**-30 are not worth reporting


def _as_float32(value: float) -> float:
    """``value`` rounded to the nearest float32 (inf past its range), without importing numpy:
    rubrics check their step at load, and the CLI's start-up should not pay for numpy."""
    try:
        return float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def check_step(step: float) -> float:
    """Return ``step`` as a float when it makes a float32-exact grid; ConfigError saying why not.

    A step works when it is positive, held exactly by a float32, and its significand is short
    (a power of two, or a small odd multiple of one such as 0.75), so that its multiples stay
    exact too.
    """
    if isinstance(step, bool) or not isinstance(step, (int, float)):
        raise ConfigError(f"quantize step must be a number, got {step!r}")
    value = float(step)
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"quantize step must be a positive finite number, got {step!r}")
    if _as_float32(value) != value:
        raise ConfigError(
            f"quantize step {step!r} is not exact in float32 (it holds "
            f"{_as_float32(value)!r}), so its multiples would carry the same residue; "
            "use a power of two such as 2**-10 or 0.25"
        )
    mantissa, _ = math.frexp(value)
    odd = int(mantissa * 2**53)
    while odd % 2 == 0:
        odd //= 2
    if odd.bit_length() > _STEP_BITS:
        raise ConfigError(
            f"quantize step {step!r} is exact in float32 but uses {odd.bit_length()} significand "
            "bits, so sums of a few multiples of it are not; use a power of two such as 2**-10"
        )
    return value


def quantize(value: float, step: float = DEFAULT_STEP) -> float:
    """The multiple of ``step`` nearest ``value`` (ties to even), exact in float32.

    ConfigError when ``step`` does not make an exact grid, or when ``value`` is too large for
    it (the multiple would need more than float32's 24 bits).
    """
    grid = check_step(step)
    number = float(value)
    if not math.isfinite(number):
        raise AdvantageError(f"cannot quantize {value!r}: rewards must be finite")
    steps = round(number / grid)
    result = steps * grid
    if _as_float32(result) != result:
        raise ConfigError(
            f"{value!r} is too large for a grid of {grid!r}: {steps} steps do not fit a float32; "
            "use a coarser step"
        )
    return result + 0.0  # -0.0 -> 0.0


def is_float32_exact_grid(
    values: Iterable[float | None], *, group_size: int = 64
) -> tuple[bool, float | None]:
    """Whether ``values`` (None ignored) lie on a grid ``2**-k`` whose sums float32 holds exactly.

    True with the coarsest such step when every value is a multiple of it and any sum of up to
    ``group_size`` of them fits float32's significand; ``(False, None)`` otherwise (also for
    NaN or inf). No values: ``(True, None)``.
    """
    data = _finite_array(values)
    if data is None:
        return False, None
    if data.size == 0:
        return True, None
    import numpy as np

    largest = float(np.abs(data).max())
    for power in range(_FINEST_POWER + 1):
        scaled = data * 2.0**power  # exact: scaling by a power of two
        if np.array_equal(scaled, np.round(scaled)):
            fits = largest * 2.0**power * max(group_size, 1) < 2.0**_SIGNIFICAND
            return (True, 2.0**-power) if fits else (False, None)
    return False, None


def _values_array(values: Iterable[float | None]) -> Any:
    """The values (None left out) as a float64 array; an array is taken as it is."""
    import numpy as np  # only advantage checks ask this

    if isinstance(values, np.ndarray):
        return values.astype(np.float64, copy=False)
    return np.asarray([v for v in values if v is not None], dtype=np.float64)


def _finite_array(values: Iterable[float | None]) -> Any:
    """``_values_array``, or None when a value is NaN or infinite."""
    import numpy as np

    data = _values_array(values)
    return data if bool(np.isfinite(data).all()) else None


def suggest_step(values: Iterable[float | None], *, group_size: int = 64) -> float:
    """A step to quantize ``values`` to: their own grid if they have one, else ``2**-10``.

    A grid of ``2**-10`` is coarsened (by powers of two) when the values are too large for
    ``group_size`` of them to sum exactly.
    """
    import numpy as np

    data = _values_array(values)
    exact, step = is_float32_exact_grid(data, group_size=group_size)
    if exact and step is not None:
        return step
    finite = np.abs(data[np.isfinite(data)])
    largest = float(finite.max()) if finite.size else 0.0
    needed = largest * max(group_size, 1) / 2.0**_SIGNIFICAND
    if needed < DEFAULT_STEP:
        return DEFAULT_STEP
    return 2.0 ** (math.floor(math.log2(needed)) + 1)
