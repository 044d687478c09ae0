"""An async reward has a hard deadline, even when it swallows its own cancellation.

A bare ``except:`` retry loop around a hanging await catches the ``CancelledError`` that a
timeout throws into it, so waiting for the cancellation to finish waits forever. The call is
abandoned at its timeout instead (its worker replaced when it will not yield), and calls
that block their worker time out in parallel over the pool.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from rewardsmith import Component, Engine, Rollout, Rubric, Status

REWARDS = Path(__file__).parent / "fixtures" / "long_run_rewards.py"


def rollouts(texts: list[str], group: str = "g") -> list[Rollout]:
    return [Rollout(f"{group}-{i}", group, "p", t, None) for i, t in enumerate(texts)]


@pytest.mark.parametrize("workers", [1, 0])
def test_an_async_reward_that_swallows_its_cancellation_times_out(tmp_path: Path,
                                                                   workers: int) -> None:
    log = tmp_path / "calls.log"
    rubric = Rubric([Component("a", f"{REWARDS}:stubborn", timeout=0.5,
                               params={"calls_log": str(log)})])
    texts = ["stubborn:1", "ok:1", "ok:2", "stubborn:2", "ok:3"]
    with Engine(rubric, workers=workers, max_concurrency=8) as engine:
        engine.score_group(rollouts(["warm"], "warm"))
        started = time.monotonic()
        scores = engine.score_group(rollouts(texts))
        elapsed = time.monotonic() - started
        # The engine goes on scoring after abandoning them.
        again = engine.score_group(rollouts(["ok:4", "ok:5"], "h"))
    assert elapsed < 3.0, elapsed
    assert [s.status for s in scores] == [Status.TIMEOUT, Status.OK, Status.OK,
                                          Status.TIMEOUT, Status.OK]
    assert "timed out after 0.5 s" in scores[0].errors["a"]
    assert [s.status for s in again] == [Status.OK, Status.OK]
    done = Counter(line.split(" ", 1)[1] for line in log.read_text().splitlines())
    assert done == {"warm": 1, "ok:1": 1, "ok:2": 1, "ok:3": 1, "ok:4": 1, "ok:5": 1}


def test_async_calls_that_block_time_out_in_parallel_over_the_workers() -> None:
    rubric = Rubric([Component("a", f"{REWARDS}:stubborn", timeout=1.0)])
    with Engine(rubric, workers=2, max_concurrency=8) as engine:
        engine.score_group(rollouts(["warm"], "warm"))
        started = time.monotonic()
        scores = engine.score(rollouts(["block:x"] * 8))
        elapsed = time.monotonic() - started
    assert [s.status for s in scores] == [Status.TIMEOUT] * 8
    # 8 calls of 1 s over 2 workers: about 5 s with the workers' restarts; one worker after
    # another cannot take less than 8 s (it took 12 s).
    assert elapsed < 8.0, elapsed
