"""Quantizing rewards onto grids that float32 holds exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rewardsmith.advantages import (
    DEFAULT_STEP,
    check_step,
    is_float32_exact_grid,
    quantize,
    suggest_step,
)
from rewardsmith.errors import AdvantageError, ConfigError


@given(value=st.floats(-1000, 1000), power=st.integers(0, 12))
def test_quantize_lands_on_an_exact_grid(value: float, power: int) -> None:
    step = 2.0**-power
    q = quantize(value, step)
    assert float(np.float32(q)) == q
    assert abs(q - value) <= step / 2
    assert (q / step).is_integer()
    assert quantize(q, step) == q  # idempotent


def test_quantize_examples() -> None:
    assert quantize(0.3) == 307 / 1024
    assert quantize(0.3, 0.25) == 0.25
    assert quantize(0.375, 0.25) == 0.5  # ties to even
    assert quantize(0.7, 0.75) == 0.75  # a small odd multiple of a power of two works
    assert math.copysign(1.0, quantize(-0.01, 0.25)) == 1.0  # no -0.0
    assert DEFAULT_STEP == 2.0**-10


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (0.1, "not exact in float32"),
        (0.3, "not exact in float32"),
        (float(np.float32(0.1)), "significand bits"),
        (0.0, "positive"),
        (-0.25, "positive"),
        (math.inf, "positive"),
        ("0.25", "must be a number"),
        (True, "must be a number"),
    ],
)
def test_bad_steps_say_why(step: float, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_step(step)
    with pytest.raises(ConfigError):
        quantize(1.0, step)


def test_quantize_refuses_what_cannot_be_exact() -> None:
    with pytest.raises(AdvantageError, match="finite"):
        quantize(math.nan)
    with pytest.raises(ConfigError, match="coarser step"):
        quantize(1e9 + 0.5, 2.0**-10)


def test_grid_detection() -> None:
    assert is_float32_exact_grid([0.0, 1.0, 1.0, None]) == (True, 1.0)
    assert is_float32_exact_grid([0.25, 0.5, 0.75]) == (True, 0.25)
    assert is_float32_exact_grid([quantize(0.3), quantize(0.7)]) == (True, 2.0**-10)
    assert is_float32_exact_grid([0.3]) == (False, None)
    assert is_float32_exact_grid([1.0, math.nan]) == (False, None)
    assert is_float32_exact_grid([]) == (True, None)
    # Multiples of 2**-10 too large for 64 of them to sum exactly in float32.
    assert is_float32_exact_grid([300.0 + 2.0**-10], group_size=64) == (False, None)
    assert is_float32_exact_grid([300.0 + 2.0**-10], group_size=16)[0]


def test_suggested_step() -> None:
    assert suggest_step([0.0, 0.5, 1.0]) == 0.5
    assert suggest_step([0.3, 0.7]) == DEFAULT_STEP
    big = suggest_step([1e5 + 0.1], group_size=64)
    assert big > DEFAULT_STEP
    q = quantize(1e5 + 0.1, big)
    assert is_float32_exact_grid([q], group_size=64)[0]


@pytest.mark.parametrize("values", [[0.0, 0.5, 1.0], [0.3, 0.7], [1e5 + 0.1], [0.25, -0.75],
                                    [1.0, math.inf], [math.nan, 0.5], []])
def test_arrays_answer_as_lists_do(values: list[float]) -> None:
    import numpy as np

    for group_size in (1, 16, 64):
        assert is_float32_exact_grid(np.array(values, dtype=np.float64),
                                     group_size=group_size) == is_float32_exact_grid(
            values, group_size=group_size)
        assert suggest_step(np.array(values), group_size=group_size) == suggest_step(
            values, group_size=group_size)
