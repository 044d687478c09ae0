"""The ``code`` reward: run the completion's program against the rollout's tests, sandboxed.

The program is the completion's last fenced block of its language (or an untagged one), else
the whole completion. The tests are the rollout's ``answer`` (see ``testspec``). The reward
is the fraction of tests passed (``mode: fraction``) or 1/0 for all of them (``mode: all``).
A wrong answer, a crash, a compile error or a test past its time limit is the program's
failure (a low score, explained in metrics); only tests that cannot be read or a sandbox that
fails are errors. The program runs only inside a sandbox (see ``rewardsmith.sandbox``); a
rubric with a ``code`` component is refused at load when none can start.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ...sandbox import LANGUAGES, Job, JobResult, Limits, TestRun, get_sandbox
from ...sandbox.jobs import STARTUP_MARGIN
from .._registry import builtin
from .compare import COMPARE_MODES, decode_typed, outputs_match, values_match
from .program import extract_program
from .reference import with_reference_values
from .testspec import CodeTest, parse_suite

__all__ = ["code", "CODE_DEFAULT_TIMEOUT"]

MODES = ("fraction", "all")
_DEFAULTS = Limits()
# The engine's hard timeout for one call: every test's share, a C++ compile, start-up.
CODE_DEFAULT_TIMEOUT = (_DEFAULTS.compile_time + _DEFAULTS.total_time + _DEFAULTS.time
                        + 2 * STARTUP_MARGIN)


def _limits(time_limit: Any, memory_limit: Any, total_time_limit: Any,
            compile_time_limit: Any = _DEFAULTS.compile_time) -> Limits:
    return Limits(time=time_limit, memory_mb=memory_limit, total_time=total_time_limit,
                  compile_time=compile_time_limit)


def _check(params: Mapping[str, Any]) -> None:
    """At load: params that can work, and a sandbox that starts for the language."""
    language = params.get("language")
    if language not in LANGUAGES:
        raise ValueError(f"language {language!r} is not supported; use one of "
                         f"{', '.join(LANGUAGES)}")
    if params.get("mode") not in MODES:
        raise ValueError(f"mode {params.get('mode')!r} must be one of {', '.join(MODES)}")
    if params.get("compare", "exact") not in COMPARE_MODES:
        raise ValueError(f"compare {params.get('compare')!r} must be one of "
                         f"{', '.join(COMPARE_MODES)}")
    if not isinstance(params.get("isolate_tests", False), bool):
        raise ValueError(f"isolate_tests must be true or false, got "
                         f"{params.get('isolate_tests')!r}")
    tolerance = params.get("float_tolerance")
    if tolerance is not None and (isinstance(tolerance, bool) or
                                  not isinstance(tolerance, (int, float)) or
                                  not math.isfinite(tolerance) or tolerance < 0):
        raise ValueError(f"float_tolerance must be a number >= 0 or null, got {tolerance!r}")
    _limits(params.get("time_limit"), params.get("memory_limit"),
            params.get("total_time_limit"),
            params.get("compile_time_limit", _DEFAULTS.compile_time))
    backend = get_sandbox(params.get("sandbox", "bubblewrap"))
    backend.check(str(language))
    environment = params.get("environment")
    if environment is not None:
        if not isinstance(environment, str) or not environment:
            raise ValueError(f"environment must be the path of a virtualenv or a Python "
                             f"interpreter, got {environment!r}")
        if language != "python":
            raise ValueError(f"environment is a Python environment; language is {language}")
        check_environment = getattr(backend, "check_environment", None)
        if check_environment is None:
            raise ValueError(f"sandbox {params.get('sandbox')!r} cannot run a Python "
                             f"environment of your choosing")
        check_environment(environment)


@builtin("code", kind="verifier", default_timeout=CODE_DEFAULT_TIMEOUT, check=_check)
def code(
    completion: str,
    answer: Any,
    language: str = "python",
    mode: str = "fraction",
    time_limit: float = _DEFAULTS.time,
    memory_limit: int = _DEFAULTS.memory_mb,
    total_time_limit: float = _DEFAULTS.total_time,
    float_tolerance: float | None = None,
    sandbox: str = "bubblewrap",
    script_tests: bool = False,
    problem_limits: bool = True,
    compare: str = "exact",
    compile_time_limit: float = _DEFAULTS.compile_time,
    environment: str | None = None,
    isolate_tests: bool = False,
) -> dict[str, float]:
    """Code: the program in the completion passes the answer's tests, run in a sandbox."""
    if language not in LANGUAGES:
        raise ValueError(f"language {language!r} is not supported")
    suite = parse_suite(answer, language, script_tests=script_tests)
    if problem_limits:  # the problem's own limits where stricter; the rubric's are ceilings
        time_limit = min(suite.time_limit or time_limit, time_limit)
        memory_limit = min(suite.memory_mb or memory_limit, memory_limit)
    limits = _limits(time_limit, memory_limit, total_time_limit, compile_time_limit)
    tests = with_reference_values(suite, limits, sandbox).tests
    program = extract_program(completion if isinstance(completion, str) else str(completion),
                              language)
    job = Job(language, program, tuple(t.spec for t in tests), limits,
              environment=environment or None, shared_calls=not isolate_tests)
    result = get_sandbox(sandbox).run(job)
    return _grade(tests, result, mode, float_tolerance, compare)


