"""Test a reward before a run: hand-labeled cases, edge cases and hack probes.

``run_reward_tests`` returns a ``TestReport``; ``check_reward`` raises ``AssertionError`` when a
check fails (for a user's own test suite). Both load and score the reward exactly as a run does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

if TYPE_CHECKING:
    from .cases import Case, load_cases, parse_expected, starter_cases, write_starter_cases
    from .checks import Check, Expectation
    from .harness import load_reward_for_test, run_reward_tests
    from .kinds import KIND_NAMES
    from .pytest_helper import check_reward
    from .report import FAILURES, RowResult, TestReport

__all__ = [
    "FAILURES",
    "KIND_NAMES",
    "Case",
    "Check",
    "Expectation",
    "RowResult",
    "TestReport",
    "check_reward",
    "load_cases",
    "load_reward_for_test",
    "parse_expected",
    "run_reward_tests",
    "starter_cases",
    "write_starter_cases",
]

_HOMES = {
    "Case": ".cases",
    "Check": ".checks",
    "Expectation": ".checks",
    "FAILURES": ".report",
    "KIND_NAMES": ".kinds",
    "RowResult": ".report",
    "TestReport": ".report",
    "check_reward": ".pytest_helper",
    "load_cases": ".cases",
    "load_reward_for_test": ".harness",
    "parse_expected": ".cases",
    "run_reward_tests": ".harness",
    "starter_cases": ".cases",
    "write_starter_cases": ".cases",
}
__getattr__ = lazy_getattr(__name__, _HOMES, globals())
