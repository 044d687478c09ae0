"""Property tests for the math answer parser and comparer.

The same value in any spelling must be equal; a changed value must not be. Arbitrary text
must never raise, and must come back quickly.
"""

from __future__ import annotations

import time
from fractions import Fraction

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from rewardsmith.rewards.mathanswer import check
from rewardsmith.rewards.mathanswer.fastpath import written_matches

FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def equal(completion: str, reference: str) -> bool:
    verdict = check(completion, reference, symbolic=False)
    assert verdict.status == "ok", (completion, reference, verdict)
    return verdict.equal


def _latex_thousands(n: int) -> str:
    return f"{n:,}".replace(",", "{,}")


INTEGER_SPELLINGS = [
    str, lambda n: f"{n:,}", _latex_thousands, lambda n: f"{n:,}".replace(",", "\\,"),
    lambda n: f"{n}.0", lambda n: f"{n}.00", lambda n: f"\\boxed{{{n}}}", lambda n: f"${n}$",
    lambda n: f"{n}\\text{{ cm}}", lambda n: f"{n}^\\circ", lambda n: f"\\frac{{{2 * n}}}{{2}}",
    lambda n: f"x = {n}", lambda n: f"\\mathbf{{{n}}}",
]


@FAST
@given(st.integers(-10**12, 10**12), st.sampled_from(INTEGER_SPELLINGS))
@example(1000, INTEGER_SPELLINGS[2])
def test_an_integer_in_any_spelling_is_equal(n: int, spell: object) -> None:
    assert callable(spell)
    assert equal(spell(n), str(n))


@FAST
@given(st.integers(-10**12, 10**12), st.integers(-10**6, 10**6).filter(bool),
       st.sampled_from(INTEGER_SPELLINGS))
def test_a_changed_integer_is_not_equal(n: int, delta: int, spell: object) -> None:
    assert callable(spell)
    assert not equal(spell(n + delta), str(n))


def _terminating(value: Fraction) -> str | None:
    """The exact decimal of ``value`` when it has one (denominator 2^a 5^b)."""
    den = value.denominator
    places = 0
    while den % 10 == 0 or den % 2 == 0 or den % 5 == 0:
        if places > 30:
            return None
        places += 1
        den = (value * 10**places).denominator
    if den != 1:
        return None
    scaled = value * 10**places
    text = str(abs(scaled.numerator)).rjust(places + 1, "0")
    body = f"{text[:-places]}.{text[-places:]}" if places else text
    return ("-" if value < 0 else "") + body


def _fixed(value: Fraction, places: int) -> str:
    """``value`` (a multiple of 10^-places) written with exactly ``places`` decimals."""
    scaled = value * 10**places
    assert scaled.denominator == 1
    digits = str(abs(scaled.numerator)).rjust(places + 1, "0")
    body = f"{digits[:-places]}.{digits[-places:]}" if places else digits
    return ("-" if value < 0 else "") + body


def _fraction_spellings(a: int, b: int, k: int) -> list[str]:
    value = Fraction(a, b)
    sign = "-" if value < 0 else ""
    num, den = abs(value.numerator), value.denominator
    out = [f"\\frac{{{a}}}{{{b}}}", f"\\dfrac{{{a}}}{{{b}}}", f"\\tfrac{{{a}}}{{{b}}}", f"{a}/{b}",
           f"\\frac{{{a * k}}}{{{b * k}}}", f"{sign}\\frac{{{num}}}{{{den}}}",
           f"\\boxed{{{sign}{num}/{den}}}"]
    if num < 10 and den < 10:
        out.append(f"{sign}\\frac{num}{den}")  # \frac12
    if num > den and den > 1:
        out.append(f"{sign}{num // den}\\frac{{{num % den}}}{{{den}}}")  # mixed number
    decimal = _terminating(value)
    if decimal is not None:
        out.append(decimal)
    return out


@FAST
@given(st.integers(-999, 999), st.integers(1, 999), st.integers(1, 5), st.data())
def test_a_fraction_in_any_spelling_is_equal(a: int, b: int, k: int, data: st.DataObject) -> None:
    spelled = data.draw(st.sampled_from(_fraction_spellings(a, b, k)))
    assert equal(spelled, f"\\frac{{{a}}}{{{b}}}")
    assert equal(f"\\frac{{{a}}}{{{b}}}", spelled)  # symmetric


