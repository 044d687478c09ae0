"""Output comparison modes (``compare``): exact, tokens (as testlib's wcmp) and float."""

from __future__ import annotations

import pytest

from rewardsmith import Rubric
from rewardsmith.errors import RubricError
from rewardsmith.rewards.code import code
from rewardsmith.rewards.code.compare import outputs_match
from rewardsmith.sandbox import SandboxUnavailable, get_sandbox

# (got, expected, exact, tokens, float)
CASES = [
    ("1 2\n3\n", "1 2\n3\n", True, True, True),
    ("1 2   \r\n3\n\n\n", "1 2\n3", True, True, True),  # trailing whitespace, CRLF
    ("  1 2\n3\n", "1 2\n3\n", False, True, True),  # leading spaces
    ("1    2\n3\n", "1 2\n3\n", False, True, True),  # a run of spaces
    ("1\t2\n3\n", "1 2\n3\n", False, True, True),  # a tab
    ("1 2 3\n", "1 2\n3\n", False, True, True),  # line breaks
    ("1 2\n\n3\n", "1 2\n3\n", False, True, True),  # a blank line inside
    ("1 2\n", "1 2\n3\n", False, False, False),  # a token missing
    ("12\n3\n", "1 2\n3\n", False, False, False),  # tokens joined
    ("YES\n", "yes\n", False, False, False),  # case matters
    ("0.3333333\n", "0.333333333\n", False, False, True),  # within 1e-6
    ("0.3334\n", "0.333333333\n", False, False, False),  # past 1e-6
    ("7000001\n", "7000000\n", False, False, False),  # integers exactly
    ("3.0\n", "3\n", False, False, False),
    ("1e400\n", "1.5\n", False, False, False),  # past the float range
    ("nan\n", "nan\n", True, True, True),
    ("1\u00a02\n", "1 2\n", False, False, False),  # a no-break space is not whitespace
]


@pytest.mark.parametrize(("got", "expected", "exact", "tokens", "floats"), CASES)
def test_each_mode(got: str, expected: str, exact: bool, tokens: bool, floats: bool) -> None:
    assert outputs_match(got, expected, None, "exact") is exact
    assert outputs_match(got, expected, None, "tokens") is tokens
    assert outputs_match(got, expected, None, "float") is floats


def test_a_tolerance_loosens_floats_in_every_mode_and_integers_in_none() -> None:
    for mode in ("exact", "tokens", "float"):
        assert outputs_match("0.5001 7\n", "0.5 7\n", 1e-3, mode)
        assert not outputs_match("0.5 7006999\n", "0.5 7000000\n", 1e3, mode)
    assert outputs_match("0.5001\n", "0.5\n", 1e-3, "float")
    assert not outputs_match("0.5001\n", "0.5\n", 1e-5, "float")  # the given tolerance wins


def test_an_unknown_mode_is_an_error() -> None:
    with pytest.raises(ValueError, match="compare mode 'loose'"):
        outputs_match("1", "1", None, "loose")


def test_the_rubric_refuses_an_unknown_mode() -> None:
    with pytest.raises(RubricError, match="compare 'loose'"):
        Rubric.from_dict({"components": {"c": {"reward": "code",
                                               "params": {"compare": "loose"}}}})


def test_end_to_end_through_the_sandbox() -> None:
    try:
        get_sandbox("bubblewrap").check("python")
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox on this machine: {exc}")
    tests = {"inputs": ["3\n"], "outputs": ["1 2 3\n0.333333333\n"]}
    spaced = "```python\nn = int(input())\nfor i in range(1, n + 1):\n    print(i)\n" \
             "print(f'  {1 / n:.7f}')\n```"
    assert code(spaced, tests)["reward"] == 0.0
    assert code(spaced, tests, compare="tokens")["reward"] == 0.0  # 0.3333333 is not exact
    assert code(spaced, tests, compare="float")["reward"] == 1.0
    assert code(spaced, tests, compare="tokens", float_tolerance=1e-6)["reward"] == 1.0
