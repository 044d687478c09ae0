"""When two parsed answers are the same answer.

Shapes first: sets are order-free, tuples and intervals ordered (and ``(1,2)`` is not
``[1,2]``), matrices elementwise, ``±`` is the set of both signs, ``x = 2`` answers ``2``,
inequalities in one variable are intervals. Then each pair of scalars goes down the cheapest
path that can decide it: structural equality, exact rationals, numeric probing, and only then
sympy (or, when ``symbolic`` is off, ``NeedsSymbolic`` so the caller can run it in a process
it can kill).
"""

from __future__ import annotations

from fractions import Fraction

from .fastpath import TooLarge, Undefined, decimal_written, exact_value, written_matches
from .intervals import as_intervals, is_label
from .matrices import fold_matrices
from .nodes import (
    ELLIPSIS,
    Add,
    Coll,
    Func,
    Inf,
    Matrix,
    Mul,
    Neg,
    Node,
    Num,
    Percent,
    PlusMinus,
    Rel,
    Sym,
    Text,
    Union_,
    children,
    free_symbols,
    has,
    rebuild,
    sub,
    walk,
)
from .numeric import EQ, NE, NotScalar, approx_equal, probe_equal, probe_proportional
from .radicals import monomials_equal

__all__ = ["NeedsSymbolic", "Comparer"]

_MAX_ITEMS = 64
_TOO_LARGE = "numbers too large to compare (a power tower or a huge factorial)"
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


class NeedsSymbolic(Exception):
    """Numeric probing could not decide; sympy must (in a process that can be killed)."""


