"""Competitive-programming datasets' test fields, read as the datasets ship them.

- LiveCodeBench (``livecodebench/code_generation_lite``) and the RL sets built from it
  (PRIME/DeepCoder style): ``public_test_cases`` / ``private_test_cases``, each a list (or a
  JSON string of one, or LiveCodeBench's compressed string) of ``{"input", "output",
  "testtype": "functional" | "stdin"}``; a functional test's input is one JSON value a line
  (the arguments), its output one JSON value; the function's name is in ``metadata``
  (``{"func_name": ...}``, often a JSON string) of the problem or of each test.
- PrimeIntellect's verifiable coding problems (``verification_info``, also in open-r1's
  copies): ``{"language", "test_cases": [{"type": "stdin_stdout" | "function_call", "input",
  "output", "fn_name"}]}``; a function call's input is the argument list.
- CodeContests (``deepmind/code_contests``): ``public_tests`` / ``private_tests`` /
  ``generated_tests``, each ``{"input": [...], "output": [...]}``, with the problem's
  ``time_limit`` (``{"seconds", "nanos"}``) and ``memory_limit_bytes``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
import pickletools
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from .cases import CodeTest, TestSuite, call_test, function_name, loads, mapping, stdin_test

__all__ = ["LCB_KEYS", "CONTESTS_KEYS", "PRIME_TYPES", "code_contests", "json_lines_calls",
           "lcb_rows", "livecodebench", "verification_info"]

LCB_KEYS = ("public_test_cases", "private_test_cases")
CONTESTS_KEYS = ("public_tests", "private_tests", "generated_tests")
PRIME_TYPES = ("stdin_stdout", "function_call")
# LiveCodeBench's compressed private tests reach tens of MB; refuse what is far past that.
_MAX_DECOMPRESSED = 512 << 20


# What ``pickle.dumps(a_string)`` writes, at any protocol: one string, framing and a memo.
_STRING_OPS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"})
_FRAME_OPS = frozenset({"PROTO", "FRAME", "MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT", "STOP"})


def _pickled_string(raw: bytes) -> str:
    """The one string a pickle holds, read op by op without unpickling: nothing is built or
    called, and a declared length past the data is an error, not an allocation."""
    found: str | None = None
    for opcode, argument, _ in pickletools.genops(raw):
        if opcode.name in _STRING_OPS and found is None and isinstance(argument, str):
            found = argument
        elif opcode.name not in _FRAME_OPS:
            raise ValueError(f"the pickle holds {opcode.name}, not one string")
    if found is None:
        raise ValueError("the pickle holds no string")
    return found


@functools.lru_cache(maxsize=4)
def _decompress(text: str, what: str) -> Any:
    """LiveCodeBench's private tests: base64 of zlib of a pickled JSON string. Kept for the
    last few problems: every rollout of a group carries the same string (callers only read
    the rows)."""
    try:
        packed = base64.b64decode(text.encode("ascii"), validate=True)
        inflater = zlib.decompressobj()
        raw = inflater.decompress(packed, _MAX_DECOMPRESSED)
        too_big = bool(inflater.unconsumed_tail)
        inner = None if too_big else _pickled_string(raw)
    except (binascii.Error, UnicodeEncodeError, zlib.error, ValueError) as exc:
        raise ValueError(f"{what} is neither JSON nor LiveCodeBench's compressed tests "
                         f"(base64, zlib, pickled JSON): {exc}") from exc
    if too_big:
        raise ValueError(f"{what}: decompresses to more than {_MAX_DECOMPRESSED >> 20} MiB")
    return loads(inner, what)


def lcb_rows(value: Any, what: str) -> list[Any]:
    """The test rows of one LiveCodeBench field, however it is stored."""
    if value is None or value == "":
        return []
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = _decompress(value.strip(), what)
    if not isinstance(value, list):
        raise ValueError(f"{what} must be a list of tests, not {type(value).__name__}")
    return value


def _func_name(metadata: Any, what: str) -> str | None:
    if metadata is None or metadata == "":
        return None
    found = mapping(metadata, what).get("func_name")
    return None if found is None else function_name(found, f"{what} func_name")


def _arguments(text: Any, what: str) -> list[Any]:
    if not isinstance(text, str):
        raise ValueError(f"{what}: a functional test's input must be a string of JSON values, "
                         f"one a line, not {type(text).__name__}")
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()  # a trailing newline is not an argument
    args = []
    for number, line in enumerate(lines, 1):
        try:
            args.append(json.loads(line))
        except ValueError as exc:
            raise ValueError(f"{what}: input line {number} is not a JSON value: {exc}") from exc
    return args


def json_lines_calls(fn: str, inputs: list[Any], outputs: list[Any]) -> list[CodeTest] | None:
    """LiveCodeBench's function tests in APPS's shape (what its own ``get_evaluation_sample``
    and the RL sets built on it write): every input a string of JSON values, one a line, and
    every output a JSON string. None when they are not all that (APPS's argument lists)."""
    if not inputs or not all(isinstance(v, str) for v in [*inputs, *outputs]):
        return None
    try:
        return [call_test(fn, _arguments(given, f"test {index}"), json.loads(expected), "value")
                for index, (given, expected) in enumerate(zip(inputs, outputs))]
    except ValueError:
        return None


def _lcb_test(row: Any, what: str, problem_fn: str | None, language: str) -> CodeTest:
    if not isinstance(row, Mapping) or "input" not in row or "output" not in row:
        raise ValueError(f"{what}: expected an object with 'input', 'output' and 'testtype'")
    kind = row.get("testtype", "stdin")
    if kind == "stdin":
        return stdin_test(row["input"], row["output"], what)
    if kind != "functional":
        raise ValueError(f"{what}: testtype {kind!r} is not 'functional' or 'stdin'")
    fn = _func_name(row.get("metadata"), f"{what}: metadata") or problem_fn
    if fn is None:
        raise ValueError(f"{what}: a functional test needs metadata with 'func_name' "
                         f"(in the problem's 'metadata' or the test's own)")
    if language == "cpp":
        raise ValueError("function-call tests need python or javascript, not cpp")
    output = row["output"]
    try:
        expected = json.loads(output) if isinstance(output, str) else output
    except ValueError as exc:
        raise ValueError(f"{what}: the output is not a JSON value: {exc}") from exc
    return call_test(fn, _arguments(row["input"], what), expected, "value")


def livecodebench(data: Mapping[str, Any] | Sequence[Any], language: str) -> list[CodeTest]:
    """A LiveCodeBench problem (its test fields and ``metadata``) or a list of its rows."""
    if isinstance(data, Mapping):
        problem_fn = _func_name(data.get("metadata"), "metadata")
        rows = [(f"{key}[{index}]", row) for key in LCB_KEYS
                for index, row in enumerate(lcb_rows(data.get(key), key))]
    else:
        problem_fn = None
        rows = [(f"test {index}", row) for index, row in enumerate(data)]
    return [_lcb_test(row, what, problem_fn, language) for what, row in rows]


def _prime_test(row: Any, what: str, language: str) -> CodeTest:
    if not isinstance(row, Mapping) or "input" not in row or "output" not in row:
        raise ValueError(f"{what}: expected an object with 'type', 'input' and 'output'")
    kind = row.get("type", "stdin_stdout")
    if kind == "stdin_stdout":
        return stdin_test(row["input"], row["output"], what)
    if kind != "function_call":
        raise ValueError(f"{what}: type {kind!r} is not 'stdin_stdout' or 'function_call'")
    if language == "cpp":
        raise ValueError("function-call tests need python or javascript, not cpp")
    fn = function_name(row.get("fn_name"), f"{what}: fn_name")
    args = loads(row["input"], f"{what}: input")
    # As in APPS/TACO, which these rows come from: an argument list, the output maybe wrapped.
    return call_test(fn, list(args) if isinstance(args, list) else [args],
                     loads(row["output"], f"{what}: output"), "json")


def verification_info(data: Mapping[str, Any] | Sequence[Any], language: str) -> list[CodeTest]:
    """PrimeIntellect's ``verification_info`` (or its list of ``test_cases``)."""
    rows = data.get("test_cases") if isinstance(data, Mapping) else data
    rows = loads(rows, "test_cases")
    if not isinstance(rows, list):
        raise ValueError(f"test_cases must be a list of tests, not {type(rows).__name__}")
    return [_prime_test(row, f"test_cases[{index}]", language)
            for index, row in enumerate(rows)]


def _seconds(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        seconds, nanos = value.get("seconds") or 0, value.get("nanos") or 0
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                   for v in (seconds, nanos)):
            raise ValueError(f"time_limit must hold numbers, got {dict(value)!r}")
        total = float(seconds) + float(nanos) / 1e9
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        total = float(value)
    else:
        raise ValueError(f"time_limit must be {{'seconds', 'nanos'}} or a number, got {value!r}")
    if not math.isfinite(total) or total < 0:
        raise ValueError(f"time_limit must be a finite number >= 0, got {value!r}")
    return total or None  # 0: the problem gives none


def _megabytes(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"memory_limit_bytes must be a whole number >= 0, got {value!r}")
    return math.ceil(value / (1 << 20)) or None  # 0: the problem gives none


def code_contests(data: Mapping[str, Any]) -> TestSuite:
    """A CodeContests problem: every test block present, and the problem's limits."""
    tests: list[CodeTest] = []
    for key in CONTESTS_KEYS:
        block = data.get(key)
        if block is None:
            continue
        block = mapping(block, key)
        inputs, outputs = block.get("input"), block.get("output")
        if not isinstance(inputs, list) or not isinstance(outputs, list):
            raise ValueError(f"{key}: 'input' and 'output' must both be lists")
        if len(inputs) != len(outputs):
            raise ValueError(f"{key}: 'input' has {len(inputs)} items but 'output' has "
                             f"{len(outputs)}")
        tests += [stdin_test(given, expected, f"{key}[{index}]")
                  for index, (given, expected) in enumerate(zip(inputs, outputs))]
    return TestSuite(tests, _seconds(data.get("time_limit")),
                     _megabytes(data.get("memory_limit_bytes")))
