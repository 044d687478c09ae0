"""Per-call timing (``score --timing``, ``Engine(timing=True)``): each component's call time
on every score, in the store and in the summary; nothing recorded when not asked."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from array import array
from pathlib import Path

import pytest

from rewardsmith import Component, Engine, Rollout, Rubric, ScoreJob

REWARDS = '''
import asyncio
import time


def slow(completion):
    time.sleep(0.3 if completion.startswith("slow") else 0.0)
    return 1.0


def quick(completion):
    return {"score": 0.5, "len": float(len(completion))}


async def waits(completion):
    await asyncio.sleep(0.02)
    return 1.0


def per_group(completions):
    time.sleep(0.01)
    return [1.0] * len(completions)
'''


@pytest.fixture
def rewards(tmp_path: Path) -> Path:
    path = tmp_path / "timed_rewards.py"
    path.write_text(REWARDS)
    return path


def _rollouts() -> list[Rollout]:
    return [Rollout(f"r{i}", f"g{i // 2}", "p", "slow one" if i == 3 else "fast", "x")
            for i in range(6)]


@pytest.mark.parametrize("workers", [0, 1])
def test_each_score_carries_each_components_call_time(rewards: Path, workers: int) -> None:
    rubric = Rubric([Component("slow", f"{rewards}:slow"), Component("quick", f"{rewards}:quick"),
                     Component("waits", f"{rewards}:waits"),
                     Component("group", f"{rewards}:per_group", group=True)])
    with Engine(rubric, workers=workers, timing=True) as engine:
        scores = engine.score(_rollouts())
    for score in scores:
        assert score.timing is not None and set(score.timing) == {"slow", "quick", "waits",
                                                                  "group"}
        assert score.metrics == {"quick.len": 4.0 if score.id != "r3" else 8.0}  # no timing
        assert score.timing["waits"] >= 0.015 and score.timing["group"] >= 0.008
        assert score.to_dict()["timing"] == score.timing
    assert scores[3].timing["slow"] >= 0.25 > max(s.timing["slow"] for s in scores  # type: ignore[index]
                                                   if s.id != "r3")


def test_untimed_runs_carry_no_timing(rewards: Path) -> None:
    rubric = Rubric([Component("slow", f"{rewards}:slow")])
    with Engine(rubric, workers=0) as engine:
        scores = engine.score(_rollouts())
    assert all(s.timing is None and "timing" not in s.to_dict() for s in scores)


def test_score_timing_writes_lines_store_and_summary(rewards: Path, tmp_path: Path) -> None:
    rollouts = tmp_path / "r.jsonl"
    rollouts.write_text("".join(json.dumps({"id": r.id, "group": r.group, "prompt": r.prompt,
                                            "completion": r.completion, "answer": r.answer})
                                + "\n" for r in _rollouts()))
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text(f"components:\n  slow: {{reward: '{rewards}:slow'}}\n"
                      f"  format: {{reward: marker, params: {{marker: slow}}}}\n")
    out, store = tmp_path / "o.jsonl", tmp_path / "s.db"
    done = subprocess.run([sys.executable, "-m", "rewardsmith", "score", str(rollouts), "-r",
                           str(rubric), "-o", str(out), "--store", str(store), "--timing",
                           "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(set(line["timing"]) == {"slow", "format"} for line in lines)
    summary = json.loads(done.stdout)
    assert summary["timing"]["slow"]["calls"] == 6 and summary["timing"]["slow"]["max"] >= 0.25
    assert summary["slowest"][0] == {"id": "r3", "component": "slow",
                                     "seconds": summary["timing"]["slow"]["max"]}
    with sqlite3.connect(store) as db:  # each call's time kept beside its result
        blobs = db.execute("SELECT seconds FROM store_pending_results").fetchall()
    times = array("d")
    for (blob,) in blobs:
        times.frombytes(blob)
    assert len(times) == 12 and max(times) >= 0.25
    # Replayed from the store, a result took no time in this run: no timing for it.
    again = subprocess.run([sys.executable, "-m", "rewardsmith", "score", str(rollouts), "-r",
                            str(rubric), "-o", str(tmp_path / "o2.jsonl"), "--store", str(store),
                            "--timing", "-q"], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert all("timing" not in json.loads(line)
               for line in (tmp_path / "o2.jsonl").read_text().splitlines())


def test_score_job_summary_names_the_slowest_calls(rewards: Path) -> None:
    rubric = Rubric([Component("slow", f"{rewards}:slow")])
    result = ScoreJob(rubric, workers=0, timing=True).run_rollouts(_rollouts())
    timing = result.summary.extra["timing"]["slow"]
    assert timing["calls"] == 6 and timing["p50"] < 0.25 <= timing["max"]
    assert result.summary.extra["slowest"][0]["id"] == "r3"
