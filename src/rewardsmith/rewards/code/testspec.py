"""Reading a rollout's tests (its ``answer``) in the formats RL code datasets use.

Each test becomes a ``CodeTest``: what the sandbox runs (``spec``, which never holds an
expected output) and what the host compares the result with (``expected``, ``check``).

- stdin/stdout: ``{"inputs": [...], "outputs": [...]}`` or ``[{"input": ..., "output": ...}]``
  (APPS keeps them under ``input_output``, as a JSON string);
- function calls: ``{"fn_name": "f", "inputs": [[args], ...], "outputs": [...]}``;
- assert tests (Python): ``{"test": "<code defining check(candidate)>", "entry_point": "f"}``
  (HumanEval) or ``{"asserts": ["assert f(1) == 2", ...]}`` (MBPP's ``test_list`` too).
- the rows of LiveCodeBench, CodeContests (``datasets``) and EvalPlus (``evalplus``), as
  they ship.

An assert of the form ``assert <expression> == <literal>`` (or ``is True/False/None``,
``assert <call>``, ``assert not <call>``) becomes a value test: the sandbox evaluates the
expression and sends back its value; the literal stays on the host. Other asserts run as
scripts inside the sandbox with the program (see docs/code.md for what that can and cannot
stop).
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Mapping, Sequence
from typing import Any

from .cases import CodeTest, TestSuite, function_name, loads, stdin_test
from .datasets import (
    CONTESTS_KEYS,
    LCB_KEYS,
    PRIME_TYPES,
    code_contests,
    json_lines_calls,
    livecodebench,
    verification_info,
)
from .evalplus import RAW_KEYS, evalplus_raw, evalplus_test

__all__ = ["CodeTest", "TestSuite", "parse_suite", "parse_tests"]

_BUILTIN_NAMES = frozenset(dir(builtins))


def parse_tests(answer: Any, language: str, *, script_tests: bool = False) -> list[CodeTest]:
    """The tests in ``answer``; ``ValueError`` naming what is wrong when they cannot be read."""
    return parse_suite(answer, language, script_tests=script_tests).tests


def parse_suite(answer: Any, language: str, *, script_tests: bool = False) -> TestSuite:
    """The tests in ``answer`` with the problem's own limits; ``ValueError`` naming what is
    wrong when they cannot be read (a format that is not known is never zero tests).

    JavaScript test scripts run in the program's own process, where a program could forge a
    pass: they are refused unless ``script_tests`` says the risk is accepted.
    """
    if answer is None:
        raise ValueError("the reference tests are missing (answer is None)")
    suite = _parse(loads(answer, "the reference tests"), language)
    if not suite.tests:
        raise ValueError("the reference holds no tests (empty inputs, asserts or check)")
    if language == "javascript" and not script_tests and any(t.check == "script"
                                                              for t in suite.tests):
        raise ValueError("JavaScript test scripts ('test'/'asserts') run inside the program's "
                         "own process, where a program can forge a pass: use stdin/stdout or "
                         "fn_name tests, or set script_tests: true to accept that risk")
    return suite


def _parse(data: Any, language: str) -> TestSuite:
    if isinstance(data, list):
        if any(isinstance(row, Mapping) and "testtype" in row for row in data):
            return TestSuite(livecodebench(data, language))
        if any(isinstance(row, Mapping) and row.get("type") in PRIME_TYPES for row in data):
            return TestSuite(verification_info(data, language))
        return TestSuite(_io_pairs(data))
    if not isinstance(data, Mapping):
        raise ValueError(f"the reference tests must be a JSON object or list, "
                         f"not {type(data).__name__}")
    if "input_output" in data:
        return _parse(loads(data["input_output"], "'input_output'"), language)
    if any(key in data for key in LCB_KEYS):
        return TestSuite(livecodebench(data, language))
    if any(key in data for key in CONTESTS_KEYS):
        return code_contests(data)
    if "verification_info" in data:
        return _parse(loads(data["verification_info"], "'verification_info'"), language)
    if "test_cases" in data:
        return TestSuite(verification_info(data, language))
    if "inputs" in data or "outputs" in data:
        return TestSuite(_inputs_outputs(data, language))
    if any(key in data for key in RAW_KEYS):  # before 'test': raw rows keep HumanEval's too
        return evalplus_raw(data, language)
    if "test" in data and (language == "python" or "test_list" not in data):
        tests = _test_code(data, language)
        if tests is not None:
            return TestSuite(tests)
    for key in ("asserts", "test_list"):
        if key in data:
            return TestSuite(_assert_list(data, key, language))
    raise ValueError(f"unknown test format: keys {sorted(map(str, data))}; expected inputs/"
                     f"outputs (with fn_name for calls), input_output (APPS/TACO), "
                     f"public_test_cases (LiveCodeBench), public_tests (CodeContests), "
                     f"test_cases (PrimeIntellect verification_info), "
                     f"test/entry_point (HumanEval, EvalPlus), plus_input (EvalPlus) or "
                     f"asserts/test_list (MBPP)")


def _inputs_outputs(data: Mapping[str, Any], language: str) -> list[CodeTest]:
    """APPS/TACO: stdin/stdout pairs, or calls of ``fn_name`` with argument lists (or, from
    LiveCodeBench, with strings of JSON arguments, one a line)."""
    inputs, outputs = data.get("inputs"), data.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise ValueError("'inputs' and 'outputs' must both be lists")
    if len(inputs) != len(outputs):
        raise ValueError(f"'inputs' has {len(inputs)} items but 'outputs' has {len(outputs)}")
    fn_name = data.get("fn_name")
    if fn_name is not None:
        fn = function_name(fn_name, "'fn_name'")
        if language == "cpp":
            raise ValueError("function-call tests need python or javascript, not cpp")
        as_lines = json_lines_calls(fn, inputs, outputs)
        if as_lines is not None:
            return as_lines
        return [CodeTest({"kind": "call", "fn": fn,
                          "args": list(args) if isinstance(args, list) else [args]},
                         expected, "json")
                for args, expected in zip(inputs, outputs)]
    return [stdin_test(x, y, f"test {i}") for i, (x, y) in enumerate(zip(inputs, outputs))]


def _test_code(data: Mapping[str, Any], language: str) -> list[CodeTest] | None:
    """HumanEval's ``check(candidate)``, EvalPlus's loops, JavaScript test scripts; None
    when this ``test`` is not for this language and an assert list is there instead."""
    code = data["test"]
    if not isinstance(code, str):
        raise ValueError("'test' must be a string of test code")
    entry = data.get("entry_point")
    if entry is not None:
        function_name(entry, "'entry_point'")
    if language == "python":
        module = _parse_code(code, "the test code")
        found = evalplus_test(module, entry)
        if found is not None:
            return found
        if not entry:
            if "test_list" in data or "asserts" in data:
                return None
            if any(isinstance(s, ast.FunctionDef) and s.name.startswith("test")
                   for s in module.body):
                raise ValueError("pytest-style test functions (KodCode's 'from solution import "
                                 "...' tests) are not a test format rewardsmith reads; give "
                                 "them as 'asserts' or as check(candidate) with 'entry_point'")
            raise ValueError("a 'test' with check(candidate) needs 'entry_point'")
        return _check_function(module, code, entry)
    if language == "javascript":
        return [CodeTest({"kind": "script", "code": code, "entry": None}, None, "script")]
    raise ValueError("assert tests need python or javascript, not cpp")


def _assert_list(data: Mapping[str, Any], key: str, language: str) -> list[CodeTest]:
    """MBPP: ``test_list`` (or ``asserts``), with ``test_setup_code`` / ``test_imports``."""
    asserts = data[key]
    if not isinstance(asserts, list) or not all(isinstance(a, str) for a in asserts):
        raise ValueError(f"{key!r} must be a list of assert statements (strings)")
    setup = data.get("test_setup_code") or ""
    imports = data.get("test_imports") or []
    if not isinstance(setup, str):
        raise ValueError("'test_setup_code' must be a string of code")
    if not isinstance(imports, list) or not all(isinstance(i, str) for i in imports):
        raise ValueError("'test_imports' must be a list of import statements (strings)")
    setup = "\n".join([*imports, setup]).strip()
    if language == "python":
        return [_assert_test(text, setup, index) for index, text in enumerate(asserts)]
    if language == "javascript":
        return [CodeTest({"kind": "script", "code": text, "entry": None}, None, "script")
                for text in asserts]
    raise ValueError("assert tests need python or javascript, not cpp")


def _io_pairs(items: Sequence[Any]) -> list[CodeTest]:
    tests = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping) or "input" not in item or "output" not in item:
            raise ValueError(f"test {index}: expected an object with 'input' and 'output'")
        tests.append(stdin_test(item["input"], item["output"], f"test {index}"))
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


def _check_function(module: ast.Module, code: str, entry: str) -> list[CodeTest]:
    """HumanEval's check(candidate): value tests when every statement is a plain assert."""
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
