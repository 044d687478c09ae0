"""The ``math`` and ``boxed_math`` built-ins: extraction order, boxes, errors, references."""

from __future__ import annotations

from typing import Any

import pytest

from rewardsmith.rewards import get_builtin
from rewardsmith.rewards.mathanswer import check
from rewardsmith.rewards.mathanswer.extraction import extract_answer, reference_text


def reward(name: str, completion: str, answer: Any) -> float:
    builtin = get_builtin(name)
    assert builtin is not None
    value = builtin.func(completion, answer)
    assert isinstance(value, float)
    return value


def test_both_built_ins_are_registered_with_a_timeout() -> None:
    for name in ("math", "boxed_math"):
        builtin = get_builtin(name)
        assert builtin is not None
        assert builtin.kind == "verifier"
        assert builtin.default_timeout == 5.0
        assert not builtin.bounded  # the sympy fallback needs a killable worker


@pytest.mark.parametrize(
    ("completion", "expected", "source"),
    [
        ("work...\n\nso $\\boxed{7}$", ("7",), "boxed"),
        ("The final answer is $\\frac{1}{2}$. I hope it is correct.", ("\\frac{1}{2}",),
         "final answer"),
        ("Answer: 12 apples", ("12",), "answer"),  # a sentence: its last expression
        ("**Answer:** $4$", ("4",), "answer"),
        ("5 + 5 = 10\n#### 10", ("10",), "####"),
        ("We find $x$ and then $x = 3$", ("x = 3",), "last expression"),
        ("after a long sentence with words the value 17 appears", ("17",), "last expression"),
        ("\\frac{3}{4}", ("\\frac{3}{4}",), "whole text"),
        ("Final answer: \\boxed{2}. The answer is 3.", ("2",), "boxed"),  # the box wins
        ("\\boxed{1} and \\boxed{2}", ("1", "2"), "boxed"),
        ("\\boxed{1}\n\nThen, \\boxed{2} or \\boxed{2}", ("2",), "boxed"),
        ("\\boxed{\\boxed{9}}", ("9",), "boxed"),
    ],
)
def test_extraction_order(completion: str, expected: tuple[str, ...], source: str) -> None:
    found = extract_answer(completion)
    assert found is not None
    assert (found.answers, found.source) == (expected, source)


def test_extraction_of_nothing() -> None:
    assert extract_answer("") is None
    assert extract_answer("   ") is None
    assert extract_answer("no box here", boxed_only=True) is None
    assert extract_answer("truncated \\boxed{12", boxed_only=True) is None


def test_reference_labels_with_a_box_or_a_gsm8k_marker() -> None:
    assert reference_text("so the answer is \\boxed{\\frac{1}{2}}.") == "\\frac{1}{2}"
    assert reference_text("48 + 24 = 72\n#### 72") == "72"
    assert reference_text(" 3\\sqrt{2} ") == "3\\sqrt{2}"


def test_math_scores_right_and_wrong() -> None:
    assert reward("math", "so the answer is $\\boxed{\\dfrac{1}{2}}$", "0.5") == 1.0
    assert reward("math", "The answer is 0.5", "\\frac12") == 1.0
    assert reward("math", "The answer is 0.6", "\\frac12") == 0.0
    assert reward("math", "I do not know", "\\frac12") == 0.0


def test_boxed_math_grades_only_the_box() -> None:
    assert reward("boxed_math", "so $\\boxed{(x+1)^2}$", "x^2+2x+1") == 1.0
    assert reward("boxed_math", "The final answer is 5", "5") == 0.0  # no box
    assert reward("math", "The final answer is 5", "5") == 1.0
    assert reward("boxed_math", "\\boxed{5} or maybe \\boxed{6}", "5") == 0.0
    assert reward("boxed_math", "$x = \\boxed{2}$ or $x = \\boxed{3}$", "2, 3") == 1.0


def test_a_list_of_references_means_any_of_them() -> None:
    assert reward("math", "\\boxed{4}", ["3", "4"]) == 1.0
    assert reward("math", "\\boxed{5}", ["3", "4"]) == 0.0
    assert reward("math", "\\boxed{0.25}", 0.25) == 1.0  # numbers as references
    assert reward("math", "\\boxed{7}", 7) == 1.0


@pytest.mark.parametrize("answer", [None, "", "   ", [], "\\frac{1}{", "\\sqrt(2)", "1 +"])
def test_an_unreadable_reference_raises_instead_of_scoring_zero(answer: Any) -> None:
    builtin = get_builtin("math")
    assert builtin is not None
    with pytest.raises(ValueError, match="unparseable reference"):
        builtin.func("\\boxed{1}", answer)
    verdict = check("\\boxed{1}", answer)
    assert (verdict.equal, verdict.status) == (False, "error")


def test_an_unreadable_reference_still_matches_the_same_text() -> None:
    # The dataset's odd spelling, copied exactly, is right: no error for the model.
    assert reward("math", "\\boxed{2:1}", "2:1") == 1.0


def test_numbers_too_large_to_compare_raise_quickly() -> None:
    builtin = get_builtin("math")
    assert builtin is not None
    with pytest.raises(ValueError, match="too large"):
        builtin.func("\\boxed{5^{5^{5^{5^5}}}}", "5")
    tower = "\\dfrac{5^{(5^{(5^{(5^5)})}-4)}-5}{16}"
    assert reward("math", f"\\boxed{{{tower}}}", tower) == 1.0


def test_verdicts_say_why() -> None:
    verdict = check("4\\sqrt(2)", "4")
    assert not verdict.equal and "malformed" in verdict.reason
    verdict = check("\\boxed{3} \\boxed{4}", "3")
    assert "several different boxed answers" in verdict.reason
    assert check("\\boxed{3}", "3").extracted == "3"
