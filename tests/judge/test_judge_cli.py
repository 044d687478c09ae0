"""``rewardsmith score`` with a judge, as real processes: killed mid-run with SIGKILL and
restarted, rescored with new weights and a new criterion text, two at once on one store, and
pointed at an endpoint that is down. Every count is exact."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from support.openai_server import OpenAIServer

MODEL = "judge-2024-01-01"
SECRET = "sk-cli-test-8d41a7f2e9"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(models=[MODEL], api_key=SECRET) as running:
        yield running


def write_rollouts(path: Path, n: int) -> Path:
    with path.open("w") as handle:
        for i in range(n):
            handle.write(json.dumps({"id": f"r{i}", "group": f"q{i // 5}",
                                     "prompt": f"What is {i} * 2?", "completion": f"#### {2 * i}",
                                     "answer": str(2 * i)}) + "\n")
    return path


def write_rubric(path: Path, base_url: str, store: Path, *, tidy: str = "Is it concise?",
                 weights: str = "{helpful: 1.0, tidy: 0.5}", concurrency: int = 4,
                 scope: str = "auto") -> Path:
    path.write_text(f"""\
name: verified-and-judged
components:
  correct: {{reward: gsm8k, weight: 1.0}}
  quality:
    judge:
      base_url: {base_url}
      model: {MODEL}
      api_key_env: JUDGE_CLI_KEY
      template: "Question: {{prompt}}\\nAnswer: {{completion}}"
      criteria:
        helpful: "Does the answer help the user?"
        tidy: {{description: "{tidy}", range: [0, 1]}}
      max_concurrency: {concurrency}
      limit_scope: {scope}
      price_per_million_input: 0.15
      price_per_million_output: 0.60
      store: {store}
    weights: {weights}