class Comparer:
    """Compares an answer tree with a reference tree. ``symbolic``: may call sympy here."""

    def __init__(self, *, symbolic: bool):
        self.symbolic = symbolic

    # -- shapes

    def equal(self, answer: Node, reference: Node) -> bool:
        """Is ``answer`` the same answer as ``reference``? May raise TooLarge/NeedsSymbolic."""
        answer, reference = _prepare(answer), _prepare(reference)
        if _has_relation(answer) and not _has_relation(reference):
            answer = _values(answer)
        elif _has_relation(reference) and not _has_relation(answer):
            reference = _values(reference)
        return self._equal(answer, reference)

    def _equal(self, a: Node, b: Node) -> bool:
        if a == b:
            return True
        if isinstance(a, Text) or isinstance(b, Text):
            return _text(a) is not None and _text(a) == _text(b)
        if isinstance(a, Rel) or isinstance(b, Rel):
            return self._relations(a, b)
        if isinstance(a, Union_) or isinstance(b, Union_):
            return self._unordered(_parts(a), _parts(b))
        if isinstance(a, Matrix) or isinstance(b, Matrix):
            return self._matrices(a, b)
        if isinstance(a, Coll) or isinstance(b, Coll):
            return self._collections(a, b)
        return self.scalar(a, b)

    def _collections(self, a: Node, b: Node) -> bool:
        if not isinstance(a, Coll):
            a, b = b, a
        assert isinstance(a, Coll)
        if not isinstance(b, Coll):
            # {3} answers 3; a tuple or interval never answers a single number.
            return a.kind == "set" and len(a.items) == 1 and self._equal(a.items[0], b)
        if a.kind == b.kind == "list" and (ELLIPSIS in a.items or ELLIPSIS in b.items):
            return self._ordered(a.items, b.items)  # a sequence "1, 3, \\ldots, 99" is ordered
        if a.kind == b.kind == "delim" and a.left == b.left == ":":
            return self._ordered(_clock(a.items), _clock(b.items))
        if a.kind != "delim" and b.kind != "delim":
            return self._unordered(a.items, b.items)  # sets and bare lists: order-free
        if a.kind == "set" or b.kind == "set":
            return False  # a set is not a tuple or an interval
        if a.kind == "delim" and b.kind == "delim" and _brackets(a) != _brackets(b):
            return False  # (1,2) is not [1,2]
        return self._ordered(a.items, b.items)

    def _ordered(self, a: tuple[Node, ...], b: tuple[Node, ...]) -> bool:
        return len(a) == len(b) and all(self._equal(x, y) for x, y in zip(a, b))

    def _unordered(self, a: tuple[Node, ...], b: tuple[Node, ...]) -> bool:
        a, b = tuple(dict.fromkeys(a)), tuple(dict.fromkeys(b))
        if len(a) > _MAX_ITEMS or len(b) > _MAX_ITEMS:
            return False
        matched_b: set[int] = set()
        for x in a:
            hits = [j for j, y in enumerate(b) if self._equal(x, y)]
            if not hits:
                return False
            matched_b.update(hits)
        return len(matched_b) == len(b)

    def _matrices(self, a: Node, b: Node) -> bool:
        if not isinstance(a, Matrix):
            a, b = b, a
        assert isinstance(a, Matrix)
        if isinstance(b, Matrix):
            return len(a.rows) == len(b.rows) and all(
                self._ordered(r, s) for r, s in zip(a.rows, b.rows))
        cells = tuple(c for row in a.rows for c in row)
        if len(a.rows) == 1 or len(a.rows[0]) == 1:  # a vector answers a tuple
            # Against a matrix, [0.5, 1] is a list of entries, not an interval.
            if isinstance(b, Coll) and (b.kind == "list" or _brackets(b) in (("(", ")"),
                                                                             ("[", "]"))):
                return self._ordered(cells, b.items)
            return len(cells) == 1 and self._equal(cells[0], b)
        return False

    def _relations(self, a: Node, b: Node) -> bool:
        ia, ib = as_intervals(a), as_intervals(b)
        if ia is not None or ib is not None:
            return self._equal(ia if ia is not None else a, ib if ib is not None else b)
        if not (isinstance(a, Rel) and isinstance(b, Rel)):
            return False
        if set(a.ops) == {"="} and set(b.ops) == {"="}:
            return self._equations(a, b)
        if len(a.ops) != 1 or len(b.ops) != 1:
            return False
        fa, opa = _normalized(a)
        fb, opb = _normalized(b)
        return opa == opb and self._proportional(fa, fb, positive=opa != "!=")

    def _equations(self, a: Rel, b: Rel) -> bool:
        if len(a.sides) != 2 or len(b.sides) != 2:
            return self._equal(a.sides[-1], b.sides[-1])
        (la, ra), (lb, rb) = a.sides, b.sides
        if _same_label(la, lb) or _function_and_graph(la, ra, lb, rb):
            return self._equal(ra, rb)  # x = ... both: compare the values (tolerance applies)
        if not (free_symbols(a) or free_symbols(b)):
            return self.scalar(ra, rb)
        return self._proportional(sub(la, ra), sub(lb, rb), positive=False)

    # -- scalars

    def scalar(self, a: Node, b: Node) -> bool:
        if a == b:
            return True
        if isinstance(a, Func) and isinstance(b, Func) and a.name == b.name and a.name in (
                "sum", "prod"):
            # Same range and the same summand: equal (different summands are not decided).
            return (self._equal(a.args[1], b.args[1]) and self._equal(a.args[2], b.args[2])
                    and self._value_equal(a.args[0], b.args[0]))
        if isinstance(a, Percent) != isinstance(b, Percent):
            # 50% answers 50 and 0.5; 0.5 answers 50%.
            pct, other = (a, b) if isinstance(a, Percent) else (b, a)
            assert isinstance(pct, Percent)
            return self.scalar(pct.arg, other) or self._value_equal(pct, other)
        if isinstance(a, Percent) and isinstance(b, Percent):
            return self.scalar(a.arg, b.arg)
        sign_a, sign_b = _infinity(a), _infinity(b)
        if sign_a or sign_b:
            return sign_a == sign_b
        if has(a, (Coll, Matrix, Rel, Union_, Text)) or has(b, (Coll, Matrix, Rel, Union_, Text)):
            return False
        return self._value_equal(a, b)

    def _value_equal(self, a: Node, b: Node) -> bool:
        large = False
        try:
            exact_a, exact_b = exact_value(a), exact_value(b)
        except Undefined:
            return False  # 1/0 answers nothing (and a == b was checked already)
        except TooLarge:
            large, exact_a, exact_b = True, None, None
        if exact_a is not None and exact_b is not None:
            return exact_a == exact_b or _within_written_precision(a, b, exact_a, exact_b)
        if not large:
            # Roots and powers of rationals: decided exactly, never by precision.
            decided = monomials_equal(a, b)
            if decided is not None:
                return decided or _tolerated(a, b)
        try:
            verdict = probe_equal(a, b)
        except NotScalar:
            return False
        except TooLarge:
            raise TooLarge(_TOO_LARGE) from None
        if verdict == NE:
            return _tolerated(a, b)
        if large:
            # 40 digits cannot tell 2^(2^20) from 2^(2^20) + 1: refuse rather than guess.
            raise TooLarge(_TOO_LARGE + " exactly")
        if verdict == EQ:
            return True
        return self._symbolic(a, b)

    def _symbolic(self, a: Node, b: Node) -> bool:
        if not self.symbolic:
            raise NeedsSymbolic("numeric probing was inconclusive")
        from .symbolic import symbolic_equal

        try:
            return bool(symbolic_equal(a, b))
        except (TypeError, ValueError, ArithmeticError, AttributeError, RecursionError):
            return False  # sympy could not show they are equal

    def _proportional(self, f: Node, g: Node, *, positive: bool) -> bool:
        try:
            verdict = probe_proportional(f, g, positive=positive)
        except NotScalar:
            return False
        except Undefined:
            verdict = "unknown"
        if verdict != "unknown":
            return verdict == EQ
        if not self.symbolic:
            raise NeedsSymbolic("numeric probing was inconclusive")
        from .symbolic import symbolic_proportional

        try:
            return bool(symbolic_proportional(f, g, positive=positive))
        except (TypeError, ValueError, ArithmeticError, AttributeError, RecursionError):
            return False


