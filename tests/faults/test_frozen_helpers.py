"""A stopped (SIGSTOP) helper gets a deadline like any call: the run goes on without it.

Before: a store helper stopped while it held a large run's rollouts made ``score`` wait for
its reply forever; an idle worker stopped before its batch began made the pool wait forever
for the batch to start.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from rewardsmith import Component, Engine, Rollout, Rubric, Status
from rewardsmith.jobs.score import ScoreJob
from rewardsmith.store import Store
from rewardsmith.store._background import MIN_ROLLOUTS, helper_fits
from rewardsmith.workers._proctree import descendants

REWARDS = Path(__file__).parent / "fixtures" / "long_run_rewards.py"


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _stop_new_processes(before: set[int], stopped: list[int], until: threading.Event) -> None:
    """SIGSTOP every process started below this one from now on (not the fork server)."""
    while not until.is_set():
        for pid in set(descendants(os.getpid())) - before - set(stopped):
            if _parent(pid) not in (None, os.getpid()):  # a child of the fork server
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
        time.sleep(0.01)


@pytest.mark.skipif(not helper_fits(MIN_ROLLOUTS), reason="runs are recorded by a helper "
                    "process only with more than one core")
def test_a_stopped_store_helper_is_given_up_and_the_run_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rewardsmith.workers as workers

    store_path = tmp_path / "runs.db"
    rollouts = [Rollout(f"r{i}", f"g{i // 4}", "p", "#### 4", "4")
                for i in range(MIN_ROLLOUTS)]
    rubric = Rubric([Component("c", "gsm8k")])
    stopped: list[int] = []
    start = workers.start_without_main

    def start_stopped(process: object) -> None:
        # The helper is stopped the moment it starts (before it has the run's rollouts), as a
        # debugger or a job system would: nothing it should have sent ever comes.
        start(process)
        pid = process.pid  # type: ignore[attr-defined]
        os.kill(pid, signal.SIGSTOP)
        stopped.append(pid)

    monkeypatch.setattr(workers, "start_without_main", start_stopped)
    started = time.monotonic()
    try:
        with Store(store_path) as store:
            result = ScoreJob(rubric, workers=0, store=store).run_rollouts(rollouts)
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    assert stopped, "no helper process was started"
    assert time.monotonic() - started < 60
    assert result.summary.rollouts == MIN_ROLLOUTS
    with Store(store_path) as store:
        runs = store.runs()
        assert [(r.status, r.size) for r in runs] == [("done", MIN_ROLLOUTS)]
        assert len(store.members(runs[0].id)) == MIN_ROLLOUTS


def test_a_stopped_idle_worker_is_replaced(tmp_path: Path) -> None:
    rubric = Rubric([Component("m", f"{REWARDS}:misbehave", timeout=2.0)])
    with Engine(rubric, workers=1) as engine:
        engine.score_group([Rollout("w", "w", "p", "ok", None)])  # the worker is up, idle
        workers = [pid for pid in descendants(os.getpid()) if _parent(pid) != os.getpid()]
        assert workers  # the worker (a child of the fork server, which is left running)
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            scores = engine.score_group([Rollout(f"r{i}", "g", "p", "ok", None)
                                         for i in range(3)])
            elapsed = time.monotonic() - started
        finally:
            for pid in workers:
                try:
                    os.kill(pid, signal.SIGCONT)
                except OSError:
                    pass
    assert [s.status for s in scores] == [Status.OK] * 3
    assert elapsed < 15
