"""Reading a rollout's tests (its ``answer``) in the formats RL code datasets use.

Each test becomes a ``CodeTest``: what the sandbox runs (``spec``, which never holds an
expected output) and what the host compares the result with (``expected``, ``check``).

- stdin/stdout: ``{"inputs": [...], "outputs": [...]}`` or ``[{"input": ..., "output": ...}]``
  (APPS keeps them under ``input_output``, as a JSON string);
- function calls: ``{"fn_name": "f", "inputs": [[args], ...], "outputs": [...]}``;
- assert tests (Python): ``{"test": "<code defining check(candidate)>", "entry_point": "f"}``
  (HumanEval) or ``{"asserts": ["assert f(1) == 2", ...]}`` (MBPP's ``test_list`` too).

An assert of the form ``assert <expression> == <literal>`` (or ``is True/False/None``,
``assert <call>``, ``assert not <call>``) becomes a value test: the sandbox evaluates the
expression and sends back its value; the literal stays on the host. Other asserts run as
scripts inside the sandbox with the program (see docs/code.md for what that can and cannot
stop).
"""

from __future__ import annotations

import ast
import builtins
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["CodeTest", "parse_tests"]

_BUILTIN_NAMES = frozenset(dir(builtins))


@dataclass(frozen=True)
class CodeTest:
    """One test: ``spec`` goes into the sandbox; ``expected`` and ``check`` stay here.

    ``check`` is ``stdout`` (compare printed text), ``json`` (compare a returned value with
    a JSON value, APPS style), ``equal`` / ``is`` / ``truthy`` / ``falsy`` (a Python literal)
    or ``script`` (passes when the test code runs to its end).
    """

    spec: dict[str, Any]
    expected: Any = None
    check: str = "stdout"


def parse_tests(answer: Any, language: str, *, script_tests: bool = False) -> list[CodeTest]:
    """The tests in ``answer``; ``ValueError`` naming what is wrong when they cannot be read.

    JavaScript test scripts run in the program's own process, where a program could forge a
    pass: they are refused unless ``script_tests`` says the risk is accepted.
    """
    data = _as_data(answer)
    tests = _parse(data, language)
    if not tests:
        raise ValueError("the reference holds no tests (empty inputs, asserts or check)")
    if language == "javascript" and not script_tests and any(t.check == "script"
                                                              for t in tests):
        raise ValueError("JavaScript test scripts ('test'/'asserts') run inside the program's "
                         "own process, where a program can forge a pass: use stdin/stdout or "
                         "fn_name tests, or set script_tests: true to accept that risk")
    return tests


def _as_data(answer: Any) -> Any:
    if isinstance(answer, (bytes, bytearray)):
        answer = answer.decode("utf-8", "replace")
    if isinstance(answer, str):
        try:
            return json.loads(answer)
        except ValueError as exc:
            raise ValueError(f"the reference tests are not JSON: {exc}") from exc
    if answer is None:
        raise ValueError("the reference tests are missing (answer is None)")
    return answer


def _parse(data: Any, language: str) -> list[CodeTest]:
    if isinstance(data, list):
        return _io_pairs(data)
    if not isinstance(data, Mapping):
        raise ValueError(f"the reference tests must be a JSON object or list, "
                         f"not {type(data).__name__}")
    if "input_output" in data:
        return _parse(_as_data(data["input_output"]), language)
    if "inputs" in data or "outputs" in data:
        inputs, outputs = data.get("inputs"), data.get("outputs")
        if not isinstance(inputs, list) or not isinstance(outputs, list):
            raise ValueError("'inputs' and 'outputs' must both be lists")
        if len(inputs) != len(outputs):
            raise ValueError(f"'inputs' has {len(inputs)} items but 'outputs' has {len(outputs)}")
        fn_name = data.get("fn_name")
        if fn_name is not None:
            if not isinstance(fn_name, str) or not fn_name.isidentifier():
                raise ValueError(f"'fn_name' must be a function name, got {fn_name!r}")
            if language == "cpp":
                raise ValueError("function-call tests need python or javascript, not cpp")
            return [CodeTest({"kind": "call", "fn": fn_name,
                              "args": list(args) if isinstance(args, list) else [args]},
                             expected, "json")
                    for args, expected in zip(inputs, outputs)]
        return [_stdin_test(i, x, y) for i, (x, y) in enumerate(zip(inputs, outputs))]
    if "test" in data:
        code = data["test"]
        if not isinstance(code, str):
            raise ValueError("'test' must be a string of test code")
        entry = data.get("entry_point")
        if entry is not None and (not isinstance(entry, str) or not entry.isidentifier()):
            raise ValueError(f"'entry_point' must be a function name, got {entry!r}")
        if language == "python":
            if not entry:
                raise ValueError("a 'test' with check(candidate) needs 'entry_point'")
            return _check_function(code, entry)
        if language == "javascript":
            return [CodeTest({"kind": "script", "code": code, "entry": None}, None, "script")]
        raise ValueError("assert tests need python or javascript, not cpp")
    for key in ("asserts", "test_list"):
        if key in data:
            asserts = data[key]
            if not isinstance(asserts, list) or not all(isinstance(a, str) for a in asserts):
                raise ValueError(f"{key!r} must be a list of assert statements (strings)")
            setup = data.get("test_setup_code") or ""
            if language == "python":
                return [_assert_test(text, setup, index) for index, text in enumerate(asserts)]
            if language == "javascript":
                return [CodeTest({"kind": "script", "code": text, "entry": None}, None, "script")
                        for text in asserts]
            raise ValueError("assert tests need python or javascript, not cpp")
    raise ValueError(f"unknown test format: keys {sorted(map(str, data))}; expected inputs/"
                     f"outputs (with fn_name for calls), test/entry_point, or asserts")