# -- helpers


def _within_written_precision(a: Node, b: Node, exact_a: Fraction, exact_b: Fraction) -> bool:
    for written, other in ((decimal_written(a), exact_b), (decimal_written(b), exact_a)):
        if written is not None and written_matches(written, other):
            return True
    return False


def _tolerated(a: Node, b: Node) -> bool:
    for written, other in ((decimal_written(a), b), (decimal_written(b), a)):
        if written is not None and approx_equal(written, other):
            return True
    return False


def _clock(parts: tuple[Node, ...]) -> tuple[Node, ...]:
    """``20:34`` as ``20:34:00``: a time of day (hours 0-23, then minutes and seconds 0-59)
    gets its seconds; a ratio or any other colon list is left as written."""
    values = [exact_value(part) if isinstance(part, Num) else None for part in parts]
    if len(parts) == 2 and all(v is not None and v.denominator == 1 for v in values) and \
            0 <= values[0] < 24 and 0 <= values[1] < 60:  # type: ignore[operator]
        return (*parts, Num(Fraction(0)))
    return parts


def _infinity(node: Node) -> int:
    sign = 1
    while isinstance(node, Neg):
        sign, node = -sign, node.arg
    return sign * node.sign if isinstance(node, Inf) else 0


def _text(node: Node) -> str | None:
    if isinstance(node, Text):
        return node.value
    if isinstance(node, Sym):
        return node.name.lower()
    return None


def _brackets(node: Coll) -> tuple[str, str]:
    """An interval's brackets, with an infinite end always open: [3, ∞] is [3, ∞)."""
    left, right = node.left, node.right
    if len(node.items) == 2:
        if _infinity(node.items[0]) < 0:
            left = "("
        if _infinity(node.items[1]) > 0:
            right = ")"
    return left, right


def _parts(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Union_):
        return node.parts
    if isinstance(node, Coll) and node.kind == "list":
        return node.items
    return (node,)


def _drop_in(node: Node) -> Node:
    """``x \\in [1, 2]`` answers with the set it names."""
    if isinstance(node, Rel) and node.ops == ("in",):
        return node.sides[1]
    return node


def _has_relation(node: Node) -> bool:
    if isinstance(node, Coll):
        return any(_has_relation(item) for item in node.items)
    return isinstance(node, Rel)


def _prepare(node: Node) -> Node:
    """The answer an expression states: ``≈`` tails cut, ``x ∈ S`` as S, ± expanded, matrix
    sums and products computed."""
    return _expand_pm(_drop_in(fold_matrices(_cut_approx(node))))


