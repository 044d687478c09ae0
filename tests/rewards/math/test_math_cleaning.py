"""Reading what data and models write: doubled escapes, decimal commas, bases, long integers,
references with several boxes, and the properties these rules must keep."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardsmith.mathcheck import math_equal
from rewardsmith.rewards.mathanswer import check
from rewardsmith.rewards.mathanswer.check import MAX_INTEGER_DIGITS
from rewardsmith.rewards.mathanswer.extraction import extract_answer, reference_text
from rewardsmith.rewards.mathanswer.latex import clean, decimal_comma, undouble

PROPERTY = settings(max_examples=60, deadline=None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1000,99", "1000.99"), ("1,22", "1.22"), ("0,111", "0.111"), ("-3,5", "-3.5"),
        ("1,000", None),  # a thousand
        ("12,345", None), ("1, 22", None), ("01,5", None), ("1,2,3", None), ("x,5", None),
    ],
)
def test_decimal_comma_only_where_no_thousands_separator_can_be(
        text: str, expected: str | None) -> None:
    assert decimal_comma(text) == expected


@given(st.integers(min_value=1000, max_value=10**12))
@PROPERTY
def test_thousands_separators_are_never_decimal_commas(n: int) -> None:
    spelled = f"{n:,}"
    assert decimal_comma(spelled) is None
    assert check(spelled, str(n), symbolic=False).equal


def test_doubled_escapes_are_undone_but_row_breaks_kept() -> None:
    assert undouble("\\\\frac{1}{2}") == "\\frac{1}{2}"
    assert undouble("\\\\left(3, \\\\pi\\\\right)") == "\\left(3, \\pi\\right)"
    matrix = "\\begin{pmatrix}1 & 2 \\\\ 3 & 4\\end{pmatrix}"
    assert undouble(matrix) == matrix
    assert undouble("a \\\\ b \\\\\\end{pmatrix}") == "a \\\\ b \\\\\\end{pmatrix}"
    assert clean("185\\") == "185"
    assert clean("x_1 = 1,\\quadx_2 = 2") == "x_1 = 1, x_2 = 2"


@pytest.mark.parametrize(
    ("completion", "reference", "equal"),
    [
        ("1112112_3", "1121", True), ("101_{2}", "5", True), ("1112112_3", "1112112_3", True),
        ("1112122_3", "1112112_3", False), ("1113_3", "40", False),  # 3 is no base-3 digit
        ("033", "33", True), ("-0", "0", True), ("+7", "7", True), ("-7", "7", False),
    ],
)
def test_bases_and_integer_spellings(completion: str, reference: str, equal: bool) -> None:
    assert check(completion, reference, symbolic=False).equal is equal


def test_long_integers_compare_exactly_and_past_the_bound_are_an_error() -> None:
    digits = "3" * 200_000
    start = time.perf_counter()
    assert math_equal(f"so the answer is $\\boxed{{{digits}}}$", digits).equal
    assert not math_equal(digits[:-1] + "4", digits).equal
    assert time.perf_counter() - start < 2.0
    huge = "9" * (MAX_INTEGER_DIGITS + 1)
    verdict = math_equal(huge, huge)
    assert verdict.status == "error" and "digits" in verdict.reason


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("\\boxed{1} and \\boxed{2}", "\\{1, 2\\}"),
        ("$\\boxed{1}\\boxed{2}$", "\\{1, 2\\}"),
        ("\\boxed{35} ++ \\boxed{4}", "\\{35, 4\\}"),
        ("\\boxed{1} no no no \\boxed{2}", "2"),  # words without a separator: steps
        ("\\boxed{1}\n\nthen \\boxed{7}", "7"),  # only the last paragraph with boxes
        ("\\\\boxed{\\\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{x = 1", "x = 1"),  # a box left open
    ],
)
def test_reference_boxes(reference: str, expected: str) -> None:
    assert reference_text(reference) == expected


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("Final Answer: The largest $n$ is 34.", "34"),
        ("\\boxed{200} then \\boxed{255}. Final Answer: The final answer is $10,455$.",
         "10,455"),
        ("The final answer is $12$ and $13$.", "12, 13"),
        ("Answer $ \n 9 \n $", None),
        ("Answer \\( \n 9 \n \\)", None),
        ("AZYUK2A", None),
        ("Answer $ \\frac{1}{2} \\$ = \\frac{10}{9} $", "\\frac{1}{2} \\$ = \\frac{10}{9}"),
    ],
)
def test_extraction_from_sentences_and_delimiters(completion: str, expected: str | None) -> None:
    found = extract_answer(completion)
    assert (found.answers[0] if found else None) == expected


@given(st.lists(st.integers(min_value=-50, max_value=50), min_size=2, max_size=5, unique=True),
       st.randoms())
@PROPERTY
def test_several_reference_boxes_are_a_set(values: list[int], rng: object) -> None:
    reference = " and ".join(f"\\boxed{{{v}}}" for v in values)
    shuffled = list(values)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    assert check(f"\\boxed{{{', '.join(map(str, shuffled))}}}", reference, symbolic=False).equal
    # One box of several is not the answer; neither is a list with one value changed.
    assert not check(f"\\boxed{{{values[0]}}}", reference, symbolic=False).equal
    changed = [*values[:-1], values[-1] + 101]
    assert not check(f"\\boxed{{{', '.join(map(str, changed))}}}", reference,
                     symbolic=False).equal


@given(st.integers(min_value=-20, max_value=20).filter(bool),
       st.integers(min_value=-20, max_value=20), st.integers(min_value=-20, max_value=20))
@PROPERTY
def test_an_equation_without_a_named_side_states_no_value(a: int, b: int, c: int) -> None:
    # a*x + b*y = c names nothing: c alone never answers it; y = a*x + c does answer a*x + c.
    reference = f"{a}x + {b}y = {c}" if b else f"{a}x + y = {c}"
    assert not check(str(c), reference, symbolic=False).equal
    assert check(f"{a}x + {c}", f"y = {a}x + {c}", symbolic=False).equal


@given(st.integers(min_value=-30, max_value=30).filter(bool),
       st.integers(min_value=-30, max_value=30), st.sampled_from(["<", "\\le", ">", "\\ge"]))
@PROPERTY
def test_linear_inequalities_match_their_solved_form(a: int, b: int, op: str) -> None:
    # a*x + b  op  0  is  x op' -b/a, with the direction flipped when a < 0.
    flips = {"<": ">", "\\le": "\\ge", ">": "<", "\\ge": "\\le"}
    solved_op = op if a > 0 else flips[op]
    bound = f"\\frac{{{-b}}}{{{a}}}"
    assert check(f"x {solved_op} {bound}", f"{a}x + {b} {op} 0", symbolic=False).equal
    assert not check(f"x {flips[solved_op]} {bound}", f"{a}x + {b} {op} 0",
                     symbolic=False).equal