def _text(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value) + ("\n" if value else "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"{what} must be a string (or a list of lines), got {type(value).__name__}")


def _stdin_test(index: int, given: Any, expected: Any) -> CodeTest:
    return CodeTest({"kind": "stdin", "input": _text(given, f"test {index}: input")},
                    _text(expected, f"test {index}: output"), "stdout")


def _io_pairs(items: Sequence[Any]) -> list[CodeTest]:
    tests = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping) or "input" not in item or "output" not in item:
            raise ValueError(f"test {index}: expected an object with 'input' and 'output'")
        tests.append(_stdin_test(index, item["input"], item["output"]))
    return tests


def _parse_code(code: str, what: str) -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        raise ValueError(f"{what} is not valid Python: {exc}") from exc


def _assert_test(text: str, setup: str, index: int) -> CodeTest:
    module = _parse_code(text, f"assert {index}")
    if not setup and len(module.body) == 1 and isinstance(module.body[0], ast.Assert):
        found = _value_test(module.body[0], rename=None, allowed=None)
        if found is not None:
            return found
    code = f"{setup}\n{text}" if setup else text
    return CodeTest({"kind": "script", "code": code, "entry": None}, None, "script")


def _check_function(code: str, entry: str) -> list[CodeTest]:
    """HumanEval's check(candidate): value tests when every statement is a plain assert."""
    module = _parse_code(code, "the test code")
    whole = [CodeTest({"kind": "script", "code": code, "entry": entry}, None, "script")]
    checks = [s for s in module.body if isinstance(s, ast.FunctionDef) and s.name == "check"]
    others = [s for s in module.body if not (isinstance(s, ast.FunctionDef) and s.name == "check")]
    if len(checks) != 1 or not all(_inert(s) for s in others):
        return whole
    check = checks[0]
    if [a.arg for a in check.args.args] != ["candidate"]:
        return whole
    tests = []
    for statement in check.body:
        if _docstring_or_pass(statement):
            continue
        if not isinstance(statement, ast.Assert):
            return whole
        if isinstance(statement.test, ast.Constant):
            continue  # 'assert True, "message"' tests nothing
        found = _value_test(statement, rename=("candidate", entry),
                            allowed=_BUILTIN_NAMES | {"candidate"})
        if found is None:
            return whole
        tests.append(found)
    return tests or whole


def _inert(statement: ast.stmt) -> bool:
    # Imports and constant assignments (METADATA = {...}) beside check() change nothing.
    if isinstance(statement, (ast.Import, ast.ImportFrom)) or _docstring_or_pass(statement):
        return True
    if isinstance(statement, ast.Assign):
        try:
            ast.literal_eval(statement.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False
        return True
    return False


def _docstring_or_pass(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Pass) or (
        isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))


def _literal(node: ast.expr) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == self.old:
            return ast.copy_location(ast.Name(self.new, node.ctx), node)
        return node


def _expression(node: ast.expr, rename: tuple[str, str] | None,
                allowed: frozenset[str] | None) -> str | None:
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    if allowed is not None and not names <= allowed:
        return None  # it needs something the test code defines: run the test code itself
    if not any(isinstance(n, ast.Call) for n in ast.walk(node)):
        return None
    if rename is not None:
        node = _Rename(*rename).visit(ast.parse(ast.unparse(node), mode="eval")).body
    return ast.unparse(node)


def _value_test(statement: ast.Assert, rename: tuple[str, str] | None,
                allowed: frozenset[str] | None) -> CodeTest | None:
    test = statement.test
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and \
            isinstance(test.ops[0], (ast.Eq, ast.Is)):
        for side, other in ((test.left, test.comparators[0]), (test.comparators[0], test.left)):
            ok, value = _literal(other)
            if not ok:
                continue
            if isinstance(test.ops[0], ast.Is) and value not in (None, True, False):
                return None
            expression = _expression(side, rename, allowed)
            if expression is None:
                return None
            check = "is" if isinstance(test.ops[0], ast.Is) else "equal"
            return CodeTest({"kind": "expr", "expr": expression}, value, check)
        return None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        expression = _expression(test.operand, rename, allowed)
        return None if expression is None else CodeTest(
            {"kind": "expr", "expr": expression}, None, "falsy")
    if isinstance(test, (ast.Call, ast.Name, ast.Attribute, ast.Subscript)):
        expression = _expression(test, rename, allowed)
        return None if expression is None else CodeTest(
            {"kind": "expr", "expr": expression}, None, "truthy")
    return None
