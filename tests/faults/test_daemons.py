"""Processes a reward starts do not outlive its call, and none holds the CLI's streams.

Before: a reward that started a daemon (double fork, new session) left it running after the
run, holding the CLI's output streams open, so ``$(rewardsmith score ... | wc -l)`` never
returned.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from rewardsmith import Component, Engine, Rollout, Rubric, Status

REWARDS = Path(__file__).parent / "fixtures" / "long_run_rewards.py"
CLI = [sys.executable, "-m", "rewardsmith"]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def test_a_daemon_a_reward_starts_ends_with_its_call(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemons"
    rubric = Rubric([Component("d", f"{REWARDS}:daemon", params={"pid_file": str(pid_file)})])
    with Engine(rubric, workers=1) as engine:
        scores = engine.score_group([Rollout("a", "g", "p", "daemon", None)])
        assert scores[0].status is Status.OK
        started = pids(pid_file)
        assert len(started) == 1
        # The engine is still open: the daemon ended with the call, not with the pool.
        deadline = time.monotonic() + 3
        while alive(started[0]) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(started[0])


def test_a_daemon_started_before_its_worker_crashed_is_ended(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemons"
    rubric = Rubric([Component("d", f"{REWARDS}:daemon", params={"pid_file": str(pid_file)})])
    with Engine(rubric, workers=1) as engine:
        scores = engine.score_group([Rollout("a", "g", "p", "daemon", None),
                                     Rollout("b", "g", "p", "crash", None)])
        assert [s.status for s in scores] == [Status.OK, Status.ERROR]
        started = pids(pid_file)
        assert len(started) == 1
        deadline = time.monotonic() + 3
        while alive(started[0]) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(started[0])


def test_the_cli_returns_while_a_reward_started_a_daemon(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemons"
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "prompt": "p", "completion": t}) + "\n"
                            for i, t in enumerate(["daemon", "plain"])), encoding="utf-8")
    process = subprocess.Popen(
        [*CLI, "score", str(data), "--reward", f"{REWARDS}:daemon", "-p",
         f"pid_file={pid_file}", "--workers", "1", "--no-store", "-q"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Both pipes reach their end: no process left behind holds them.
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
        for pid in pids(pid_file):
            if alive(pid):
                os.kill(pid, 9)
    assert process.returncode == 0, err
    assert len(out.splitlines()) == 2
    assert len(pids(pid_file)) == 1


def test_a_daemon_a_reward_starts_in_process_ends_with_its_batch(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemons"
    rubric = Rubric([Component("d", f"{REWARDS}:daemon", params={"pid_file": str(pid_file)})])
    with Engine(rubric, workers=0) as engine:
        scores = engine.score_group([Rollout("a", "g", "p", "daemon", None),
                                     Rollout("b", "g", "p", "plain", None)])
        assert [s.status for s in scores] == [Status.OK, Status.OK]
        started = pids(pid_file)
        assert len(started) == 1
        # Killed and reaped by this process (its subreaper) when the batch ended.
        assert not alive(started[0])
        assert "REWARDSMITH_CALLER_TAG" not in os.environ  # only while a batch runs


def test_the_cli_in_process_returns_while_a_reward_started_a_daemon(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemons"
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "prompt": "p", "completion": t}) + "\n"
                            for i, t in enumerate(["daemon", "plain"])), encoding="utf-8")
    process = subprocess.Popen(
        [*CLI, "score", str(data), "--reward", f"{REWARDS}:daemon", "-p",
         f"pid_file={pid_file}", "--workers", "0", "--no-store", "-q"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = process.communicate(timeout=30)  # both pipes closed by everyone
    finally:
        if process.poll() is None:
            process.kill()
        for pid in pids(pid_file):
            if alive(pid):
                os.kill(pid, 9)
    assert process.returncode == 0, err
    assert len(out.splitlines()) == 2
    started = pids(pid_file)
    assert len(started) == 1 and not alive(started[0])


_SCORE_IN_PROCESS_THEN_IN_WORKERS = """
from rewardsmith import Rollout, Rubric, score_rollouts
from rewardsmith.testing import run_reward_tests

rollout = Rollout("a", "g", "p", "4", "4")
assert score_rollouts(Rubric.single("exact"), [rollout], workers=0)[0].reward == 1.0
# Cases run in-process while the worker pool (and multiprocessing's fork server) starts: the
# fork server inherits the in-process batches' tag, and is not a reward's process to end.
report = run_reward_tests("exact", workers=2)
print("ok", len(report.rows))
"""


def test_what_the_program_starts_during_an_in_process_batch_is_not_ended_with_it() -> None:
    done = subprocess.run([sys.executable, "-c", _SCORE_IN_PROCESS_THEN_IN_WORKERS],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ok ")
