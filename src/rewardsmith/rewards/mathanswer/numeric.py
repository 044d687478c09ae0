"""Numeric probing: evaluate both answers at fixed points with high-precision mpmath.

Two expressions that agree to 30+ digits at several unrelated points are the same function
(for the polynomials, roots, logs and trig functions answers are made of); one clear
disagreement proves they differ. A disagreement is confirmed at a second, higher precision,
so a difference that is only rounding noise (``\\sin\\pi`` vs ``0``) is not mistaken for a
real one. This replaces most calls to ``sympy.simplify`` at a fraction of the cost. Rational
values never get here (``fastpath`` compares them exactly), nor products of rational powers
(``radicals``). A difference finer than one part in 10^30 needs a constant finer than that in
the answer (``2^{1000}``, an exponent of ``2^{-1000}``, a 40-digit number): such a pair is
probed at a precision wider than its widest constant, so it is decided, not rounded away;
past ``FINE_LIMIT`` bits the probe gives up and sympy decides.

Sizes are bounded before evaluating: a power, exponential or factorial whose logarithm
passes ``LOG_LIMIT`` raises ``TooLarge``.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from functools import lru_cache
from typing import Any

import mpmath

from .fastpath import TooLarge, Undefined, exact_value, written_matches
from .nodes import (
    Add,
    Const,
    Div,
    Func,
    Inf,
    Mul,
    Neg,
    Node,
    Num,
    Percent,
    Pow,
    Sym,
    free_symbols,
    walk,
)

__all__ = ["NotScalar", "evaluate", "probe_equal", "probe_proportional", "approx_equal"]

EQ, NE, UNKNOWN = "eq", "ne", "unknown"
LOG_LIMIT = 1e8  # |ln value| bound: e^(10^8) has 43 million digits; beyond is refused
_TRIG_LIMIT = 1e6  # argument reduction of sin(10^1000) would need 1000-digit pi

# Private contexts: their precision is set once here and never changed, so no global state.
_LOW = mpmath.MPContext()
_LOW.dps = 40
_HIGH = mpmath.MPContext()
_HIGH.dps = 90
_EQ_REL = _LOW.mpf(10) ** -30
# Probe values for the variables: unrelated rationals away from 0, 1 and each other.
_PROBES = (Fraction(13, 17), Fraction(29, 19), Fraction(37, 53), Fraction(71, 31),
           Fraction(101, 89), Fraction(43, 97), Fraction(61, 23), Fraction(5, 11),
           Fraction(83, 41), Fraction(19, 67), Fraction(127, 73))
_POINTS = 4

Env = dict[str, Fraction]


class NotScalar(ValueError):
    """A collection or relation inside arithmetic: no single value to compare."""


def _num(ctx: Any, value: Fraction) -> Any:
    return ctx.mpf(value.numerator) / value.denominator


def evaluate(node: Node, ctx: Any, env: Env) -> Any:
    """The value of ``node`` in the mpmath context ``ctx`` (real or complex)."""
    if isinstance(node, Num):
        return _num(ctx, node.value)
    if isinstance(node, Sym):
        return _num(ctx, env[node.name])
    if isinstance(node, Const):
        if node.name == "pi":
            return +ctx.pi
        return +ctx.e if node.name == "e" else ctx.mpc(0, 1)
    if isinstance(node, Inf):
        return ctx.inf if node.sign > 0 else -ctx.inf
    if isinstance(node, Neg):
        return -evaluate(node.arg, ctx, env)
    if isinstance(node, Add):
        return ctx.fsum(evaluate(t, ctx, env) for t in node.terms)
    if isinstance(node, Mul):
        product = ctx.mpf(1)
        for factor in node.factors:
            product *= evaluate(factor, ctx, env)
        return product
    if isinstance(node, Div):
        den = evaluate(node.den, ctx, env)
        if den == 0:
            raise Undefined("division by zero")
        return evaluate(node.num, ctx, env) / den
    if isinstance(node, Pow):
        return _power(ctx, evaluate(node.base, ctx, env), evaluate(node.exp, ctx, env))
    if isinstance(node, Percent):
        return evaluate(node.arg, ctx, env) / 100
    if isinstance(node, Func):
        return _function(node, ctx, [evaluate(a, ctx, env) for a in node.args])
    raise NotScalar(type(node).__name__)


def _power(ctx: Any, base: Any, exp: Any) -> Any:
    if base == 0:
        if ctx.re(exp) <= 0:
            raise Undefined("0 to a non-positive power")
        return ctx.mpf(0)
    if abs(exp) > 1 and abs(exp) * abs(ctx.log(abs(base))) > LOG_LIMIT:
        raise TooLarge("power too large to evaluate")
    if ctx.im(base) == 0 and ctx.im(exp) == 0 and ctx.isint(exp):
        return ctx.power(base, int(exp)) if abs(exp) < 10**15 else ctx.power(base, exp)
    return ctx.power(base, exp)


def _real(ctx: Any, value: Any) -> Any:
    if ctx.im(value) != 0:
        raise Undefined("a real function of a complex value")
    return ctx.re(value)


def _function(node: Func, ctx: Any, args: list[Any]) -> Any:
    name, x = node.name, args[0]
    if name in ("sin", "cos", "tan", "cot", "sec", "csc") and abs(x) > _TRIG_LIMIT:
        raise TooLarge("trigonometric argument too large")
    if name in ("exp", "sinh", "cosh", "tanh") and abs(ctx.re(x)) > LOG_LIMIT:
        raise TooLarge("exponential too large")
    simple: dict[str, Callable[[Any], Any]] = {
        "sin": ctx.sin, "cos": ctx.cos, "tan": ctx.tan, "cot": ctx.cot, "sec": ctx.sec,
        "csc": ctx.csc, "arcsin": ctx.asin, "arccos": ctx.acos, "arctan": ctx.atan,
        "sinh": ctx.sinh, "cosh": ctx.cosh, "tanh": ctx.tanh, "exp": ctx.exp,
    }
    if name in simple:
        return simple[name](x)
    if name == "sqrt":
        index = args[1] if len(args) > 1 else 2
        if index == 2:
            return ctx.sqrt(x)
        if ctx.im(x) == 0 and x < 0 and ctx.isint(index) and int(index) % 2 == 1:
            return -ctx.root(-x, int(index))  # the real odd root, as in \sqrt[3]{-8} = -2
        return ctx.root(x, int(index)) if ctx.isint(index) else ctx.power(x, 1 / index)
    if name in ("log", "ln"):
        if x == 0:
            raise Undefined("log of zero")
        value = ctx.ln(x)
        if len(args) > 1:
            base = ctx.ln(args[1])
            if base == 0:
                raise Undefined("log base 1")
            value /= base
        return value
    if name == "abs":
        return abs(x)
    if name == "floor":
        return ctx.floor(_real(ctx, x))
    if name == "ceil":
        return ctx.ceil(_real(ctx, x))
    if name == "factorial":
        x = _real(ctx, x)
        if x > 1e7:
            raise TooLarge("factorial too large")
        if ctx.isint(x) and x < 0:
            raise Undefined("factorial of a negative integer")
        return ctx.factorial(x)
    if name == "binom":
        n, k = _real(ctx, x), _real(ctx, args[1])
        if abs(n) > 1e7:
            raise TooLarge("binomial too large")
        return ctx.binomial(n, k)
    raise NotScalar(f"unknown function {name}")


def _value(node: Node, ctx: Any, env: Env) -> Any:
    try:
        return evaluate(node, ctx, env)
    except (ZeroDivisionError, ValueError, OverflowError) as exc:
        if isinstance(exc, NotScalar):
            raise
        raise Undefined(str(exc)) from exc


def _special(ctx: Any, value: Any) -> bool:
    return bool(ctx.isinf(value) or ctx.isnan(value))


Precision = tuple[Any, Any, Any]  # (low context, high context, relative tolerance at low)
_DEFAULT: Precision = (_LOW, _HIGH, _EQ_REL)
FINE_LIMIT = 40_000  # bits: a constant finer than this is left to sympy
_COARSE_BITS = 96  # constants up to ~29 digits: the default probe resolves them


def _widest_constant(node: Node) -> int:
    """The bit size of the widest exact constant in ``node`` (a number, or a power of
    numbers such as ``2^{1000}`` or ``2^{-1000}``)."""
    widest = 0
    for part in walk(node):
        if isinstance(part, Num):
            value = part.value
        elif isinstance(part, Pow):
            try:
                found = exact_value(part)
            except TooLarge:
                return FINE_LIMIT + 1
            except Undefined:
                continue
            if found is None:
                continue
            value = found
        else:
            continue
        widest = max(widest, value.numerator.bit_length(), value.denominator.bit_length())
    return widest


@lru_cache(maxsize=16)
def _fine(bits: int) -> Precision:
    low, high = mpmath.MPContext(), mpmath.MPContext()
    low.prec, high.prec = bits + 128, bits + 384
    return low, high, low.mpf(2) ** -(bits + 64)


def _precision_for(a: Node, b: Node) -> Precision | None:
    """The probe's precision for ``a`` against ``b``; None when no probe is fine enough."""
    widest = max(_widest_constant(a), _widest_constant(b))
    if widest <= _COARSE_BITS:
        return _DEFAULT
    if widest > FINE_LIMIT:
        return None
    return _fine(-(-widest // 256) * 256)  # a few sizes, each made once


def _agree(first: Callable[[Any], Any], second: Callable[[Any], Any],
           precision: Precision = _DEFAULT) -> str:
    """Do two computed values agree? Tested at low precision, confirmed at high precision."""
    low, high_ctx, eq_rel = precision
    a, b = first(low), second(low)
    if _special(low, a) or _special(low, b):
        if low.isnan(a) or low.isnan(b):
            return UNKNOWN
        return EQ if a == b else NE
    diff = abs(a - b)
    if diff == 0 or diff <= eq_rel * max(abs(a), abs(b)):
        return EQ
    high = abs(first(high_ctx) - second(high_ctx))
    if high <= diff * low.mpf(10) ** -25:
        return EQ  # the low-precision difference was rounding noise
    if diff / 2 <= high <= diff * 2:
        return NE  # a real difference does not move with the precision
    return UNKNOWN


def _points(names: frozenset[str]) -> list[Env]:
    ordered = sorted(names)
    count = 1 if not ordered else _POINTS
    return [{name: _PROBES[(p * 5 + j * 3) % len(_PROBES)] for j, name in enumerate(ordered)}
            for p in range(count)]


def _at(node: Node, env: Env) -> Callable[[Any], Any]:
    """``node``'s value at ``env``, as a function of the precision context."""
    return lambda ctx: _value(node, ctx, env)


def _ratio_at(f: Node, g: Node, env: Env) -> Callable[[Any], Any]:
    def ratio(ctx: Any) -> Any:
        den = _value(g, ctx, env)
        if den == 0:
            raise Undefined("zero denominator")
        return _value(f, ctx, env) / den

    return ratio


def _zero(ctx: Any) -> Any:
    return ctx.mpf(0)


def probe_equal(a: Node, b: Node) -> str:
    """``eq``, ``ne`` or ``unknown``: do ``a`` and ``b`` take the same values?"""
    names = free_symbols(a) | free_symbols(b)
    precision = _precision_for(a, b)
    if precision is None:
        return UNKNOWN
    agreed = 0
    for env in _points(names):
        try:
            verdict = _agree(_at(a, env), _at(b, env), precision)
        except Undefined:
            continue  # outside the domain at this point: try the others
        if verdict != EQ:
            return verdict
        agreed += 1
    return EQ if agreed >= (2 if names else 1) else UNKNOWN


def probe_proportional(f: Node, g: Node, *, positive: bool = False) -> str:
    """Is ``f = c * g`` for a constant ``c != 0`` (``c > 0`` with ``positive``)?

    This is how equations compare: ``2x - y + 1 = 0`` and ``y = 2x + 1`` are the same line,
    while ``y = 2x + 1`` and ``y = 3x - 4`` are not, even though both move to ``... = 0``.
    """
    names = free_symbols(f) | free_symbols(g)
    ratios: list[Callable[[Any], Any]] = []
    for env in _points(names):
        try:
            f_zero = _agree(_at(f, env), _zero) == EQ
            g_zero = _agree(_at(g, env), _zero) == EQ
        except Undefined:
            continue
        if f_zero and g_zero:
            continue  # both vanish here: no information
        if f_zero or g_zero:
            return NE
        ratios.append(_ratio_at(f, g, env))
    if not ratios or (names and len(ratios) < 2):
        return UNKNOWN
    try:
        first = ratios[0](_LOW)
        if positive and (_LOW.im(first) != 0 or first <= 0):
            return NE
        for other in ratios[1:]:
            verdict = _agree(ratios[0], other)
            if verdict != EQ:
                return verdict
    except Undefined:
        return UNKNOWN
    return EQ


def approx_equal(decimal: tuple[Fraction, int, int], other: Node) -> bool:
    """``written_matches`` against a constant that is not rational (3.14 for pi)."""
    if decimal[2] < 3 or free_symbols(other):
        return False
    try:
        computed = _value(other, _LOW, {})
    except (Undefined, TooLarge, NotScalar):
        return False
    if _special(_LOW, computed) or _LOW.im(computed) != 0:
        return False
    real = _LOW.mpf(_LOW.re(computed))
    exact = Fraction(int(real.man)) * Fraction(2) ** int(real.exp)  # man is unsigned
    return written_matches(decimal, -exact if real < 0 else exact)
