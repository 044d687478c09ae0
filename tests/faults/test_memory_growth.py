"""A reward whose memory grows slowly past ``memory_limit`` loses no rollout to crossing it.

Before: the call that happened to be running when the worker's memory crossed the limit was
an ``error``, although the memory was what earlier calls had left behind.
"""

from __future__ import annotations

from pathlib import Path

from rewardsmith import Component, Engine, Rollout, Rubric, Status

REWARDS = Path(__file__).parent / "fixtures" / "long_run_rewards.py"


def test_a_slow_leak_is_recycled_before_it_costs_a_rollout() -> None:
    rubric = Rubric([Component("leak", f"{REWARDS}:leak", memory_limit=200)])
    rollouts = [Rollout(f"r{i}", f"g{i // 8}", "p", "x", None) for i in range(80)]
    with Engine(rubric, workers=1) as engine:
        first = engine.score(rollouts[:40])  # one batch: the limit is crossed inside it
        second = engine.score(rollouts[40:])
        replaced = engine.workers_replaced
    assert [s.status for s in first + second] == [Status.OK] * 80, [
        s.errors for s in first + second if s.status is not Status.OK][:2]
    assert replaced >= 2  # 80 x 8 MB do not fit in one worker under 200 MB
