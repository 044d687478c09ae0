"""Every core built-in against hand-labeled completions, edge cases included."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rewardsmith.rewards import all_builtins, get_builtin
from rewardsmith.rewards.extract import all_boxed, find_numbers, last_boxed, parse_number

MB = "x" * (1 << 20)
UNICODE = "مرحبا 👋🏽 é (e\u0301) \x00 ok"


def call(name: str, completion: str, answer: Any = None, **params: Any) -> Any:
    builtin = get_builtin(name)
    assert builtin is not None, name
    return builtin.func(completion, answer=answer, **params) if "answer" in _params(name) else \
        builtin.func(completion, **params)


def _params(name: str) -> set[str]:
    import inspect

    builtin = get_builtin(name)
    assert builtin is not None
    return set(inspect.signature(builtin.func).parameters)


# ---------------------------------------------------------------- gsm8k


@pytest.mark.parametrize(
    ("completion", "answer", "expected"),
    [
        ("48 / 2 = 24. 48 + 24 = 72.\n#### 72", "72", 1.0),  # correct
        ("So #### 72", "#### 72", 1.0),  # label is a whole GSM8K solution
        ("#### 1,000", 1000, 1.0),  # thousands separator
        ("#### $1,000.00", "1000", 1.0),  # currency and trailing .00
        ("#### 72.0", 72, 1.0),
        ("#### 72 apples", "72", 1.0),  # surrounding text
        ("The answer is 72.", "72", 1.0),  # no marker: last number
        ("#### 71", "72", 0.0),  # wrong
        ("#### 172", "72", 0.0),  # 172 is not 72
        ("The total is 72. #### ", "72", 0.0),  # marker with nothing after earns nothing
        ("", "72", 0.0),  # empty
        ("   \n\t ", "72", 0.0),  # whitespace only
        ("48 / 2 = 24. 48 + 24 = ", "72", 0.0),  # truncated mid-answer
        ("#### -5", "5", 0.0),  # sign matters
        ("#### -5", "-5", 1.0),
        (UNICODE + " #### 72", "72", 1.0),  # unicode around the answer
        (MB + "\n#### 72", "72", 1.0),  # a 1 MB completion
        ("#### 72", ["71", "72"], 1.0),  # several acceptable answers
    ],
)
def test_gsm8k(completion: str, answer: Any, expected: float) -> None:
    assert call("gsm8k", completion, answer) == expected


@pytest.mark.parametrize("label", [None, "", "   ", [], "no number here"])
def test_gsm8k_missing_or_bad_label_is_an_error_not_a_zero(label: Any) -> None:
    with pytest.raises(ValueError, match="reference answer"):
        call("gsm8k", "#### 72", label)


def test_gsm8k_non_string_label() -> None:
    assert call("gsm8k", "#### 72", 72) == 1.0
    assert call("gsm8k", "#### 72", 72.0) == 1.0
    with pytest.raises(ValueError):
        call("gsm8k", "#### 1", True)


# ---------------------------------------------------------------- number


@pytest.mark.parametrize(
    ("completion", "answer", "expected"),
    [
        ("so it is 42", "42", 1.0),
        ("so it is 142", "42", 0.0),  # 142 is not 42
        ("so it is 42.0", "42", 1.0),  # 42.0 is 42
        ("so it is 1,000", "1000", 1.0),
        ("so it is 1e3", "1000", 1.0),
        ("so it is -5", "5", 0.0),
        ("so it is 0.5", "1/2", 1.0),  # a fraction label is a value too
        ("", "42", 0.0),
        ("no digits at all", "42", 0.0),
        (UNICODE + " 42", "42", 1.0),
        (MB + " 42", 42, 1.0),
    ],
)
def test_number(completion: str, answer: Any, expected: float) -> None:
    assert call("number", completion, answer) == expected


# ---------------------------------------------------------------- text matches


def test_exact_normalized_f1() -> None:
    assert call("exact", "  Paris ", "Paris") == 1.0
    assert call("exact", "paris", "Paris") == 0.0
    assert call("normalized", "The  Paris!", "paris") == 1.0
    assert call("normalized", "", "paris") == 0.0
    assert call("f1", "the city of Paris", "Paris") == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))
    assert call("f1", "", "Paris") == 0.0
    assert call("f1", "Paris", ["London", "Paris"]) == 1.0
    assert call("exact", "42", 42) == 1.0
    assert call("normalized", UNICODE, "x") == 0.0
    with pytest.raises(ValueError):
        call("exact", "Paris", None)


# ---------------------------------------------------------------- choice


@pytest.mark.parametrize(
    ("completion", "answer", "expected"),
    [
        ("The answer is (B).", "B", 1.0),
        ("Answer: b", "B", 1.0),
        ("the answer is B.", "(B)", 1.0),
        ("After thinking, the answer is B. A is wrong because...", "B", 1.0),
        ("(B)", "B", 1.0),
        ("B", "B", 1.0),
        ("\\boxed{B}", "B", 1.0),
        ("The answer is (C).", "B", 0.0),
        ("A B C D", "B", 0.0),  # every candidate listed
        ("The answer is A or B.", "B", 0.0),  # several letters in the final answer
        ("", "B", 0.0),
        ("   ", "B", 0.0),
        ("The answer is", "B", 0.0),  # truncated
        ("The answer is (B)", 1, 1.0),  # 0-based option index
    ],
)
def test_choice(completion: str, answer: Any, expected: float) -> None:
    assert call("choice", completion, answer) == expected


def test_choice_bad_label() -> None:
    with pytest.raises(ValueError, match="not one letter"):
        call("choice", "B", "banana split")


# ---------------------------------------------------------------- format rules


def test_marker() -> None:
    assert call("marker", "work\n#### 72") == 1.0
    assert call("marker", "work\n####") == 0.0  # nothing after the marker
    assert call("marker", "#### 1 #### 2") == 0.0  # repeated marker
    assert call("marker", "#### 1 #### 2", max_count=2) == 1.0
    assert call("marker", "no marker") == 0.0
    assert call("marker", "Final: 3", marker="Final:") == 1.0
    assert call("marker", "") == 0.0
    with pytest.raises(ValueError):
        call("marker", "x", marker="")


def test_regex() -> None:
    assert call("regex", "Answer: 42", pattern=r"Answer: \d+") == 1.0
    assert call("regex", "answer: 42", pattern=r"Answer: \d+", flags="i") == 1.0
    assert call("regex", "x Answer: 42", pattern=r"Answer: \d+", full=True) == 0.0
    with pytest.raises(ValueError, match="does not compile"):
        call("regex", "x", pattern="(")


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("<think>work</think>The answer is 4.", 1.0),
        ("  <think>work</think>\n4", 1.0),
        ("<think>work</think>", 0.0),  # no answer after
        ("<think>work</think>   ", 0.0),
        ("<think></think>4", 0.0),  # empty thought
        ("<think>a<think>b</think></think>4", 0.0),  # nested
        ("</think>work<think>4", 0.0),  # mismatched order
        ("<think>work</think>4<think>more</think>", 0.0),  # repeated
        ("Preamble <think>work</think>4", 0.0),  # not at the start
        ("<think>work", 0.0),  # truncated inside the thought
        ("4", 0.0),  # missing
        ("", 0.0),
    ],
)
def test_think_format(completion: str, expected: float) -> None:
    assert call("think_format", completion) == expected


def test_length() -> None:
    assert call("length", "x" * 100, truncated=False, max_length=1000, buffer=200) == 0.0
    assert call("length", "x" * 900, truncated=False, max_length=1000, buffer=200) == -0.5
    assert call("length", "x" * 1000, truncated=False, max_length=1000, buffer=200) == -1.0
    assert call("length", "short", truncated=True) == -1.0
    assert call("length", "a b c", truncated=False, max_length=4, buffer=2, unit="words") == -0.5
    with pytest.raises(ValueError):
        call("length", "x", truncated=False, unit="tokens")


# ---------------------------------------------------------------- boxed twins


def test_boxed_prefix_grades_only_the_last_box() -> None:
    assert call("boxed_number", "I think 41. \\boxed{42}", 42) == 1.0
    assert call("boxed_number", "The answer is 42 but no box", 42) == 0.0  # never the whole text
    assert call("boxed_number", "\\boxed{41} then \\boxed{42}", 42) == 1.0
    assert call("boxed_choice", "\\boxed{\\text{(C)}}", "C") == 1.0
    assert call("boxed_gsm8k", "\\boxed{1,000}", "1000") == 1.0
    assert call("boxed_exact", "\\boxed{Paris}", "Paris") == 1.0
    assert call("boxed_number", "\\boxed{42", 42) == 0.0  # truncated box


def test_every_builtin_is_listed_with_a_description() -> None:
    names = {b.name for b in all_builtins()}
    for required in ("gsm8k", "number", "exact", "normalized", "f1", "choice", "marker", "regex",
                     "think_format", "length", "boxed_number", "boxed_choice", "boxed_gsm8k"):
        assert required in names
    assert all(b.description and len(b.description) < 200 for b in all_builtins())


# ---------------------------------------------------------------- extraction


def test_boxes() -> None:
    assert last_boxed("\\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert all_boxed("\\boxed{a} x \\fbox{b} \\boxed 5") == ["a", "b", "5"]
    assert last_boxed("\\boxedfoo{1}") is None
    assert last_boxed("no box") is None
    assert last_boxed("\\boxed{unclosed {") is None


@given(st.integers(min_value=-10**12, max_value=10**12))
def test_numbers_round_trip_in_every_spelling(value: int) -> None:
    spellings = [str(value), f"{value:,}", f"{value}.0", f"{value}.00"]
    for text in spellings:
        assert parse_number(text) == value
        assert parse_number(find_numbers(f"so it is {text} in all")[-1]) == value


@given(st.text(max_size=300))
def test_number_extraction_never_raises(text: str) -> None:
    for token in find_numbers(text):
        parse_number(token)
    all_boxed(text)
