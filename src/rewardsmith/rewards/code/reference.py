"""Expected values a dataset leaves to its reference solution (EvalPlus's raw rows).

The reference solution runs once per problem in the same sandbox and limits as the programs;
its values are kept for the process (a GRPO group scores many programs against one problem).
A reference that fails a test is the dataset's fault: an error naming the test, never a 0.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import replace
from typing import Any

from ...sandbox import Job, Limits, get_sandbox
from .cases import TestSuite
from .compare import decode_typed
from .evalplus import tolerance_for

__all__ = ["with_reference_values"]

_KEPT = 256  # problems whose reference values are kept
_cache: OrderedDict[str, list[Any]] = OrderedDict()
_lock = threading.Lock()


def _key(suite: TestSuite, limits: Limits, sandbox: str) -> str:
    assert suite.reference is not None
    text = json.dumps([suite.reference.source, [t.spec for t in suite.tests],
                       limits.as_dict(), sandbox], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _run_reference(suite: TestSuite, limits: Limits, sandbox: str) -> list[Any]:
    assert suite.reference is not None
    job = Job("python", suite.reference.source, tuple(t.spec for t in suite.tests), limits)
    result = get_sandbox(sandbox).run(job)
    if not result.compiled:
        raise ValueError(f"the reference solution does not run: {result.compile_message}")
    values = []
    for index, run in enumerate(result.runs):
        failed = f"the reference solution fails test {index} ({suite.tests[index].spec['expr']})"
        if run.status != "done" or run.exit_code != 0:
            raise ValueError(f"{failed}: {run.status}, {run.stderr.strip()[-300:]}")
        try:
            sent = json.loads(run.value or "")
            values.append(decode_typed(sent["value"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{failed}: its value cannot be compared ({exc})") from exc
    return values


def with_reference_values(suite: TestSuite, limits: Limits, sandbox: str) -> TestSuite:
    """``suite`` with each test's expected value taken from the reference solution."""
    if suite.reference is None:
        return suite
    key = _key(suite, limits, sandbox)
    with _lock:
        values = _cache.get(key)
        if values is not None:
            _cache.move_to_end(key)
    if values is None:
        values = _run_reference(suite, limits, sandbox)
        with _lock:
            _cache[key] = values
            while len(_cache) > _KEPT:
                _cache.popitem(last=False)
    atol = suite.reference.atol
    tests = [replace(test, expected=value, tolerance=tolerance_for(atol, value))
             for test, value in zip(suite.tests, values)]
    return replace(suite, tests=tests, reference=None)
