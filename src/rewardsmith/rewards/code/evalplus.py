"""HumanEval+ and MBPP+ (EvalPlus), read as they ship.

- The Hugging Face sets (``evalplus/humanevalplus``, ``evalplus/mbppplus``) give a ``test``
  that defines ``assertion(out, exp, atol)`` with numpy and loops over literal ``inputs`` and
  ``results``: ``assertion(candidate(*inp), exp, 0)`` inside ``check(candidate)`` (HumanEval+)
  or ``assertion(<function>(*inp), exp, 0)`` at the top (MBPP+). Run as written it needs numpy,
  which the sandbox does not have; each pair becomes a value test instead, its expected value
  kept on the host and compared as EvalPlus does: exactly, or within ``atol`` where the
  expected value is a float (``1e-6`` when ``atol`` is 0 and the expected value is floats).
- The raw release rows give ``base_input`` / ``plus_input`` (lists of argument lists), ``atol``
  and a ``canonical_solution`` but no outputs: the expected values are what the canonical
  solution returns, computed in the sandbox (see ``Reference``).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from .cases import CodeTest, Reference, TestSuite, function_name

__all__ = ["RAW_KEYS", "evalplus_raw", "evalplus_test", "tolerance_for"]

RAW_KEYS = ("base_input", "plus_input")
_FLOATS_DEFAULT_ATOL = 1e-6


class _Specials(ast.NodeTransformer):
    """``inf``, ``nan``, ``math.inf`` and ``float('inf')`` as constants, so that the inputs
    and results EvalPlus writes with them still read as literals."""

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id in ("inf", "nan"):
            return ast.copy_location(ast.Constant(float(node.id)), node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        if isinstance(node.value, ast.Name) and node.value.id in ("math", "np", "numpy") and \
                node.attr in ("inf", "nan"):
            return ast.copy_location(ast.Constant(float(node.attr)), node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "float" and not node.keywords \
                and len(node.args) == 1 and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            try:
                return ast.copy_location(ast.Constant(float(node.args[0].value)), node)
            except ValueError:
                return node
        return node


def _literal(node: ast.expr, what: str) -> Any:
    try:
        return ast.literal_eval(_Specials().visit(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"EvalPlus test: {what} is not a literal ({exc})") from exc


def _is_floats(value: Any) -> bool:
    if isinstance(value, float):
        return True
    return isinstance(value, (list, tuple)) and bool(value) and \
        all(isinstance(item, float) for item in value)


def tolerance_for(atol: float, expected: Any) -> float:
    """EvalPlus's tolerance for one expected value; 0.0 (exact) replaces the rubric's too."""
    if atol:
        return atol
    return _FLOATS_DEFAULT_ATOL if _is_floats(expected) else 0.0


def _assertion_call(module: ast.Module) -> ast.Call | None:
    """The ``assertion(f(*inp), exp, atol)`` call of an EvalPlus test, if this is one."""
    for node in ast.walk(module):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "assertion" and len(node.args) == 3:
            return node
    return None


def _assigned(module: ast.Module, name: str) -> ast.expr:
    for node in ast.walk(module):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and node.targets[0].id == name:
            return node.value
    raise ValueError(f"EvalPlus test: no '{name} = [...]' to read")


def _checked_name(module: ast.Module) -> str | None:
    """The function a trailing ``check(<name>)`` passes as the candidate."""
    for statement in module.body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) and \
                isinstance(statement.value.func, ast.Name) and \
                statement.value.func.id == "check" and len(statement.value.args) == 1 and \
                isinstance(statement.value.args[0], ast.Name):
            return statement.value.args[0].id
    return None


def evalplus_test(module: ast.Module, entry_point: str | None) -> list[CodeTest] | None:
    """The value tests of an EvalPlus ``test``; None when ``module`` is not one."""
    call = _assertion_call(module)
    if call is None:
        return None
    target = call.args[0]
    if not (isinstance(target, ast.Call) and isinstance(target.func, ast.Name) and
            len(target.args) == 1 and isinstance(target.args[0], ast.Starred)
            and not target.keywords):
        raise ValueError("EvalPlus test: expected assertion(<function>(*inp), exp, atol)")
    entry = target.func.id
    if entry == "candidate":
        entry = entry_point or _checked_name(module) or ""
        if not entry:
            raise ValueError("EvalPlus test: check(candidate) needs 'entry_point'")
    entry = function_name(entry, "EvalPlus test: the entry point")
    atol = _literal(call.args[2], "atol")
    if isinstance(atol, bool) or not isinstance(atol, (int, float)) or not atol >= 0:
        raise ValueError(f"EvalPlus test: atol must be a number >= 0, got {atol!r}")
    inputs_node = _Specials().visit(_assigned(module, "inputs"))
    if not isinstance(inputs_node, (ast.List, ast.Tuple)):
        raise ValueError("EvalPlus test: 'inputs' must be a list of argument lists")
    results = _literal(_assigned(module, "results"), "results")
    if not isinstance(results, (list, tuple)) or len(results) != len(inputs_node.elts):
        raise ValueError(f"EvalPlus test: {len(inputs_node.elts)} inputs but "
                         f"{len(results) if isinstance(results, (list, tuple)) else 'no'} "
                         f"results")
    tests = []
    for index, (args, expected) in enumerate(zip(inputs_node.elts, results)):
        _literal(args, f"input {index}")  # plain values only: nothing the program could shadow
        tests.append(CodeTest({"kind": "expr", "expr": f"{entry}(*{ast.unparse(args)})"},
                              expected, "equal", tolerance_for(float(atol), expected)))
    return tests


def _node(value: Any, what: str) -> ast.expr:
    if value is None or isinstance(value, (bool, int, float, str)):
        return ast.Constant(value)
    if isinstance(value, list):
        return ast.List([_node(v, what) for v in value], ast.Load())
    if isinstance(value, Mapping):
        return ast.Dict([_node(k, what) for k in value], [_node(v, what) for v in value.values()])
    raise ValueError(f"{what}: a {type(value).__name__} is not a JSON value")


def _reference_source(data: Mapping[str, Any], entry: str) -> str:
    solution = data.get("canonical_solution")
    if not isinstance(solution, str) or not solution.strip():
        raise ValueError("EvalPlus rows without results need 'canonical_solution' to compute "
                         "the expected values")
    try:
        defined = {s.name for s in ast.parse(solution).body
                   if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    except SyntaxError:
        defined = set()
    if entry in defined:
        return solution  # MBPP+: the whole function
    prompt = data.get("prompt")
    if not isinstance(prompt, str):
        raise ValueError(f"EvalPlus: 'canonical_solution' does not define {entry!r} and there "
                         f"is no 'prompt' to complete")
    return prompt + solution  # HumanEval+: the body of the prompt's function


def evalplus_raw(data: Mapping[str, Any], language: str) -> TestSuite:
    """A raw EvalPlus row: its inputs, and the canonical solution that gives the outputs."""
    if language != "python":
        raise ValueError(f"EvalPlus tests are Python, not {language}")
    entry = function_name(data.get("entry_point"), "EvalPlus 'entry_point'")
    atol = data.get("atol") or 0
    if isinstance(atol, bool) or not isinstance(atol, (int, float)) or not atol >= 0:
        raise ValueError(f"EvalPlus 'atol' must be a number >= 0, got {atol!r}")
    tests = []
    for key in RAW_KEYS:
        inputs = data.get(key)
        if inputs is None:
            continue
        if not isinstance(inputs, list) or not all(isinstance(i, list) for i in inputs):
            raise ValueError(f"EvalPlus {key!r} must be a list of argument lists")
        tests += [CodeTest({"kind": "expr",
                            "expr": f"{entry}(*{ast.unparse(_node(args, f'{key}[{i}]'))})"},
                           None, "equal")
                  for i, args in enumerate(inputs)]
    return TestSuite(tests, reference=Reference(_reference_source(data, entry), float(atol)))