def _grade(tests: list[CodeTest], result: JobResult, mode: str,
           tolerance: float | None, compare: str = "exact") -> dict[str, float]:
    total = len(tests)
    counts = {"passed": 0, "timeouts": 0, "runtime_errors": 0, "wrong": 0, "skipped": 0}
    if result.compiled:
        for test, run in zip(tests, result.runs):
            verdict = _verdict(test, run, tolerance, compare)
            counts[verdict] += 1
    passed = counts["passed"]
    if mode == "all":
        reward = 1.0 if passed == total else 0.0
    else:
        reward = passed / total
    return {"reward": reward, "total": float(total),
            "compile_error": 0.0 if result.compiled else 1.0,
            **{k: float(v) for k, v in counts.items()}}


def _verdict(test: CodeTest, run: TestRun, tolerance: float | None,
             compare: str = "exact") -> str:
    if test.tolerance is not None:  # the dataset's own, for this test (EvalPlus atol)
        tolerance = test.tolerance
    if run.status == "bad_test":  # the test code cannot run: the dataset's fault, not a 0
        raise ValueError(f"test {run.index} cannot run: {run.reason or 'bad test code'}")
    if run.status == "timeout":
        return "timeouts"
    if run.status in ("skipped", "lost"):
        return "skipped"
    if run.status != "done":
        return "runtime_errors" if run.status == "output_limit" else "wrong"
    if run.exit_code != 0:
        return "runtime_errors"
    if test.check == "stdout":
        matched = outputs_match(run.stdout, str(test.expected), tolerance, compare)
        return "passed" if matched else "wrong"
    if test.check == "script":
        return "passed" if run.value == "done" else "runtime_errors"
    try:
        sent = json.loads(run.value or "")
    except (ValueError, RecursionError):
        return "runtime_errors"
    if not isinstance(sent, dict) or "value" not in sent:
        return "wrong"  # unencodable: a value of a type the test cannot compare
    try:
        return "passed" if _value_passes(test, sent["value"], tolerance) else "wrong"
    except (ArithmeticError, ValueError, TypeError, RecursionError, MemoryError):
        return "wrong"  # a value the host cannot compare (10**400 against a float): a failure


def _value_passes(test: CodeTest, raw: Any, tolerance: float | None) -> bool:
    if test.check == "json":
        expected = test.expected
        if values_match(raw, expected, tolerance):
            return True
        # APPS wraps a call's expected return value in a one-item list.
        return isinstance(expected, list) and len(expected) == 1 and \
            values_match(raw, expected[0], tolerance)
    if test.check == "value":  # exactly as Python's == (LiveCodeBench)
        return values_match(raw, test.expected, tolerance)
    value = decode_typed(raw)
    if test.check == "equal":
        return values_match(value, test.expected, tolerance)
    if test.check == "is":
        return value is test.expected
    if test.check == "truthy":
        return bool(value)
    if test.check == "falsy":
        return not value
    raise ValueError(f"unknown check {test.check!r}")
