"""Group, pairwise and reward-model scoring as real ``rewardsmith score`` processes, killed with
SIGKILL mid-run and restarted: the restart pays exactly for what the first run did not."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from support.openai_server import OpenAIServer

MODEL = "judge-2024-01-01"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(models=[MODEL]) as running:
        yield running


def write_rollouts(path: Path, groups: int, size: int) -> Path:
    with path.open("w") as handle:
        for g in range(groups):
            for i in range(size):
                handle.write(json.dumps({"id": f"r{g}-{i}", "group": f"q{g}",
                                         "prompt": f"What is {g} * {i}?",
                                         "completion": f"It is {g * i}, I think ({i})."}) + "\n")
    return path


def write_rubric(path: Path, base_url: str, store: Path, mode: str) -> Path:
    if mode == "reward_model":
        path.write_text(f"""\
components:
  quality:
    reward_model:
      base_url: {base_url.removesuffix("/v1")}
      api: openrlhf
      max_concurrency: 2
      store: {store}
""")
        return path
    extra = "samples: 2\n      temperature: 0.8" if mode == "samples" else f"mode: {mode}"
    path.write_text(f"""\
components:
  quality:
    judge:
      base_url: {base_url}
      model: {MODEL}
      {extra}
      template: "Question: {{prompt}}\\nAnswer: {{completion}}"
      criteria:
        helpful: "Does the answer help the user?"
        tidy: "Is it concise?"
      max_concurrency: 2
      store: {store}
""")
    return path


def command(rollouts: Path, rubric: Path, output: Path) -> list[str]:
    return [sys.executable, "-m", "rewardsmith", "score", str(rollouts), "--rubric", str(rubric),
            "--output", str(output), "--json", "--workers", "0", "--no-store"]


def usage_key(mode: str) -> str:
    return "reward_model:quality" if mode == "reward_model" else "judge:quality"


def recorded_calls(store: Path) -> int:
    if not store.exists():
        return 0
    with sqlite3.connect(store, timeout=10) as db:
        try:
            return int(db.execute("SELECT COUNT(*) FROM judge_calls").fetchone()[0])
        except sqlite3.OperationalError:
            return 0


def wait_until(condition: Callable[[], bool], what: str, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


@pytest.mark.parametrize(("mode", "groups", "size", "total", "hold"), [
    ("group", 8, 4, 8, 4),  # one call per group
    ("pairwise", 2, 4, 24, 10),  # 6 pairs x 2 orders per group
    ("samples", 2, 4, 16, 6),  # pointwise, 2 samples per rollout
    ("reward_model", 8, 4, 8, 4),  # one request per group
])
def test_killed_and_restarted_pays_exactly_once(server: OpenAIServer, tmp_path: Path, mode: str,
                                                groups: int, size: int, total: int,
                                                hold: int) -> None:
    store = tmp_path / "judge.db"
    rollouts = write_rollouts(tmp_path / "rollouts.jsonl", groups, size)
    rubric = write_rubric(tmp_path / "rubric.yaml", server.base_url, store, mode)

    server.hold_after(hold)
    with (tmp_path / "run1.err").open("w") as errors:
        process = subprocess.Popen(command(rollouts, rubric, tmp_path / "run1.jsonl"),
                                   cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=errors)
        try:
            wait_until(lambda: server.held == 2 and recorded_calls(store) == server.billed,
                       "the first run to fill its slots")
        finally:
            process.kill()
            process.wait()
    before = server.billed
    assert before == hold
    server.release(drop=True)
    wait_until(lambda: server.held == 0, "held requests to be dropped")

    done = subprocess.run(command(rollouts, rubric, tmp_path / "run2.jsonl"), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    usage = json.loads(done.stdout)["usage"][usage_key(mode)]
    assert server.billed == total and usage["calls"] == total - before
    per_call = {"group": 2 * size, "pairwise": 2, "samples": 2, "reward_model": size}[mode]
    assert usage["replayed"] == before * per_call
    lines = [json.loads(line) for line in (tmp_path / "run2.jsonl").read_text().splitlines()]
    assert len(lines) == groups * size and all(line["status"] == "ok" for line in lines)
    if mode == "pairwise":  # both orders of every pair were asked (the 2 held ones twice)
        asked = [body["messages"][-1]["content"].split("### Response A\n")[1]
                 .split("\n\nCriteria:")[0] for body in server.bodies]
        assert len(set(asked)) == total and len(asked) == total + 2

    # A third run replays everything.
    done = subprocess.run(command(rollouts, rubric, tmp_path / "run3.jsonl"), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["usage"][usage_key(mode)]["calls"] == 0
    assert server.billed == total


def test_score_refresh_asks_again_and_keeps_the_old_grades(server: OpenAIServer,
                                                           tmp_path: Path) -> None:
    store = tmp_path / "judge.db"
    rollouts = write_rollouts(tmp_path / "rollouts.jsonl", 2, 3)
    rubric = write_rubric(tmp_path / "rubric.yaml", server.base_url, store, "group")
    base = [sys.executable, "-m", "rewardsmith", "score", str(rollouts), "--rubric", str(rubric),
            "--output", str(tmp_path / "out.jsonl"), "--json", "--workers", "0",
            "--store", str(tmp_path / "run.db")]
    calls = []
    for extra in ([], [], ["--refresh"]):
        done = subprocess.run([*base, *extra], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        calls.append(json.loads(done.stdout)["usage"].get("judge:quality", {}).get("calls", 0))
    assert calls == [2, 0, 2] and server.billed == 4
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM judge_history").fetchone() == (12,)
