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


_STOPPED_HELPER = """
import os, signal, sys, time
import rewardsmith.workers as workers
from rewardsmith import Component, Rollout, Rubric
from rewardsmith.jobs.score import ScoreJob
from rewardsmith.store import Store
from rewardsmith.store._background import MIN_ROLLOUTS

stopped = []
start = workers.start_without_main

def start_stopped(process):
    # Stopped the moment it starts (before it has the run's rollouts), as a debugger or a job
    # system would: nothing it should have sent ever comes.
    start(process)
    os.kill(process.pid, signal.SIGSTOP)
    stopped.append(process.pid)

workers.start_without_main = start_stopped
rollouts = [Rollout(f"r{i}", f"g{i // 4}", "p", "#### 4", "4") for i in range(MIN_ROLLOUTS)]
started = time.monotonic()
try:
    with Store(sys.argv[1]) as store:
        result = ScoreJob(Rubric([Component("c", "gsm8k")]), workers=0,
                          store=store).run_rollouts(rollouts)
finally:
    for pid in stopped:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
assert stopped, "no helper process was started"
with Store(sys.argv[1]) as store:
    runs = store.runs()
    assert [(r.status, r.size) for r in runs] == [("done", MIN_ROLLOUTS)], runs
    assert len(store.members(runs[0].id)) == MIN_ROLLOUTS
print("ok", result.summary.rollouts, round(time.monotonic() - started, 1))
"""


@pytest.mark.skipif(not helper_fits(MIN_ROLLOUTS), reason="runs are recorded by a helper "
                    "process only with more than one core")
def test_a_stopped_store_helper_is_given_up_and_the_run_recorded(tmp_path: Path) -> None:
    """In a fresh interpreter: what earlier tests left in this one (a fork server, imported
    modules) must not decide whether a helper starts."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _STOPPED_HELPER, str(tmp_path / "runs.db")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    ok, rollouts, seconds = done.stdout.split()
    assert ok == "ok" and int(rollouts) == MIN_ROLLOUTS
    assert float(seconds) < 60


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
