"""Rubric formulas: arithmetic over component names, parsed once, evaluated without ``eval``.

Allowed: numbers, component names, ``+ - * /``, unary minus, parentheses, and the functions
``min``, ``max``, ``clamp(x, lo, hi)`` and ``abs``.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping

from .errors import RubricError

__all__ = ["Formula"]

_FUNCTIONS: dict[str, tuple[int, int | None]] = {  # name -> (min args, max args)
    "min": (1, None),
    "max": (1, None),
    "clamp": (3, 3),
    "abs": (1, 1),
}

Compiled = Callable[[Mapping[str, float]], float]


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
        self._compiled = self._compile(tree.body)

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

    def _compile(self, node: ast.AST) -> Compiled:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(
            node.value, bool
        ):
            constant = float(node.value)
            return lambda values: constant
        if isinstance(node, ast.Name):
            name = node.id
            if name not in self._known:
                known = ", ".join(sorted(self._known))
                raise RubricError(f"{self._where}: unknown component {name!r}; components: {known}")
            self.names.add(name)
            return lambda values: values[name]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = self._compile(node.operand)
            if isinstance(node.op, ast.USub):
                return lambda values: -operand(values)
            return operand
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            left, right = self._compile(node.left), self._compile(node.right)
            op = node.op
            if isinstance(op, ast.Add):
                return lambda values: left(values) + right(values)
            if isinstance(op, ast.Sub):
                return lambda values: left(values) - right(values)
            if isinstance(op, ast.Mult):
                return lambda values: left(values) * right(values)
            return lambda values: left(values) / right(values)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            name = node.func.id
            if name not in _FUNCTIONS:
                raise self._fail(node, f"function {name!r}")
            low, high = _FUNCTIONS[name]
            if len(node.args) < low or (high is not None and len(node.args) > high):
                raise RubricError(f"{self._where}: {name}() takes "
                                  f"{low if low == high else f'{low} or more'} argument(s)")
            args = [self._compile(arg) for arg in node.args]
            if name == "min":
                return lambda values: min(a(values) for a in args)
            if name == "max":
                return lambda values: max(a(values) for a in args)
            if name == "abs":
                return lambda values: abs(args[0](values))
            x, lo, hi = args
            return lambda values: min(max(x(values), lo(values)), hi(values))
        raise self._fail(node, type(node).__name__)
