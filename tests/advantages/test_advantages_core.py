"""Exact group advantages: zero for equal groups in every dtype, masks, singletons, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import rewardsmith.advantages as adv
from rewardsmith.advantages import (
    advantages_array,
    apply_advantages,
    compute_advantages,
    encode_groups,
)
from rewardsmith.errors import AdvantageError, ConfigError
from rewardsmith.types import Score, Status

FINITE = st.floats(allow_nan=False, allow_infinity=False)
METHOD_SCALES = [
    ("grpo", "group"),
    ("grpo", "batch"),
    ("grpo", "none"),
    ("grpo", "loo"),
    ("dr_grpo", None),
    ("rloo", None),
    ("rloo", "group"),
    ("rloo", "loo"),
]
DTYPES = ["float16", "float32", "float64"]


def test_exports_are_exactly_all() -> None:
    public = {name for name in dir(adv) if not name.startswith("_")}
    modules = {"core", "report", "trainers"}  # the quantize module is shadowed by its function
    assert public - modules - {"annotations"} == set(adv.__all__)
    assert callable(adv.quantize)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("method", "scale"), METHOD_SCALES)
@settings(max_examples=40, deadline=None)
@given(value=FINITE, size=st.integers(1, 64))
def test_equal_group_is_exactly_zero(
    method: str, scale: str | None, dtype: str, value: float, size: int
) -> None:
    out = compute_advantages([value] * size, ["g"] * size, method=method, scale=scale, dtype=dtype)
    assert all(a == 0.0 and math.copysign(1.0, a) == 1.0 for a in out if a is not None)
    assert len(out) == size


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("method", "scale"), METHOD_SCALES)
@settings(max_examples=30, deadline=None)
@given(
    equal=st.lists(st.tuples(st.floats(-100, 100), st.integers(1, 64)), min_size=1, max_size=6),
    noisy=st.lists(st.lists(st.floats(-100, 100), min_size=2, max_size=16), max_size=4),
    masked=st.lists(st.integers(0, 500), max_size=10),
)
def test_equal_groups_stay_zero_among_others(
    method: str,
    scale: str | None,
    dtype: str,
    equal: list[tuple[float, int]],
    noisy: list[list[float]],
    masked: list[int],
) -> None:
    rewards: list[float | None] = []
    groups: list[str] = []
    for i, (value, size) in enumerate(equal):
        rewards += [value] * size
        groups += [f"equal-{i}"] * size
    for i, values in enumerate(noisy):
        rewards += values
        groups += [f"noisy-{i}"] * len(values)
    # Interleave so groups are not contiguous, then mask a few rollouts.
    order = np.random.default_rng(len(rewards)).permutation(len(rewards))
    rewards = [rewards[i] for i in order]
    groups = [groups[i] for i in order]
    for m in masked:
        if m < len(rewards):
            rewards[m] = None
    try:
        out = compute_advantages(rewards, groups, method=method, scale=scale, dtype=dtype)
    except AdvantageError as exc:
        # Dividing by the std of near-equal others can exceed float16's range: refused, fine.
        assume(dtype == "float16" and scale == "loo" and "overflows" in str(exc))
        return
    for reward, group, a in zip(rewards, groups, out, strict=True):
        if reward is None:
            assert a is None
        else:
            assert a is not None and math.isfinite(a)
            if group.startswith("equal"):
                assert a == 0.0


def _reference(rewards: list[float], method: str, eps: float = 1e-6) -> list[float]:
    n = len(rewards)
    mean = math.fsum(rewards) / n
    if method == "rloo":
        return [
            r - math.fsum(rewards[:i] + rewards[i + 1 :]) / (n - 1) for i, r in enumerate(rewards)
        ]
    centered = [r - mean for r in rewards]
    if method == "dr_grpo":
        return centered
    std = math.sqrt(math.fsum(c * c for c in centered) / (n - 1))
    return [c / (std + eps) for c in centered]


@pytest.mark.parametrize("method", ["grpo", "dr_grpo", "rloo"])
@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-8, 8), min_size=2, max_size=32).filter(lambda v: len(set(v)) > 1))
def test_matches_textbook_formula(method: str, ints: list[int]) -> None:
    rewards = [i / 7 for i in ints]  # fractions that float arithmetic does not hold
    out = compute_advantages(rewards, ["g"] * len(rewards), method=method)
    expected = _reference(rewards, method)
    assert out == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_masked_rollouts_are_left_out_of_statistics() -> None:
    out = compute_advantages([1.0, None, 0.0, 7.0], ["a", "a", "a", "b"], eps=0.0)
    assert out[1] is None
    assert out[0] == pytest.approx(math.sqrt(0.5))  # as if the group were [1, 0]
    assert out[0] == -out[2]
    assert out[3] == 0.0  # singleton


def test_singletons_and_empty_groups() -> None:
    out = compute_advantages([5.0, None, None, 0.25], ["solo", "gone", "gone", "one-left"])
    assert out == [0.0, None, None, 0.0]
    assert compute_advantages([], []) == []
    assert compute_advantages([None, None], ["a", "a"]) == [None, None]


def test_float32_residue_case_is_exact() -> None:
    rewards = [0.3] * 16 + [0.7] * 15 + [1.0]
    groups = ["a"] * 16 + ["b"] * 16
    out = compute_advantages(rewards, groups, dtype="float32")
    assert out[:16] == [0.0] * 16
    assert out[16] < 0 < out[31]


def test_float_noise_is_not_equality() -> None:
    # 0.1 + 0.2 and 0.3 differ in the last bit: not equal, so not forced to 0 ...
    out = compute_advantages([0.1 + 0.2, 0.3], ["g", "g"], eps=0.0)
    assert out == pytest.approx([math.sqrt(0.5), -math.sqrt(0.5)])
    # ... but with the default eps the push is negligible.
    out = compute_advantages([0.1 + 0.2, 0.3], ["g", "g"])
    assert max(abs(a) for a in out if a is not None) < 1e-9


def test_output_dtype() -> None:
    out = advantages_array([1.0, 0.0, 0.3, 0.3], [0, 0, 1, 1], dtype="float32")
    assert out.dtype == np.float32
    assert out[2] == 0.0 and out[3] == 0.0
    masked = advantages_array([1.0, 0.0], [0, 0], valid=[True, False])
    assert math.isnan(masked[1]) and masked[0] == 0.0


def test_array_accepts_any_integer_codes() -> None:
    a = advantages_array([1.0, 0.0, 2.0, 2.0], [10**12, 10**12, -5, -5])
    b = advantages_array([1.0, 0.0, 2.0, 2.0], [0, 0, 1, 1])
    assert a.tolist() == b.tolist()


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_rewards_name_the_rollout(bad: float) -> None:
    with pytest.raises(AdvantageError, match="rollout 'r-2'"):
        compute_advantages([1.0, 0.0, bad], ["g"] * 3, ids=["r-0", "r-1", "r-2"])
    with pytest.raises(AdvantageError, match="#1"):
        compute_advantages([1.0, bad], ["g"] * 2)
    with pytest.raises(AdvantageError):
        advantages_array(np.array([bad]), [0])


def test_non_number_reward_is_named() -> None:
    with pytest.raises(AdvantageError, match="rollout 'b'.*not a number"):
        compute_advantages([1.0, "high"], ["g", "g"], ids=["a", "b"])  # type: ignore[list-item]


def test_overflow_in_narrow_dtype_is_refused() -> None:
    with pytest.raises(AdvantageError, match="overflows float16"):
        compute_advantages([1e6, -1e6], ["g", "g"], method="dr_grpo", dtype="float16")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "ppo"}, "unknown method 'ppo'"),
        ({"scale": "row"}, "unknown scale 'row'"),
        ({"dtype": "int8"}, "unknown dtype 'int8'"),
        ({"eps": -1.0}, "eps"),
        ({"ddof": 2}, "ddof"),
        ({"method": "dr_grpo", "scale": "group"}, "dr_grpo"),
        ({"trainer": "deepspeed"}, "verl"),
    ],
)
def test_bad_options_are_config_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        compute_advantages([1.0, 0.0], ["g", "g"], **kwargs)  # type: ignore[arg-type]


def test_length_mismatch() -> None:
    with pytest.raises(ConfigError, match="2 rewards but 1 group"):
        compute_advantages([1.0, 0.0], ["g"])


def test_trainer_conventions_apply() -> None:
    rewards, groups = [1.0, 0.0, 0.5], ["g"] * 3
    trl = compute_advantages(rewards, groups, trainer="trl")
    assert trl == pytest.approx(compute_advantages(rewards, groups, eps=1e-4))
    nemo = compute_advantages(rewards, groups, trainer="NeMo")
    # r - mean(others) over the population std of the others, + 1e-6.
    assert nemo[0] == pytest.approx((1.0 - 0.25) / (0.25 + 1e-6))
    assert nemo[2] == pytest.approx(0.0)
    # Two rollouts: the other one alone has no spread, so NeMo does not divide.
    assert compute_advantages([1.0, 0.0], ["g", "g"], trainer="nemo") == [1.0, -1.0]
    # An explicit option still wins over the trainer's.
    assert compute_advantages(rewards, groups, trainer="trl", eps=1e-6) == pytest.approx(
        compute_advantages(rewards, groups)
    )


def test_loo_scale_detects_equal_others_exactly() -> None:
    # 7 equal rewards and one different: the odd one's others are all equal (no division),
    # although their float std would be a tiny residue for 0.35.
    out = compute_advantages([0.35] * 7 + [0.95], ["g"] * 8, trainer="nemo")
    assert out[7] == pytest.approx(0.95 - 0.35)


def test_encode_groups_keeps_first_appearance_order() -> None:
    codes, labels = encode_groups(["b", "a", "b", ("t", 1)])
    assert codes.tolist() == [0, 1, 0, 2]
    assert labels == ["b", "a", ("t", 1)]


def test_apply_advantages_fills_scores_in_place() -> None:
    scores = [
        Score("x1", "p", 1.0),
        Score("x2", "p", 0.0),
        Score("x3", "p", None, status=Status.MASKED),
        Score("y1", "q", 0.3),
        Score("y2", "q", 0.3),
    ]
    assert apply_advantages(scores, dtype="float32") is None
    got = [s.advantage for s in scores]
    assert got[2] is None and got[3] == 0.0 and got[4] == 0.0
    assert got[0] is not None and got[0] > 0 > got[1]  # type: ignore[operator]
    with pytest.raises(AdvantageError, match="'bad'"):
        apply_advantages([Score("bad", "p", math.nan), Score("ok", "p", 1.0)])
