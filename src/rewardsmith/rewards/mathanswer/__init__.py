"""Math answer verification: the built-in rewards ``math`` and ``boxed_math``.

The pipeline, cheapest step first:

1. ``extraction``: find the final answer (boxes, "final answer is", "Answer:", "####", ...).
2. ``latex`` + ``parser``: read it into a small tree (``nodes``); malformed LaTeX is refused.
3. ``equivalence``: compare shapes (sets, tuples, intervals, matrices, equations, ±).
4. ``fastpath``: exact rationals for numbers; ``numeric``: high-precision probing for the
   rest; ``symbolic``: sympy for what neither can decide (rare, and only where a timeout can
   kill it). Power towers and huge factorials are refused before any arithmetic.

For direct use with a hard timeout from any thread, see ``rewardsmith.mathcheck``.
"""

from __future__ import annotations

from typing import Any

from .._registry import builtin
from .check import ERROR, OK, UNDECIDED, Verdict, check

__all__ = ["Verdict", "check", "math_reward", "boxed_math_reward", "OK", "ERROR", "UNDECIDED"]

DEFAULT_TIMEOUT = 5.0


def _score(completion: str, answer: Any, *, boxed_only: bool, name: str) -> float:
    # sympy runs in this process: the engine runs built-ins in worker processes it can kill.
    verdict = check(completion, answer, boxed_only=boxed_only, symbolic=True)
    if verdict.status != OK:
        raise ValueError(f"{name}: {verdict.reason}")
    return 1.0 if verdict.equal else 0.0


@builtin("math", kind="verifier", default_timeout=DEFAULT_TIMEOUT)
def math_reward(completion: str, answer: Any) -> float:
    """Math: the final answer equals the reference (numbers, fractions, expressions, sets...)."""
    return _score(completion, answer, boxed_only=False, name="math")


@builtin("boxed_math", kind="verifier", default_timeout=DEFAULT_TIMEOUT)
def boxed_math_reward(completion: str, answer: Any) -> float:
    """Math, graded on the \\boxed{} answer only: no box, or several different boxes, gives 0."""
    return _score(completion, answer, boxed_only=True, name="boxed_math")
