"""Inequalities in one unknown as the intervals they describe.

``x > 3`` is ``(3, ∞)``, ``-2 < x <= 5`` is ``(-2, 5]``, ``x != 1`` is a union, ``-x > -1`` is
solved like ``x < 1`` (linear in one unknown, exact rationals only), ``0 < f(x) < 1`` bounds the
label ``f(x)``, and ``1 <= |z| <= 3/2`` is ``[-3/2, -1] ∪ [1, 3/2]``.
"""

from __future__ import annotations

from fractions import Fraction

from .fastpath import TooLarge, Undefined, exact_value
from .nodes import (
    Coll,
    Div,
    Func,
    Inf,
    Mul,
    Neg,
    Node,
    Num,
    Rel,
    Sym,
    Union_,
    children,
    free_symbols,
    rebuild,
    sub,
)

__all__ = ["as_intervals", "is_label"]

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def is_label(node: Node) -> bool:
    """A name for the answer rather than an expression: ``x``, ``a_3``, ``f(x)``, ``NO/BO``,
    ``A:B``, ``(p, q)``, ``|AB|``. Only a label's equation states a value (``2x + z = 1`` does not state 1)."""
    if isinstance(node, Sym):
        return True
    if isinstance(node, (Mul, Div)) or (isinstance(node, Coll) and node.kind == "delim"):
        return all(is_label(child) for child in children(node))  # f(x), (p, q), A:B
    return isinstance(node, Func) and node.name == "abs" and is_label(node.args[0])  # |AB|


def as_intervals(node: Node) -> Node | None:
    """The interval (or union) an inequality describes, or None when it is not one."""
    if isinstance(node, Coll) and node.kind == "list" and node.items and all(
            isinstance(i, Rel) for i in node.items):
        parts = [as_intervals(i) for i in node.items]
        if any(p is None for p in parts):
            return None
        return Union_(tuple(p for p in parts if p is not None))
    if not isinstance(node, Rel) or any(op in ("=", "in", "~") for op in node.ops):
        return None
    sides, ops = list(node.sides), list(node.ops)
    if len(ops) == 1 and ops[0] == "!=":
        return _not_equal(sides[0], sides[1])
    if all(op in (">", ">=") for op in ops):
        sides.reverse()
        ops = [_FLIP[op] for op in reversed(ops)]
    if not all(op in ("<", "<=") for op in ops):
        return None
    if len(sides) == 2:
        if is_label(sides[0]) and not free_symbols(sides[1]):
            sides.insert(0, Neg(Inf(1)))
            ops.insert(0, "<")
        elif is_label(sides[1]) and not free_symbols(sides[0]):
            sides.append(Inf(1))
            ops.append("<")
        else:
            return _linear(sides[0], sides[1], ops[0])
    if len(sides) != 3 or free_symbols(sides[0]) or free_symbols(sides[2]):
        return None
    low, middle, high = sides
    if isinstance(middle, Func) and middle.name == "abs" and is_label(middle.args[0]):
        return _absolute(low, high, ops[0], ops[1])
    return _interval(low, high, ops[0], ops[1]) if is_label(middle) else None


def _interval(low: Node, high: Node, low_op: str, high_op: str) -> Coll:
    return Coll("delim", (low, high), "[" if low_op == "<=" else "(",
                "]" if high_op == "<=" else ")")


def _not_equal(left: Node, right: Node) -> Node | None:
    var, value = (left, right) if isinstance(left, Sym) else (right, left)
    if not isinstance(var, Sym) or free_symbols(value):
        return None
    return Union_((Coll("delim", (Neg(Inf(1)), value), "(", ")"),
                   Coll("delim", (value, Inf(1)), "(", ")")))


def _substitute(node: Node, name: str, value: Fraction) -> Node:
    if isinstance(node, Sym):
        return Num(value) if node.name == name else node
    kids = children(node)
    if not kids:
        return node
    return rebuild(node, tuple(_substitute(k, name, value) for k in kids))


def _exact_at(node: Node, name: str, value: int) -> Fraction | None:
    try:
        return exact_value(_substitute(node, name, Fraction(value)))
    except (TooLarge, Undefined):
        return None


def _linear(left: Node, right: Node, op: str) -> Node | None:
    """``left op right`` (op ``<`` or ``<=``) when ``left - right`` is ``a·x + b``, a != 0."""
    names = free_symbols(left) | free_symbols(right)
    if len(names) != 1:
        return None
    (name,) = names
    diff = sub(left, right)
    values = [v for x in range(4) if (v := _exact_at(diff, name, x)) is not None]
    if len(values) != 4:
        return None
    f0, f1, f2, f3 = values
    slope = f1 - f0
    if slope == 0 or f2 != f0 + 2 * slope or f3 != f0 + 3 * slope:
        return None
    bound = Num(-f0 / slope)
    if slope > 0:  # x < bound
        return Coll("delim", (Neg(Inf(1)), bound), "(", "]" if op == "<=" else ")")
    return Coll("delim", (bound, Inf(1)), "[" if op == "<=" else "(", ")")


def _absolute(low: Node, high: Node, low_op: str, high_op: str) -> Node | None:
    """``low op |x| op high``: two mirrored intervals, or one when ``low`` is negative."""
    try:
        low_value = exact_value(low)
    except (TooLarge, Undefined):
        return None
    if low_value is None:
        return None
    if low_value < 0:
        return _interval(Neg(high), high, high_op, high_op)
    return Union_((_interval(Neg(high), Neg(low), high_op, low_op),
                   _interval(low, high, low_op, high_op)))
