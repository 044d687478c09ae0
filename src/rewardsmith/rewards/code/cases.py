"""What a reading of a rollout's tests produces: ``CodeTest``s and the ``TestSuite`` around them.

Shared by the generic formats (``testspec``) and the dataset formats (``datasets``,
``evalplus``), so that neither imports the other's parsing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CodeTest", "Reference", "TestSuite", "call_test", "function_name", "loads", "mapping",
           "stdin_test", "text_of"]


@dataclass(frozen=True)
class CodeTest:
    """One test: ``spec`` goes into the sandbox; ``expected`` and ``check`` stay here.

    ``check`` is ``stdout`` (compare printed text), ``json`` (a returned value against a JSON
    value, APPS style: a one-item list also matches its item), ``value`` (a returned value
    against a JSON value, exactly as Python's ``==``), ``equal`` / ``is`` / ``truthy`` /
    ``falsy`` (a Python literal) or ``script`` (passes when the test code runs to its end).
    ``tolerance``, when the dataset gives one for this test (EvalPlus ``atol``), replaces the
    rubric's ``float_tolerance``.
    """

    spec: dict[str, Any]
    expected: Any = None
    check: str = "stdout"
    tolerance: float | None = None


@dataclass(frozen=True)
class Reference:
    """A dataset that ships inputs and a reference solution but no outputs (EvalPlus's raw
    rows): the expected values are what ``source`` returns for each test's expression."""

    source: str
    atol: float = 0.0


@dataclass(frozen=True)
class TestSuite:
    """The tests of one problem, with the limits the dataset sets for it (if any)."""

    __test__ = False  # not a pytest class

    tests: list[CodeTest]
    time_limit: float | None = None  # seconds per test
    memory_mb: int | None = None
    reference: Reference | None = None


def loads(value: Any, what: str) -> Any:
    """``value`` parsed when it is a JSON string (datasets store fields both ways)."""
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ValueError(f"{what} is not JSON: {exc}") from exc
    return value


def text_of(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value) + ("\n" if value else "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"{what} must be a string (or a list of lines), got {type(value).__name__}")


def stdin_test(given: Any, expected: Any, what: str) -> CodeTest:
    return CodeTest({"kind": "stdin", "input": text_of(given, f"{what}: input")},
                    text_of(expected, f"{what}: output"), "stdout")


def function_name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.isidentifier():
        raise ValueError(f"{what} must be a function name, got {value!r}")
    return value


def call_test(fn: str, args: list[Any], expected: Any, check: str) -> CodeTest:
    return CodeTest({"kind": "call", "fn": fn, "args": args}, expected, check)


def mapping(value: Any, what: str) -> Mapping[str, Any]:
    value = loads(value, what)
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} must be an object, not {type(value).__name__}")
    return value
