"""Exact equality of products of rational powers: ``2\\sqrt2`` = ``\\sqrt8``, ``2^{2^{-1000}}`` ≠ 1.

A value ``c · r1^e1 · r2^e2 ···`` with rational ``c``, positive rational bases ``r`` and rational
exponents ``e`` (roots, powers, their products and quotients) is a *monomial*. Two monomials are
equal exactly when their quotient is 1; raising the quotient to the least common denominator
``L`` of its exponents gives a rational ``∏ r^(e·L)`` that is 1 exactly when the quotient is,
since a positive real has one positive ``L``-th root. So the decision is exact, with no
precision to run out of: ``[1, ∞)`` and ``[2^{2^{-1000}}, ∞)`` differ although their ends
agree to 300 digits. When the exact product would pass the size bound, nothing is decided and
the caller probes numerically as before.
"""

from __future__ import annotations

import math
from fractions import Fraction

from .fastpath import MAX_BITS, TooLarge, Undefined, exact_value
from .nodes import Div, Func, Mul, Neg, Node, Num, Pow

__all__ = ["monomials_equal"]

Monomial = tuple[Fraction, tuple[tuple[Fraction, Fraction], ...]]  # (c, ((base, exp), ...))
_MAX_FACTORS = 32


def _monomial(node: Node, depth: int = 0) -> Monomial | None:
    """``node`` as (coefficient, ((positive base, exponent), ...)), or None."""
    if depth > 40:
        return None
    if isinstance(node, Num):
        return node.value, ()
    if isinstance(node, Neg):
        inner = _monomial(node.arg, depth + 1)
        return None if inner is None else (-inner[0], inner[1])
    if isinstance(node, Mul):
        coefficient = Fraction(1)
        factors: tuple[tuple[Fraction, Fraction], ...] = ()
        for part in node.factors:
            inner = _monomial(part, depth + 1)
            if inner is None:
                return None
            coefficient *= inner[0]
            factors += inner[1]
        return coefficient, factors
    if isinstance(node, Div):
        num, den = _monomial(node.num, depth + 1), _monomial(node.den, depth + 1)
        if num is None or den is None or den[0] == 0:
            return None
        return num[0] / den[0], num[1] + tuple((base, -exp) for base, exp in den[1])
    if isinstance(node, Pow):
        return _power(node.base, exact_value(node.exp), depth)
    if isinstance(node, Func) and node.name == "sqrt":
        index = exact_value(node.args[1]) if len(node.args) > 1 else Fraction(2)
        if index is None or index.denominator != 1 or index <= 0:
            return None
        return _power(node.args[0], 1 / index, depth)
    return None


def _power(base_node: Node, exponent: Fraction | None, depth: int) -> Monomial | None:
    base = _monomial(base_node, depth + 1)
    if base is None or exponent is None:
        return None
    coefficient, factors = base
    factors = tuple((b, e * exponent) for b, e in factors)
    if coefficient == 0:
        return None  # 0 to a power: left to the exact and numeric paths
    if exponent.denominator == 1 and abs(exponent) <= 64 and \
            _bits(coefficient) * abs(exponent) <= MAX_BITS:
        return coefficient ** int(exponent), factors
    if coefficient < 0:
        return None  # a root of a negative number
    return Fraction(1), ((coefficient, exponent), *factors)


def _bits(value: Fraction) -> int:
    return max(value.numerator.bit_length(), value.denominator.bit_length())


def monomials_equal(a: Node, b: Node) -> bool | None:
    """Whether ``a`` equals ``b``, decided exactly when both are monomials; else None."""
    try:
        left, right = _monomial(a), _monomial(b)
    except (TooLarge, Undefined, ZeroDivisionError, OverflowError):
        return None
    if left is None or right is None or len(left[1]) + len(right[1]) > _MAX_FACTORS:
        return None
    if not left[1] and not right[1]:
        return None  # two rationals: the exact path decides those
    (ca, fa), (cb, fb) = left, right
    if ca == 0 or cb == 0 or (ca > 0) != (cb > 0):
        return ca == cb == 0
    exponents: dict[Fraction, Fraction] = {}
    for base, exp in (*fa, *((base, -exp) for base, exp in fb), (ca / cb, Fraction(1))):
        if base != 1 and exp != 0:
            exponents[base] = exponents.get(base, Fraction(0)) + exp
    terms = [(base, exp) for base, exp in exponents.items() if exp != 0]
    if not terms:
        return True
    common = math.lcm(*(exp.denominator for _, exp in terms))
    powers = [(base, exp * common) for base, exp in terms]
    if sum(_bits(base) * abs(power) for base, power in powers) > MAX_BITS:
        return None
    product = Fraction(1)
    for base, power in powers:
        product *= base ** int(power)
    return product == 1
