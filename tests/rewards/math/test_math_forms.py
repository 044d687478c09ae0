"""Answer forms read exactly: powers side by side, sequences, mixed numbers, times of day,
functions and graphs, degrees in trigonometric functions, vectors against lists, glued units,
and exact decisions where a precision would round a difference away."""

from __future__ import annotations

import time

import pytest

from rewardsmith.mathcheck import math_equal
from rewardsmith.rewards.mathanswer.parser import parse
from rewardsmith.rewards.mathanswer.radicals import monomials_equal

EQUAL = [
    # products of powers written side by side
    ("2^6 3^5 5^4", "2^6 * 3^5 * 5^4"),
    ("2^{6} 3^{5} 5^{4}", "2^6 \\cdot 3^5 \\cdot 5^4"),
    ("2^6 3^5 5^4", "9720000"),
    # sequences
    ("1, 3, 5, \\ldots, 99", "1, 3, 5, \\dots, 99"),
    ("1, 3, 5, …, 99", "1, 3, 5, \\cdots, 99"),
    # mixed numbers
    ("1 1/2", "1.5"),
    ("1\\frac12", "\\frac32"),
    ("-2 3/4", "-2.75"),
    # times of day
    ("20:34:00", "20:34"),
    ("08:34 \\text{P.M.}", "20:34"),
    ("8:34 pm", "20:34:00"),
    ("12:05 a.m.", "0:05"),
    ("12:30 P.M.", "12:30"),
    # functions and graphs
    ("y = 2x + 3", "f(x) = 2x + 3"),
    ("f(x) = 2x + 3", "y = 3 + 2x"),
    # degrees inside trigonometric functions
    ("\\frac12", "\\sin 30^\\circ"),
    ("\\cos(x)", "\\sin(90^{\\circ}-x)"),
    ("\\frac{\\sqrt3}{2}", "\\cos 30°"),
    # vectors against lists
    ("[0.5, 1]", "\\begin{matrix} \\frac12 \\\\ 1 \\end{matrix}"),
    ("(0.5, 1)", "\\begin{pmatrix} \\frac12 \\\\ 1 \\end{pmatrix}"),
    # units written apart or spelled out
    ("10 cm", "10"),
    ("10weeks", "10"),
    ("10\\text{ cm}^2", "10"),
    # exact roots and powers
    ("\\sqrt8", "2\\sqrt2"),
    ("\\sqrt[3]{16}", "2\\sqrt[3]{2}"),
    ("2^{1/2} 3^{1/2}", "\\sqrt6"),
    ("\\frac{\\sqrt3}{3}", "\\frac{1}{\\sqrt3}"),
    ("\\sqrt2 + 2^{1000}", "2^{1000} + \\sqrt2"),
    ("1.414", "\\sqrt2"),  # a rounded decimal as the whole answer
]

NOT_EQUAL = [
    ("2^6 3^5", "2^6 \\cdot 35"),
    ("99, \\ldots, 5, 3, 1", "1, 3, 5, \\ldots, 99"),
    ("1, 3, 99", "1, 3, \\ldots, 99"),
    ("1, 1/2", "1 1/2"),
    ("3 5/2", "5.5"),  # not a proper fraction: no mixed number
    ("8:34 P.M.", "8:34"),
    ("8:34 A.M.", "20:34"),
    ("20:35", "20:34:00"),
    ("g(x) = x^2", "y = 2x"),
    ("\\sin 30", "\\frac12"),  # radians without the degree sign
    ("30^\\circ", "\\frac{\\pi}{6}"),  # an angle alone is its number of degrees
    ("[0.5, 1]", "\\begin{matrix} 1 \\\\ \\frac12 \\end{matrix}"),
    ("10cm", "10"),
    ("10m", "10"),
    # differences finer than any fixed precision
    ("[2^{\\frac{1}{2^{1000}}}, \\infty)", "[1, +\\infty)"),
    ("2^{\\frac{1}{2^{1000}}}", "1"),
    ("1 + 2^{\\frac{1}{2^{1000}}}", "2"),
    ("\\pi + 10^{-40}", "\\pi"),
    ("\\sqrt2 + 2^{1000} + 1", "2^{1000} + \\sqrt2"),
    ("-\\sqrt2", "\\sqrt2"),
    ("x + 1.414i", "x + \\sqrt2 i"),  # a rounded coefficient is not the value
]


@pytest.mark.parametrize(("completion", "reference"), EQUAL)
def test_equal_forms(completion: str, reference: str) -> None:
    verdict = math_equal(completion, reference)
    assert verdict.status == "ok" and verdict.equal, verdict
    assert math_equal(reference, completion).equal  # either side may be the reference


@pytest.mark.parametrize(("completion", "reference"), NOT_EQUAL)
def test_forms_that_differ(completion: str, reference: str) -> None:
    verdict = math_equal(completion, reference)
    assert verdict.status == "ok" and not verdict.equal, verdict


def test_roots_and_powers_are_decided_without_precision() -> None:
    assert monomials_equal(parse("2^{2^{-1000}}"), parse("1")) is False
    assert monomials_equal(parse("\\sqrt{2^{2001}}"), parse("2^{1000}\\sqrt2")) is True
    assert monomials_equal(parse("1 + \\sqrt2"), parse("\\sqrt2 + 1")) is None  # a sum
    assert monomials_equal(parse("\\sqrt{-2}"), parse("\\sqrt2 i")) is None  # not real
    # Too large to raise to the common denominator: left to the probe, never computed.
    assert monomials_equal(parse("2^{3^{-200}}"), parse("3^{2^{-200}}")) is None
    assert monomials_equal(parse("3^{2^{-5000}}"), parse("2^{2^{-5000}}")) is False


def test_fine_differences_are_decided_quickly() -> None:
    start = time.perf_counter()
    for _ in range(20):
        assert not math_equal("\\pi + 2^{-3000}", "\\pi").equal
    assert time.perf_counter() - start < 5.0
