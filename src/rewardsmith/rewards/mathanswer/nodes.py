"""The expression tree an answer parses into: small immutable nodes, compared structurally."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction

__all__ = [
    "ELLIPSIS", "Node", "Num", "Sym", "Const", "Inf", "Add", "Mul", "Div", "Neg", "Pow", "Func", "Percent",
    "PlusMinus", "Rel", "Coll", "Union_", "Matrix", "Text", "children", "walk", "free_symbols",
    "has", "sub", "rebuild",
]


@dataclass(frozen=True, slots=True)
class Num:
    """A number as written. ``places``: decimal places written (None for integers, fractions)."""

    value: Fraction
    places: int | None = field(default=None, compare=False)
    digits: int = field(default=0, compare=False)  # significant digits written


@dataclass(frozen=True, slots=True)
class Sym:
    name: str


# The ellipsis of a sequence ("1, 3, \\ldots, 99"): a mark equal only to itself.
ELLIPSIS = Sym("\\ldots")


@dataclass(frozen=True, slots=True)
class Const:
    name: str  # "pi" | "e" | "i"


@dataclass(frozen=True, slots=True)
class Inf:
    sign: int


@dataclass(frozen=True, slots=True)
class Add:
    terms: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Mul:
    factors: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Div:
    num: Node
    den: Node


@dataclass(frozen=True, slots=True)
class Neg:
    arg: Node


@dataclass(frozen=True, slots=True)
class Pow:
    base: Node
    exp: Node


@dataclass(frozen=True, slots=True)
class Func:
    """sqrt/root (x[, n]), sin..., log (x[, base]), ln, exp, abs, floor, ceil, factorial, binom."""

    name: str
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Percent:
    arg: Node


@dataclass(frozen=True, slots=True)
class PlusMinus:
    """``left ± right`` (``left`` None for a leading ±); ``sign`` -1 for ∓."""

    left: Node | None
    right: Node
    sign: int = 1


@dataclass(frozen=True, slots=True)
class Rel:
    """A chain of relations: ``sides[0] ops[0] sides[1] ...``; ops are = < <= > >= != in."""

    sides: tuple[Node, ...]
    ops: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Coll:
    """A collection: ``list`` (bare commas), ``set`` (``\\{ \\}``) or ``delim`` (brackets kept)."""

    kind: str
    items: tuple[Node, ...]
    left: str = ""
    right: str = ""


@dataclass(frozen=True, slots=True)
class Union_:
    parts: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Matrix:
    rows: tuple[tuple[Node, ...], ...]


@dataclass(frozen=True, slots=True)
class Text:
    value: str  # normalized: lower case, letters and digits only


Node = (Num | Sym | Const | Inf | Add | Mul | Div | Neg | Pow | Func | Percent | PlusMinus | Rel
        | Coll | Union_ | Matrix | Text)


def children(node: Node) -> tuple[Node, ...]:
    """The direct sub-nodes of ``node``."""
    if isinstance(node, (Num, Sym, Const, Inf, Text)):
        return ()
    if isinstance(node, Add):
        return node.terms
    if isinstance(node, Mul):
        return node.factors
    if isinstance(node, Div):
        return (node.num, node.den)
    if isinstance(node, (Neg, Percent)):
        return (node.arg,)
    if isinstance(node, Pow):
        return (node.base, node.exp)
    if isinstance(node, Func):
        return node.args
    if isinstance(node, PlusMinus):
        return (node.right,) if node.left is None else (node.left, node.right)
    if isinstance(node, Rel):
        return node.sides
    if isinstance(node, Coll):
        return node.items
    if isinstance(node, Union_):
        return node.parts
    return tuple(cell for row in node.rows for cell in row)


def walk(node: Node) -> Iterator[Node]:
    """Every node of the tree, ``node`` first (iterative: deep trees cannot overflow the stack)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(children(current))


def free_symbols(node: Node) -> frozenset[str]:
    return frozenset(n.name for n in walk(node) if isinstance(n, Sym))


def has(node: Node, kind: type | tuple[type, ...]) -> bool:
    return any(isinstance(n, kind) for n in walk(node))


def sub(left: Node, right: Node) -> Node:
    """``left - right`` as a tree."""
    return Add((left, Neg(right)))


def rebuild(node: Node, kids: tuple[Node, ...]) -> Node:
    """A node of the same kind as ``node`` with new children (in ``children`` order)."""
    if isinstance(node, Add):
        return Add(kids)
    if isinstance(node, Mul):
        return Mul(kids)
    if isinstance(node, Div):
        return Div(kids[0], kids[1])
    if isinstance(node, Neg):
        return Neg(kids[0])
    if isinstance(node, Percent):
        return Percent(kids[0])
    if isinstance(node, Pow):
        return Pow(kids[0], kids[1])
    if isinstance(node, Func):
        return Func(node.name, kids)
    if isinstance(node, PlusMinus):
        if node.left is None:
            return PlusMinus(None, kids[0], node.sign)
        return PlusMinus(kids[0], kids[1], node.sign)
    if isinstance(node, Rel):
        return Rel(kids, node.ops)
    if isinstance(node, Coll):
        return Coll(node.kind, kids, node.left, node.right)
    if isinstance(node, Union_):
        return Union_(kids)
    if isinstance(node, Matrix):
        width = len(node.rows[0]) if node.rows else 0
        return Matrix(tuple(kids[i : i + width] for i in range(0, len(kids), width)))
    return node
