"""A reward whose first call warms a cache for longer than its timeout can name a warm-up hook
(``func.warmup``), run once per worker before any call's clock starts.

Before: the first call on every worker (and on every replacement) timed out.
"""

from __future__ import annotations

from pathlib import Path

from rewardsmith import Component, Engine, Rollout, Rubric, Status

REWARDS = Path(__file__).parent / "fixtures" / "long_run_rewards.py"


def score(name: str) -> list[Status]:
    rubric = Rubric([Component("c", f"{REWARDS}:{name}", timeout=1.0)])
    with Engine(rubric, workers=1) as engine:
        return [s.status for s in engine.score_group(
            [Rollout(f"r{i}", "g", "p", "x", None) for i in range(3)])]


def test_a_warm_up_hook_runs_before_the_first_call_s_clock() -> None:
    assert score("cached") == [Status.OK] * 3


def test_without_the_hook_the_first_call_times_out() -> None:
    assert score("cached_without_warmup")[0] is Status.TIMEOUT
