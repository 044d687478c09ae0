"""A reward that forks, exits, changes directory or replaces ``sys.stdout`` affects only its
own call, in worker processes and in-process (``workers=0``) alike.

Before: a fork in a worker left two copies of the worker loop reading one pipe (16 calls
became 1,564); ``sys.exit()`` in-process ended ``rewardsmith score`` with exit 0 and no
output; ``os.chdir`` in-process wrote ``-o`` into another folder; a replaced ``sys.stdout``
swallowed the scored lines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from rewardsmith import Component, Engine, Rollout, Rubric, Status

REWARDS = Path(__file__).parent / "fixtures" / "long_run_rewards.py"
CLI = [sys.executable, "-m", "rewardsmith"]
TEXTS = ["ok:0", "fork:1", "ok:2", "exit:3", "ok:4", "chdir:5", "where:6", "stdout:7", "ok:8"]


def rollouts(texts: list[str]) -> list[Rollout]:
    return [Rollout(f"r{i}", "g", "p", t, None) for i, t in enumerate(texts)]


def calls(log: Path) -> Counter[str]:
    return Counter(line.split(" ", 1)[1] for line in log.read_text().splitlines())


@pytest.mark.parametrize("workers", [1, 0])
def test_fork_exit_chdir_and_stdout_affect_only_their_own_call(tmp_path: Path,
                                                                workers: int) -> None:
    log = tmp_path / "calls.log"
    rubric = Rubric([Component("m", f"{REWARDS}:misbehave", params={"calls_log": str(log)})])
    here = os.getcwd()
    stdout = sys.stdout
    try:
        with Engine(rubric, workers=workers) as engine:
            first = engine.score(rollouts(TEXTS))
            second = engine.score(rollouts(["where:again", "ok:again"]))
        assert os.getcwd() == here
        assert sys.stdout is stdout
    finally:
        os.chdir(here)
        sys.stdout = stdout
    statuses = {s.id: s.status for s in first}
    assert statuses.pop("r3") is Status.ERROR
    assert "sys.exit" in first[3].errors["m"] or "SystemExit" in first[3].errors["m"]
    assert set(statuses.values()) == {Status.OK}
    # A call after the chdir, in the same batch and in the next one, sees the first folder.
    where = {s.id: s.reward for s in first + second if s.id in ("r6",)}
    assert where["r6"] == float(len(here))  # workers start in the parent's folder
    assert second[0].reward == where["r6"]
    # Every call ran once: no second copy of the loop after the fork.
    assert calls(log) == Counter({t: 1 for t in TEXTS + ["where:again", "ok:again"]})


def test_the_cli_in_process_writes_every_line_where_it_was_asked(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "prompt": "p", "completion": t}) + "\n"
                            for i, t in enumerate(TEXTS)), encoding="utf-8")
    for output in ("scored.jsonl", "-"):
        run = subprocess.run(
            [*CLI, "score", str(data), "--reward", f"{REWARDS}:misbehave", "--workers", "0",
             "--no-store", "-o", output, "--max-error-rate", "1"],
            cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        text = (tmp_path / output).read_text() if output != "-" else run.stdout
        lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        assert [line["id"] for line in lines] == [f"r{i}" for i in range(len(TEXTS))]
        assert lines[3]["status"] == "error"
    assert not Path("/scored.jsonl").exists()