""")
    return path


def score_command(rollouts: Path, rubric: Path, output: Path) -> list[str]:
    return [sys.executable, "-m", "rewardsmith", "score", str(rollouts), "--rubric", str(rubric),
            "--output", str(output), "--json", "--workers", "0"]


def environment() -> dict[str, str]:
    return {**os.environ, "JUDGE_CLI_KEY": SECRET}


def score(rollouts: Path, rubric: Path, output: Path) -> tuple[dict[str, Any], str]:
    done = subprocess.run(score_command(rollouts, rubric, output), env=environment(),
                          cwd=rollouts.parent, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return summary_of(done.stdout), done.stderr


def summary_of(stdout: str) -> dict[str, Any]:
    return json.loads(stdout)  # type: ignore[no-any-return]


def usage_of(summary: dict[str, Any]) -> dict[str, float]:
    return summary["usage"]["judge:quality"]  # type: ignore[no-any-return]


def scored(output: Path) -> dict[str, dict[str, Any]]:
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    return {line["id"]: line for line in lines}


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


def test_killed_restarted_rescored_exact_calls(server: OpenAIServer, tmp_path: Path) -> None:
    store = tmp_path / "judge.db"
    rollouts = write_rollouts(tmp_path / "rollouts.jsonl", 50)
    rubric = write_rubric(tmp_path / "rubric.yaml", server.base_url, store)

    # Run 1: killed with SIGKILL once about half is billed and every slot waits on the server.
    server.hold_after(25)
    with (tmp_path / "run1.err").open("w") as errors:
        process = subprocess.Popen(score_command(rollouts, rubric, tmp_path / "run1.jsonl"),
                                   env=environment(), cwd=tmp_path, stdout=subprocess.DEVNULL,
                                   stderr=errors)
        try:
            wait_until(lambda: server.held == 4 and recorded_calls(store) == server.billed,
                       "the first run to fill its slots")
        finally:
            process.kill()
            process.wait()
    billed_before_kill = server.billed
    assert 25 <= billed_before_kill < 50
    server.release(drop=True)  # the held requests die with their client: nothing generated
    wait_until(lambda: server.held == 0, "held requests to be dropped")

    # Run 2: the restart pays for the rest only, taking over the dead process's claims.
    summary, _ = score(rollouts, rubric, tmp_path / "run2.jsonl")
    assert server.billed == 50
    usage = usage_of(summary)
    assert usage["calls"] == 50 - billed_before_kill
    # Grades of groups the first run finished may come from the run's result store instead.
    assert 0 < usage["replayed"] <= 2 * billed_before_kill
    assert usage["cost"] > 0 and usage["failed"] == 0
    first = scored(tmp_path / "run2.jsonl")
    assert len(first) == 50 and all(s["status"] == "ok" for s in first.values())
    assert all(set(s["components"]) == {"correct", "helpful", "tidy"} for s in first.values())
    assert all(s["components"]["correct"] == 1.0 for s in first.values())  # the verifier's flag

    # Run 3: new weights, no new call.
    write_rubric(rubric, server.base_url, store, weights="{helpful: 0.25, tidy: 2.0}")
    summary, _ = score(rollouts, rubric, tmp_path / "run3.jsonl")
    assert server.billed == 50 and usage_of(summary)["calls"] == 0
    for rollout_id, line in scored(tmp_path / "run3.jsonl").items():
        values = first[rollout_id]["components"]
        assert line["components"] == values
        assert line["reward"] == pytest.approx(
            values["correct"] + 0.25 * values["helpful"] + 2.0 * values["tidy"])

    # Run 4: one criterion's text changed: one call per rollout, asking for it alone.
    write_rubric(rubric, server.base_url, store, tidy="Is it short and clear?")
    summary, _ = score(rollouts, rubric, tmp_path / "run4.jsonl")
    assert server.billed == 100 and server.asked[50:] == [["tidy"]] * 50
    assert usage_of(summary)["calls"] == 50
    assert recorded_calls(store) == 100

    # The key went to the server and nowhere else.
    assert server.auth_headers and set(server.auth_headers) == {f"Bearer {SECRET}"}
    for path in tmp_path.iterdir():
        assert SECRET.encode() not in path.read_bytes(), path


def test_two_processes_sharing_a_store_never_pay_twice(server: OpenAIServer,
                                                      tmp_path: Path) -> None:
    store = tmp_path / "shared.db"
    rollouts = write_rollouts(tmp_path / "rollouts.jsonl", 30)
    # Each process may hold 3 calls (limits per process), so both are in the middle of it.
    rubric = write_rubric(tmp_path / "rubric.yaml", server.base_url, store, concurrency=3,
                          scope="process")
    server.hold_after(0)  # hold everything until both processes are in the middle of it
    processes = []
    for name in ("a", "b"):
        summary = (tmp_path / f"{name}.summary").open("w")
        processes.append((subprocess.Popen(
            score_command(rollouts, rubric, tmp_path / f"{name}.jsonl"), env=environment(),
            cwd=tmp_path, stdout=summary, stderr=subprocess.DEVNULL), summary))
        wait_until(lambda: server.held == 3 * len(processes), f"process {name} to hold 3 calls")
    server.release()
    for process, errors in processes:
        assert process.wait(timeout=60) == 0
        errors.close()
    assert server.billed == 30
    usages = [usage_of(summary_of((tmp_path / f"{n}.summary").read_text())) for n in "ab"]
    assert sum(u["calls"] for u in usages) == 30
    assert usages[1]["shared"] >= 6  # b waited for a's first claims instead of paying
    assert all(u["calls"] * 2 + u["shared"] + u["replayed"] == 60 for u in usages)
    a, b = scored(tmp_path / "a.jsonl"), scored(tmp_path / "b.jsonl")
    assert len(a) == 30 and a == b


def test_unreachable_endpoint_exits_2_before_scoring(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    rollouts = write_rollouts(tmp_path / "rollouts.jsonl", 5)
    rubric = write_rubric(tmp_path / "rubric.yaml", f"http://127.0.0.1:{port}/v1",
                          tmp_path / "j.db")
    started = time.monotonic()
    done = subprocess.run(score_command(rollouts, rubric, tmp_path / "out.jsonl"),
                          env=environment(), cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert "cannot reach the judge endpoint" in done.stderr
    assert time.monotonic() - started < 15
    assert not (tmp_path / "out.jsonl").exists()  # a failed run writes no output file
    assert SECRET not in done.stderr + done.stdout
