"""Rubric formulas: arithmetic over component names, parsed once, evaluated without ``eval``.

Allowed: numbers, component names, ``+ - * /``, unary minus, parentheses, and the functions
``min``, ``max``, ``clamp(x, lo, hi)`` and ``abs``. A division by something that is zero
whatever the components say (``x / 0``, ``x / (1 - 1)``) is refused when the formula is built.
A component name can appear in a formula only if it is a Python identifier that is not a keyword
(``formula_name_problem`` says why one is not, ``formula_name_for`` suggests a usable one).
"""

from __future__ import annotations

import ast
import keyword
import math
import re
import unicodedata
from collections.abc import Callable, Collection, Mapping

from rewardsmith.errors import RubricError

__all__ = ["Formula", "formula_name_for", "formula_name_problem"]

_FUNCTIONS: dict[str, tuple[int, int | None]] = {  # name -> (min args, max args)
    "min": (1, None),
    "max": (1, None),
    "clamp": (3, 3),
    "abs": (1, 1),
}

Compiled = Callable[[Mapping[str, float]], float]


def formula_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be written in a formula, or None when it can."""
    if not name.isidentifier():
        return "it is not a Python identifier (only letters, digits and '_', no leading digit)"
    if keyword.iskeyword(name):
        return "it is a Python keyword"
    if unicodedata.normalize("NFKC", name) != name:
        return f"Python reads it as {unicodedata.normalize('NFKC', name)!r}"
    return None


def formula_name_for(name: str, taken: Collection[str] = ()) -> str:
    """A name close to ``name`` that a formula can use and that is not in ``taken``."""
    base = re.sub(r"\W", "_", unicodedata.normalize("NFKC", name)) or "component"
    if base[0].isdigit():
        base = f"c_{base}"
    if keyword.iskeyword(base):
        base = f"{base}_"
    candidate, number = base, 2
    while candidate in taken or formula_name_problem(candidate) is not None:
        candidate, number = f"{base}_{number}", number + 1
    return candidate


class _Part:
    """A compiled subexpression. ``fixed``: no component name is in it; ``value``: its value,
    once ``Formula._compile`` has computed it."""

    __slots__ = ("run", "fixed", "value")

    def __init__(self, run: Compiled, fixed: bool = False, value: float | None = None):
        self.run = run
        self.fixed = fixed
        self.value = value


class Formula:
    """A compiled formula. ``names`` are the component names it reads."""

    def __init__(self, text: str, known: set[str], *, where: str = "formula"):
        self.text = text
        self.names: set[str] = set()
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as exc:
            raise RubricError(f"{where}: {text!r} is not a valid formula ({exc.msg})") from exc
        self._where = where
        self._known = known
        self._compiled = self._compile(tree.body).run

    def __call__(self, values: Mapping[str, float]) -> float:
        try:
            result = self._compiled(values)
        except ZeroDivisionError as exc:
            raise ArithmeticError(f"formula {self.text!r}: division by zero") from exc
        if not math.isfinite(result):
            raise ArithmeticError(f"formula {self.text!r} gave a non-finite value ({result})")
        return result

    def _fail(self, node: ast.AST, what: str) -> RubricError:
        return RubricError(f"{self._where}: {what} in {self.text!r} is not allowed; use component "
                           f"names, numbers, + - * /, parentheses, min, max, clamp, abs")

    def _compile(self, node: ast.AST) -> _Part:
        part = self._compile_node(node)
        if not part.fixed or part.value is not None:
            return part
        # A subexpression of numbers alone is computed once, here; its value is its code.
        try:
            value = part.run({})
        except ZeroDivisionError:
            raise self._zero(node) from None
        except OverflowError as exc:
            raise RubricError(f"{self._where}: {self._source(node)!r} in {self.text!r} "
                              f"overflows ({exc})") from None
        return _Part(lambda values: value, True, value)

    def _zero(self, divisor: ast.AST) -> RubricError:
        return RubricError(f"{self._where}: {self.text!r} divides by zero: "
                           f"{self._source(divisor)!r} is 0 whatever the components score")

    def _source(self, node: ast.AST) -> str:
        """The text of ``node`` as written (``1e-400``, not the ``0.0`` it parses to)."""
        return ast.get_source_segment(self.text.strip(), node) or ast.unparse(node)

    def _compile_node(self, node: ast.AST) -> _Part:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(
            node.value, bool
        ):
            try:
                constant = float(node.value)
            except OverflowError:
                raise RubricError(f"{self._where}: the number {node.value} in {self.text!r} is "
                                  "too large") from None
            return _Part(lambda values: constant, True, constant)
        if isinstance(node, ast.Name):
            name = node.id
            if name not in self._known:
                known = ", ".join(sorted(self._known))
                raise RubricError(f"{self._where}: unknown component {name!r}; components: {known}")
            self.names.add(name)
            return _Part(lambda values: values[name])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = self._compile(node.operand)
            if isinstance(node.op, ast.USub):
                run = operand.run
                return _Part(lambda values: -run(values), operand.fixed)
            return operand
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            left_part, right_part = self._compile(node.left), self._compile(node.right)
            left, right = left_part.run, right_part.run
            fixed = left_part.fixed and right_part.fixed
            op = node.op
            if isinstance(op, ast.Add):
                return _Part(lambda values: left(values) + right(values), fixed)
            if isinstance(op, ast.Sub):
                return _Part(lambda values: left(values) - right(values), fixed)
            if isinstance(op, ast.Mult):
                return _Part(lambda values: left(values) * right(values), fixed)
            if right_part.fixed and right_part.value == 0.0:
                raise self._zero(node.right)
            return _Part(lambda values: left(values) / right(values), fixed)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            name = node.func.id
            if name not in _FUNCTIONS:
                raise self._fail(node, f"function {name!r}")
            low, high = _FUNCTIONS[name]
            if len(node.args) < low or (high is not None and len(node.args) > high):
                raise RubricError(f"{self._where}: {name}() takes "
                                  f"{low if low == high else f'{low} or more'} argument(s)")
            parts = [self._compile(arg) for arg in node.args]
            args = [p.run for p in parts]
            fixed = all(p.fixed for p in parts)
            if name == "min":
                return _Part(lambda values: min(a(values) for a in args), fixed)
            if name == "max":
                return _Part(lambda values: max(a(values) for a in args), fixed)
            if name == "abs":
                return _Part(lambda values: abs(args[0](values)), fixed)
            x, lo, hi = args
            return _Part(lambda values: min(max(x(values), lo(values)), hi(values)), fixed)
        raise self._fail(node, type(node).__name__)