@FAST
@given(st.integers(-999, 999), st.integers(1, 999), st.integers(1, 5), st.data())
def test_a_changed_fraction_is_not_equal(a: int, b: int, k: int, data: st.DataObject) -> None:
    spelled = data.draw(st.sampled_from(_fraction_spellings(a + 1, b, k)))
    if "\\" not in spelled and "." in spelled:
        # A decimal with 3+ significant digits is allowed to be a/b truncated or rounded to
        # the places it wrote (docs/math.md): -63.2 answers -949/15 = -63.266...
        whole, _, places = spelled.lstrip("-").partition(".")
        digits = len((whole + places).lstrip("0"))
        assume(not written_matches((Fraction(spelled), len(places), digits), Fraction(a, b)))
    assert not equal(spelled, f"\\frac{{{a}}}{{{b}}}")


@FAST
@given(st.integers(1, 99999), st.integers(0, 4), st.integers(-30, 30))
def test_scientific_notation_is_the_number_it_names(mantissa: int, places: int, exp: int) -> None:
    value = Fraction(mantissa, 10**places) * Fraction(10) ** exp
    written = _fixed(Fraction(mantissa, 10**places), places)
    assert equal(f"{written}\\times10^{{{exp}}}", str(value.numerator) + (
        f"/{value.denominator}" if value.denominator > 1 else ""))
    assert equal(f"{written}e{exp}", f"{written} \\cdot 10^{{{exp}}}")
    assert not equal(f"{written}\\times10^{{{exp + 1}}}", f"{written}\\times10^{{{exp}}}")


@FAST
@given(st.lists(st.integers(-50, 50), min_size=2, max_size=6, unique=True), st.randoms())
def test_sets_are_order_free_and_tuples_are_not(items: list[int], rng: object) -> None:
    shuffled = list(items)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    as_set = ", ".join(map(str, items))
    assert equal(f"\\{{{', '.join(map(str, shuffled))}\\}}", f"\\{{{as_set}\\}}")
    assert equal(", ".join(map(str, shuffled)), as_set)
    same_order = shuffled == items
    assert equal(f"({', '.join(map(str, shuffled))})", f"({as_set})") == same_order
    assert not equal(f"\\{{{as_set}, 99\\}}", f"\\{{{as_set}\\}}")


@FAST
@given(st.integers(1, 10**6), st.integers(3, 10**6))
def test_a_decimal_matches_when_rounded_or_truncated_to_what_it_wrote(p: int, q: int) -> None:
    value = Fraction(p, q)
    assume(_terminating(value) is None)
    places = 6
    scaled = value * 10**places
    truncated = Fraction(scaled.numerator // scaled.denominator, 10**places)
    rounded = Fraction(round(scaled), 10**places)
    assume(truncated >= Fraction(1, 1000))  # at least 3 significant digits in 6 places
    reference = f"\\frac{{{p}}}{{{q}}}"
    for approx in (truncated, rounded):
        assert equal(_fixed(approx, places), reference)
    too_far = truncated - Fraction(1, 10**places)
    assert not equal(_fixed(too_far, places), reference)


@FAST
@given(st.integers(-20, 20), st.integers(-20, 20), st.integers(1, 5))
def test_polynomials_equal_their_factored_form(a: int, b: int, c: int) -> None:
    expanded = f"{c}x^2 + {c * (a + b)}x + {c * a * b}"
    factored = f"{c}(x + {a})(x + {b})"
    assert equal(factored, expanded)
    assert not equal(f"{c}(x + {a})(x + {b + 1})", expanded)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.text(max_size=60))
@example("\\frac{1}{", "1")
@example("\\boxed{" * 50, "1")
@example("{" * 500 + "1" + "}" * 500, "1")
@example("5^{5^{5^{5^{5^5}}}}", "\\frac{1}{2^{99}}")
def test_arbitrary_text_never_raises_and_returns_quickly(completion: str, reference: str) -> None:
    start = time.perf_counter()
    verdict = check(completion, reference, symbolic=False)
    assert verdict.status in ("ok", "error", "undecided")
    assert isinstance(verdict.equal, bool)
    assert time.perf_counter() - start < 0.5
