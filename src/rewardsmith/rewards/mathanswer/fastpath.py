"""Exact evaluation of numeric answers with ``fractions.Fraction``: no floats, no sympy.

``exact_value`` returns the exact rational value of a tree, or None when the value is not a
rational constant (it has symbols, pi, an irrational root...). Sizes are bounded before any
arithmetic: a power or factorial whose result would pass ``MAX_BITS`` raises ``TooLarge``
instead of running for hours (``5^{5^{5^5}}`` has more digits than there are atoms).
"""

from __future__ import annotations

import math
from fractions import Fraction

from .nodes import Add, Div, Func, Mul, Neg, Node, Num, Percent, Pow

__all__ = ["TooLarge", "Undefined", "exact_value", "decimal_written", "written_matches",
           "MAX_BITS"]

MAX_BITS = 200_000  # about 60,000 digits: far past any real answer, still milliseconds
_MAX_FACTORIAL = 5_000
_MAX_BINOM = 20_000


class TooLarge(ArithmeticError):
    """A value too large to compute exactly (or at all) within the size bounds."""


class Undefined(ArithmeticError):
    """A value that does not exist: a division by zero, 0 to a negative power."""


def _bits(value: Fraction) -> int:
    return max(value.numerator.bit_length(), value.denominator.bit_length())


def _check(value: Fraction) -> Fraction:
    if _bits(value) > MAX_BITS:
        raise TooLarge("value too large to compute exactly")
    return value


def _iroot(n: int, k: int) -> int | None:
    """The exact integer k-th root of n >= 0, or None."""
    if n < 2:
        return n
    guess = round(n ** (1.0 / k)) if n.bit_length() < 1000 else _newton_root(n, k)
    for candidate in (guess - 1, guess, guess + 1):
        if candidate >= 0 and candidate**k == n:
            return candidate
    return None


def _newton_root(n: int, k: int) -> int:
    x = 1 << (n.bit_length() // k + 1)
    while True:
        y = ((k - 1) * x + n // x ** (k - 1)) // k
        if y >= x:
            return x
        x = y


def _rational_root(value: Fraction, k: int) -> Fraction | None:
    if k <= 0:
        return None
    if value < 0:
        if k % 2 == 0:
            return None
        root = _rational_root(-value, k)
        return None if root is None else -root
    num = _iroot(value.numerator, k)
    den = _iroot(value.denominator, k)
    return None if num is None or den is None else Fraction(num, den)


def _power(base: Fraction, exp: Fraction) -> Fraction | None:
    if exp.denominator != 1:
        if exp.denominator > 1000:
            return None
        root = _rational_root(base, exp.denominator)
        if root is None:
            return None
        return _power(root, Fraction(exp.numerator))
    n = exp.numerator
    if base == 0:
        if n < 0:
            raise Undefined("0 to a negative power")
        return Fraction(1) if n == 0 else Fraction(0)
    if base in (1, -1):
        return base**n
    if _bits(base) * abs(n) > MAX_BITS:
        raise TooLarge("power too large to compute exactly")
    return base**n


def exact_value(node: Node) -> Fraction | None:
    """The exact rational value of ``node``, or None when it is not a rational constant."""
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Neg):
        inner = exact_value(node.arg)
        return None if inner is None else -inner
    if isinstance(node, Add):
        total = Fraction(0)
        missing = False
        for term in node.terms:
            value = exact_value(term)
            if value is None:
                missing = True
            else:
                total = _check(total + value)
        return None if missing else total
    if isinstance(node, Mul):
        product = Fraction(1)
        missing = False
        for factor in node.factors:
            value = exact_value(factor)
            if value is None:
                missing = True
            else:
                product = _check(product * value)
        return None if missing else product
    if isinstance(node, Div):
        num, den = exact_value(node.num), exact_value(node.den)
        if den == 0:
            raise Undefined("division by zero")
        return None if num is None or den is None else num / den
    if isinstance(node, Pow):
        base = exact_value(node.base)
        exp = exact_value(node.exp)
        if exp is None or base is None:
            return None
        return _power(base, exp)
    if isinstance(node, Percent):
        inner = exact_value(node.arg)
        return None if inner is None else inner / 100
    if isinstance(node, Func):
        return _function(node)
    return None


def _function(node: Func) -> Fraction | None:
    args = [exact_value(a) for a in node.args]
    if any(a is None for a in args):
        return None
    values: list[Fraction] = args  # type: ignore[assignment]
    name = node.name
    if name == "sqrt":
        index = values[1] if len(values) > 1 else Fraction(2)
        if index.denominator != 1 or index <= 0:
            return None
        return _rational_root(values[0], int(index))
    if name == "factorial":
        x = values[0]
        if x.denominator != 1 or x < 0:
            return None  # the numeric path has Gamma
        if x > _MAX_FACTORIAL:
            raise TooLarge("factorial too large to compute exactly")
        return Fraction(math.factorial(int(x)))
    if name == "binom":
        n, k = values
        if n.denominator != 1 or k.denominator != 1 or n < 0:
            return None
        if n > _MAX_BINOM:
            raise TooLarge("binomial too large to compute exactly")
        return Fraction(math.comb(int(n), int(k)) if k >= 0 else 0)
    if name == "abs":
        return abs(values[0])
    if name == "floor":
        return Fraction(math.floor(values[0]))
    if name == "ceil":
        return Fraction(math.ceil(values[0]))
    return None  # sin, log, exp...: numeric path


def decimal_written(node: Node) -> tuple[Fraction, int, int] | None:
    """(value, decimal places, significant digits) when ``node`` is one decimal as written.

    ``0.333``, ``-2.50`` and ``3.33\\times10^{-1}`` qualify; ``1/3`` and ``0.5\\pi`` do not.
    """
    sign = 1
    if isinstance(node, Neg):
        sign, node = -1, node.arg
    if isinstance(node, Num) and node.places is not None:
        return sign * node.value, node.places, node.digits
    if isinstance(node, Mul) and len(node.factors) == 2:
        mantissa, power = node.factors
        if (isinstance(mantissa, Num) and mantissa.places is not None and isinstance(power, Pow)
                and power.base == Num(Fraction(10))):
            exp = exact_value(power.exp) if isinstance(power.exp, (Num, Neg)) else None
            if exp is not None and exp.denominator == 1 and abs(exp) < 400:
                places = mantissa.places - int(exp)
                value = sign * mantissa.value * Fraction(10) ** int(exp)
                return value, places, mantissa.digits
    return None


def written_matches(written: tuple[Fraction, int, int], other: Fraction) -> bool:
    """The tolerance rule for a decimal an answer wrote (``0.333`` for 1/3).

    A decimal with ``k`` places and at least 3 significant digits matches a value with more
    precision than it when it is that value rounded or truncated to ``k`` places: 0.333 and
    0.3333 match 1/3, 0.667 and 0.666 match 2/3, 3.14 matches pi. 0.33 (2 significant digits),
    0.334, 0.665 and 3.15 do not. A value that fits in ``k`` places (2, 0.45) must be exact.
    """
    value, places, digits = written
    unit = Fraction(10) ** -places
    scaled = other / unit
    if digits < 3 or scaled.denominator == 1:
        return False
    down, up = math.floor(scaled), math.ceil(scaled)
    allowed = {down if other >= 0 else up}  # truncated toward zero
    half = scaled - down
    if half >= Fraction(1, 2):
        allowed.add(up)
    if half <= Fraction(1, 2):
        allowed.add(down)
    return value / unit in allowed
