"""One line in a user's own test suite: ``check_reward("my_rewards:score", cases="cases.jsonl")``.

It runs the same checks as ``rewardsmith test`` and raises ``AssertionError`` with the table of
failed checks when any fails, so a plain ``pytest`` run gates the reward::

    from rewardsmith.testing import check_reward

    def test_my_reward():
        check_reward("my_rewards.py:score", cases="tests/score.cases.jsonl")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .cases import Case
from .harness import RewardSpec, run_reward_tests
from .report import TestReport

__all__ = ["check_reward"]


def check_reward(
    reward: RewardSpec,
    cases: str | Path | Sequence[Case] | None = None,
    *,
    params: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    edges: bool = True,
    probes: bool = True,
    kinds: Sequence[str] | None = None,
    value_range: tuple[float, float] | None = None,
    workers: int | None = None,
) -> TestReport:
    """Test ``reward``; return the report when every check passes, else raise AssertionError."""
    report = run_reward_tests(reward, cases=cases, params=params, timeout=timeout, edges=edges,
                              probes=probes, kinds=kinds, value_range=value_range,
                              workers=workers)
    if not report.passed:
        raise AssertionError(f"{report.summary()}\n{report.text(only_failures=True)}")
    return report