def _cut_approx(node: Node) -> Node:
    """``1/3 ≈ 0.33``: the exact value before ``≈`` is the answer."""
    if isinstance(node, Coll):
        return Coll(node.kind, tuple(_cut_approx(i) for i in node.items), node.left, node.right)
    if isinstance(node, Rel) and "~" in node.ops:
        cut = node.ops.index("~")
        if cut == 0:  # x ≈ 11 states 11; 1/3 ≈ 0.33 states 1/3
            return node.sides[1] if is_label(node.sides[0]) else node.sides[0]
        return Rel(node.sides[: cut + 1], node.ops[:cut])
    return node


def _same_label(a: Node, b: Node) -> bool:
    """``x`` and ``x``; ``W(n)`` and ``W(x)`` (one function, its variable renamed)."""
    if a == b:
        return is_label(a)
    return (isinstance(a, Mul) and isinstance(b, Mul) and len(a.factors) == len(b.factors) == 2
            and a.factors[0] == b.factors[0] and isinstance(a.factors[0], Sym)
            and isinstance(a.factors[1], Sym) and isinstance(b.factors[1], Sym))


def _function_and_graph(la: Node, ra: Node, lb: Node, rb: Node) -> bool:
    """``f(x) = 2x + 3`` and ``y = 2x + 3``: a function of ``x`` and the graph's ``y`` name
    the same thing when ``y`` is not ``x`` and appears on neither right side."""
    for func, name in ((la, lb), (lb, la)):
        if (isinstance(func, Mul) and len(func.factors) == 2
                and all(isinstance(f, Sym) for f in func.factors) and isinstance(name, Sym)
                and name != func.factors[1] and name != func.factors[0]
                and name.name not in free_symbols(ra) | free_symbols(rb)):
            return True
    return False


def _values(node: Node) -> Node:
    """``x = 2`` as the answer 2 (when the other side is not an equation).

    Only an equation that names its value counts: ``label = value``, ``value = label``, a
    chain ``x = 5 + 5 + 1 = 11`` or a computation with no unknowns (``1/2 = 10/9``).
    ``7 = 11a + c`` stays an equation, so it never answers ``11a + c``.
    """
    if isinstance(node, Coll):
        return Coll(node.kind, tuple(_values(item) for item in node.items), node.left, node.right)
    if not (isinstance(node, Rel) and set(node.ops) == {"="}):
        return node
    sides = node.sides
    if len(sides) == 2:
        left, right = sides
        if is_label(left):
            return right
        if is_label(right) and not free_symbols(left):
            return left
        return right if not free_symbols(node) else node
    last = sides[-1]
    return last if is_label(sides[0]) or not free_symbols(last) else node


def _expand_pm(node: Node) -> Node:
    """``1 ± √2`` is the set {1 + √2, 1 - √2}; items of a list expand in place."""
    if isinstance(node, Coll) and node.kind in ("list", "set"):
        items: list[Node] = []
        changed = False
        for item in node.items:
            expanded = _expand_pm(item)
            if expanded is not item and isinstance(expanded, Coll) and expanded.kind == "set":
                items.extend(expanded.items)
                changed = True
            else:
                items.append(item)
        return Coll("set", tuple(items)) if changed else node
    if not any(isinstance(n, PlusMinus) for n in walk(node)):
        return node
    variants = tuple(dict.fromkeys((_choose(node, 1), _choose(node, -1))))
    return Coll("set", variants)


def _choose(node: Node, sign: int) -> Node:
    """``node`` with every ± taken as ``sign`` (and every ∓ as ``-sign``)."""
    if isinstance(node, PlusMinus):
        right = _choose(node.right, sign)
        term = right if sign * node.sign > 0 else Neg(right)
        return term if node.left is None else Add((_choose(node.left, sign), term))
    if isinstance(node, (Num, Sym, Text, Inf)) or not any(
            isinstance(n, PlusMinus) for n in walk(node)):
        return node
    return rebuild(node, tuple(_choose(child, sign) for child in children(node)))


def _normalized(rel: Rel) -> tuple[Node, str]:
    """``a > b`` as (``b - a``, ``<``): one side, one direction."""
    left, right = rel.sides
    op = rel.ops[0]
    if op in (">", ">="):
        left, right, op = right, left, _FLIP[op]
    return sub(left, right), op
