"""Judges against a real llama.cpp server on 127.0.0.1 (llama.cpp's own C++ server from the
``xllamacpp`` wheel, serving SmolLM2-135M-Instruct). Request counts are read on the wire, by a
proxy in front of the server. Slow: ``make test-slow`` installs what they need (``make
judge-local``); without it they skip, saying so."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import Rollout, Rubric, Status
from rewardsmith.engine import Engine
from support.llama_server import MODEL, CountingProxy, LlamaServer, missing_reason

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(missing_reason() is not None,
                                 reason=missing_reason() or ""),
              pytest.mark.timeout(600)]

TEMPLATE = "Question: {prompt}\nAnswer: {completion}"


@pytest.fixture(scope="module")
def server() -> Iterator[LlamaServer]:
    with LlamaServer(slots=2) as running:
        yield running


@pytest.fixture
def proxy(server: LlamaServer) -> Iterator[CountingProxy]:
    with CountingProxy(server.port) as counting:
        yield counting


def judge(base_url: str, store: Path, criteria: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"base_url": base_url, "model": MODEL, "store": str(store), "template": TEMPLATE,
            "criteria": criteria, "max_tokens": 64, "timeout": 120, **extra}


def rubric(config: dict[str, Any]) -> Rubric:
    return Rubric.from_dict({"name": "real-judge", "components": {"quality": {"judge": config}}})


def items(n: int, group: str = "g") -> list[Rollout]:
    return [Rollout(f"{group}-{i}", group, f"What is {i} + {i}?", f"It is {2 * i + i % 2}.",
                    str(2 * i)) for i in range(n)]


def score(rubric: Rubric, rollouts: list[Rollout]) -> tuple[list[Any], dict[str, float]]:
    with Engine(rubric, workers=0) as engine:
        engine.check()
        return engine.score(rollouts), engine.usage()["judge:quality"]


CRITERIA = {"score": {"description": "How correct is the answer?", "range": [1, 10]},
            "right": {"description": "Is the answer right?", "binary": True},
            "tidy": {"description": "Is it concise?", "range": [0, 1]}}


def test_structured_grades_are_valid_by_construction_and_paid_once(
        proxy: CountingProxy, tmp_path: Path) -> None:
    config = judge(proxy.base_url, tmp_path / "j.db", CRITERIA)
    scores, usage = score(rubric(config), items(3))
    assert [s.status for s in scores] == [Status.OK] * 3, [s.errors for s in scores]
    for s in scores:
        assert s.components["score"] in {float(v) for v in range(1, 11)}
        assert s.components["right"] in (0.0, 1.0)
        assert s.components["tidy"] in {round(v / 10, 10) for v in range(11)}
    assert proxy.chat_requests == 3 and usage["calls"] == 3 and usage["failed"] == 0
    again, usage = score(rubric(config), items(3))
    assert proxy.chat_requests == 3 and usage["replayed"] == 9
    assert [s.components for s in again] == [s.components for s in scores]


def test_group_and_pairwise_modes(proxy: CountingProxy, tmp_path: Path) -> None:
    helpful = {"helpful": {"description": "Is the answer right?", "range": [1, 10]}}
    grouped, usage = score(rubric(judge(proxy.base_url, tmp_path / "g.db", helpful,
                                        mode="group", max_tokens=96)), items(3))
    assert proxy.chat_requests == 1 and usage["calls"] == 1
    assert all(s.status is Status.OK for s in grouped), [s.errors for s in grouped]
    assert all(s.components["helpful"] in {float(v) for v in range(1, 11)} for s in grouped)
    paired, usage = score(rubric(judge(proxy.base_url, tmp_path / "p.db", helpful,
                                       mode="pairwise")), items(2))
    assert proxy.chat_requests == 1 + 2 and usage["calls"] == 2  # one pair, both orders
    assert all(s.status is Status.OK for s in paired), [s.errors for s in paired]
    assert all(1.0 <= (s.components["helpful"] or 0) <= 10.0 for s in paired)
    assert all("helpful.position_bias" in s.metrics for s in paired)


def test_logprob_grades(proxy: CountingProxy, tmp_path: Path) -> None:
    helpful = {"helpful": {"description": "Is the answer right?", "range": [1, 10]}}
    scores, usage = score(rubric(judge(proxy.base_url, tmp_path / "l.db", helpful,
                                       logprobs=True, top_logprobs=5)), items(2))
    assert proxy.chat_requests == 2 and usage["calls"] == 2
    assert all(s.status is Status.OK for s in scores), [s.errors for s in scores]
    assert all(1.0 <= (s.components["helpful"] or 0) <= 10.0 for s in scores)


def test_requests_in_flight_stay_within_the_slots(proxy: CountingProxy, tmp_path: Path) -> None:
    helpful = {"helpful": {"description": "Is the answer right?", "range": [1, 10]}}
    config = judge(proxy.base_url, tmp_path / "q.db", helpful, max_concurrency=8, max_tokens=24)
    scores, usage = score(rubric(config), items(6))
    assert all(s.status is Status.OK for s in scores), [s.errors for s in scores]
    assert proxy.peak_inflight <= 2 and proxy.chat_requests == 6 and usage["retries"] == 0


def test_a_server_restart_is_waited_for(tmp_path: Path) -> None:
    helpful = {"helpful": {"description": "Is the answer right?", "range": [1, 10]}}
    with LlamaServer(slots=1) as restarting:
        port = restarting.port
        config = judge(restarting.base_url, tmp_path / "r.db", helpful, max_tokens=24,
                       unavailable_wait=300)
        with Engine(rubric(config), workers=0) as engine:
            engine.check()
            restarting.stop()  # down: connections refused, then 503 while the model loads
            threading.Timer(2.0, restarting.start, kwargs={"port": port}).start()
            scores = engine.score(items(1))
            usage = engine.usage()["judge:quality"]
        assert scores[0].status is Status.OK, scores[0].errors
        assert usage["calls"] == 1 and usage["retries"] >= 1 and usage["failed"] == 0


def test_kill_9_and_rerun_pay_only_for_what_was_not_recorded(
        proxy: CountingProxy, tmp_path: Path) -> None:
    helpful = {"helpful": {"description": "Is the answer right?", "range": [1, 10]}}
    store = tmp_path / "k.db"
    rubric_file = tmp_path / "rubric.json"
    rubric_file.write_text(json.dumps({"name": "real-judge", "components": {"quality": {
        "judge": judge(proxy.base_url, store, helpful, max_tokens=24)}}}))
    rollouts = tmp_path / "in.jsonl"
    rollouts.write_text("".join(json.dumps({"id": r.id, "group": r.group, "prompt": r.prompt,
                                            "completion": r.completion}) + "\n"
                                for r in items(8)))
    command = [sys.executable, "-m", "rewardsmith", "score", str(rollouts), "--rubric",
               str(rubric_file), "-o", str(tmp_path / "out.jsonl"), "--no-store", "-q"]
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent.parent / "src")}
    first = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while proxy.chat_requests < 3 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    sent = proxy.chat_requests
    with sqlite3.connect(store) as db:
        recorded = db.execute("SELECT COUNT(*) FROM judge_records WHERE state = 'ok'").fetchone()[0]
    assert 1 <= recorded < 8 and sent - recorded <= 2  # at most the slots' calls were lost
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert proxy.chat_requests - sent == 8 - recorded  # exactly what was not recorded
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(lines) == 8 and all(line["status"] == "ok" for line in lines)
