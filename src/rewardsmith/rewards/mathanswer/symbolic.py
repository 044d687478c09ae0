"""The last resort: sympy, for the few pairs numeric probing cannot settle.

sympy is imported here and only here, lazily (it costs about half a second), and this code
only runs where a hard timeout can kill it: in the engine's worker processes, or in the child
process ``rewardsmith.mathcheck`` starts. ``simplify`` on an adversarial input can run for
minutes; the caller's timeout is the guard, not anything in this module.
"""

from __future__ import annotations

from typing import Any

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
)
from .numeric import NotScalar

__all__ = ["symbolic_equal", "symbolic_proportional"]


def _sympy() -> Any:
    import sympy

    return sympy


def to_sympy(node: Node) -> Any:
    """The sympy expression of a scalar tree (symbols are positive, as the probes assume)."""
    sp = _sympy()
    if isinstance(node, Num):
        return sp.Rational(node.value.numerator, node.value.denominator)
    if isinstance(node, Sym):
        return sp.Symbol(node.name, positive=True)
    if isinstance(node, Const):
        return {"pi": sp.pi, "e": sp.E, "i": sp.I}[node.name]
    if isinstance(node, Inf):
        return sp.oo if node.sign > 0 else -sp.oo
    if isinstance(node, Neg):
        return -to_sympy(node.arg)
    if isinstance(node, Add):
        return sp.Add(*[to_sympy(t) for t in node.terms])
    if isinstance(node, Mul):
        return sp.Mul(*[to_sympy(f) for f in node.factors])
    if isinstance(node, Div):
        return to_sympy(node.num) / to_sympy(node.den)
    if isinstance(node, Pow):
        return sp.Pow(to_sympy(node.base), to_sympy(node.exp))
    if isinstance(node, Percent):
        return to_sympy(node.arg) / 100
    if isinstance(node, Func):
        return _function(sp, node.name, [to_sympy(a) for a in node.args])
    raise NotScalar(type(node).__name__)


def _function(sp: Any, name: str, args: list[Any]) -> Any:
    x = args[0]
    if name == "sqrt":
        return sp.sqrt(x) if len(args) == 1 else sp.real_root(x, args[1])
    if name in ("log", "ln"):
        return sp.log(x) if len(args) == 1 else sp.log(x, args[1])
    table = {
        "sin": sp.sin, "cos": sp.cos, "tan": sp.tan, "cot": sp.cot, "sec": sp.sec,
        "csc": sp.csc, "arcsin": sp.asin, "arccos": sp.acos, "arctan": sp.atan,
        "sinh": sp.sinh, "cosh": sp.cosh, "tanh": sp.tanh, "exp": sp.exp, "abs": sp.Abs,
        "floor": sp.floor, "ceil": sp.ceiling, "factorial": sp.factorial,
    }
    if name in table:
        return table[name](x)
    if name == "binom":
        return sp.binomial(x, args[1])
    raise NotScalar(f"unknown function {name}")


def _is_zero(expr: Any) -> bool | None:
    sp = _sympy()
    simplified = sp.simplify(expr)
    if simplified == 0:
        return True
    zero = simplified.is_zero
    if zero is not None:
        return bool(zero)
    if simplified.is_number:
        value = sp.N(simplified, 60)
        return bool(abs(value) < sp.Float("1e-50"))
    return None


def symbolic_equal(a: Node, b: Node) -> bool | None:
    """True or False when sympy can tell whether ``a == b``; None when it cannot."""
    return _is_zero(to_sympy(a) - to_sympy(b))


def symbolic_proportional(f: Node, g: Node, *, positive: bool = False) -> bool | None:
    """Is ``f / g`` a nonzero constant (positive with ``positive``)?"""
    sp = _sympy()
    ratio = sp.simplify(to_sympy(f) / to_sympy(g))
    if ratio == 0 or ratio.has(sp.zoo, sp.nan):
        return False
    if ratio.free_symbols:
        return None  # perhaps constant, but sympy could not show it
    if positive:
        return bool(ratio.is_positive)
    return True
