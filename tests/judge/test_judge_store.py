"""The judge's call record: claims held by live, dead and slow owners; a shared store file."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import Engine, Rollout, Rubric, Score, Status, StoreError
from support.openai_server import OpenAIServer

MODEL = "judge-2024-01-01"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(models=[MODEL]) as running:
        yield running


def rubric(server: OpenAIServer, store: Path) -> Rubric:
    return Rubric.from_dict({"components": {"quality": {"judge": {
        "base_url": server.base_url, "model": MODEL, "store": str(store),
        "template": "{prompt} -> {completion}",
        "criteria": {"helpful": "Does it help?", "tidy": "Is it concise?"}}}}})


def rollouts(n: int) -> list[Rollout]:
    return [Rollout(f"r{i}", f"g{i // 5}", f"{i}+1?", f"{i + 1}") for i in range(n)]


def run(rubric: Rubric, items: list[Rollout]) -> tuple[list[Score], dict[str, float]]:
    with Engine(rubric, workers=0) as engine:
        engine.check()
        return engine.score(items), engine.usage()["judge:quality"]


def claim_all(store: Path, *, pid: int, host: str | None = None, lease: float = 3600) -> None:
    """Turn every record into a claim held by ``pid`` (on ``host``, default this one)."""
    with sqlite3.connect(store) as db:
        db.execute("UPDATE judge_records SET state = 'claimed', value = NULL, owner = 'other', "
                   "owner_host = ?, owner_pid = ?, lease_until = ?",
                   (host or socket.gethostname(), pid, time.time() + lease))


def settle_all(store: Path, *, value: float | None, error: str | None = None,
               after: float = 0.4) -> threading.Thread:
    """In ``after`` seconds, settle every claim as another process would."""
    def write() -> None:
        time.sleep(after)
        state = "ok" if value is not None else "failed"
        with sqlite3.connect(store, timeout=10) as db:
            db.execute("UPDATE judge_records SET state = ?, value = ?, error = ?, owner = NULL",
                       (state, value, error))
    thread = threading.Thread(target=write)
    thread.start()
    return thread


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_claims_of_a_dead_process_are_taken_over_at_once(server: OpenAIServer,
                                                         tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    run(rubric(server, store), rollouts(6))
    claim_all(store, pid=dead_pid())
    started = time.monotonic()
    scores, usage = run(rubric(server, store), rollouts(6))
    assert time.monotonic() - started < 3  # not the hour-long lease
    assert server.billed == 12 and usage["calls"] == 6
    assert all(s.status is Status.OK for s in scores)


def test_claims_left_by_an_ended_run_of_this_process_are_taken_over(
        server: OpenAIServer, tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    run(rubric(server, store), rollouts(3))
    claim_all(store, pid=os.getpid())  # an owner of this process that no longer runs
    started = time.monotonic()
    _, usage = run(rubric(server, store), rollouts(3))
    assert time.monotonic() - started < 3 and usage["calls"] == 3


def test_expired_lease_on_another_host_is_taken_over(server: OpenAIServer,
                                                     tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    run(rubric(server, store), rollouts(3))
    claim_all(store, pid=1, host="another-host", lease=-1)
    _, usage = run(rubric(server, store), rollouts(3))
    assert usage["calls"] == 3 and server.billed == 6


def test_a_live_claim_is_waited_for_not_paid_twice(server: OpenAIServer, tmp_path: Path,
                                                   sleeper: subprocess.Popen[bytes]) -> None:
    store = tmp_path / "j.db"
    run(rubric(server, store), rollouts(4))
    claim_all(store, pid=sleeper.pid)
    writer = settle_all(store, value=0.125)
    scores, usage = run(rubric(server, store), rollouts(4))
    writer.join()
    assert server.billed == 4  # nothing new
    assert usage["calls"] == 0 and usage["shared"] == 8
    assert all(s.components == {"helpful": 0.125, "tidy": 0.125} for s in scores)


def test_a_failure_seen_while_waiting_is_reported_not_retried(
        server: OpenAIServer, tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    store = tmp_path / "j.db"
    run(rubric(server, store), rollouts(2))
    claim_all(store, pid=sleeper.pid)
    writer = settle_all(store, value=None, error="judge call failed: HTTP 500: boom")
    scores, usage = run(rubric(server, store), rollouts(2))
    writer.join()
    assert server.billed == 2 and usage["calls"] == 0
    assert "HTTP 500: boom (call made by another process" in scores[0].errors["tidy"]
    _, usage = run(rubric(server, store), rollouts(2))  # the next run tries again
    assert usage["calls"] == 2 and server.billed == 4


def test_owner_dying_while_we_wait_hands_the_work_over(server: OpenAIServer,
                                                       tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    run(rubric(server, store), rollouts(3))
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    claim_all(store, pid=owner.pid)
    def kill_owner() -> None:
        owner.kill()
        owner.wait()

    threading.Timer(0.3, kill_owner).start()
    scores, usage = run(rubric(server, store), rollouts(3))
    assert usage["calls"] == 3 and server.billed == 6
    assert all(s.status is Status.OK for s in scores)


def test_store_file_is_shared_with_other_tables(server: OpenAIServer, tmp_path: Path) -> None:
    store = tmp_path / "shared.db"
    with sqlite3.connect(store) as db:
        db.execute("CREATE TABLE results (key TEXT PRIMARY KEY, value REAL)")
        db.execute("INSERT INTO results VALUES ('k', 1.5)")
    run(rubric(server, store), rollouts(2))
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT * FROM results").fetchall() == [("k", 1.5)]
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"results", "judge_meta", "judge_records", "judge_calls", "judge_history"}


@pytest.mark.parametrize(("prepare", "message"), [
    (lambda p: p.with_name("missing-dir") / "j.db", "does not exist"),
    (lambda p: (p.write_text("not a database at all " * 100), p)[1], "cannot be opened"),
])
def test_unusable_store_fails_before_scoring(server: OpenAIServer, tmp_path: Path,
                                             prepare: Any, message: str) -> None:
    store = prepare(tmp_path / "j.db")
    with Engine(rubric(server, store), workers=0) as engine, pytest.raises(StoreError,
                                                                           match=message):
        engine.check()
    assert server.requests == 0


def test_newer_judge_schema_is_refused(server: OpenAIServer, tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    run(rubric(server, store), rollouts(1))
    with sqlite3.connect(store) as db:
        db.execute("UPDATE judge_meta SET value = '99' WHERE key = 'schema'")
    with Engine(rubric(server, store), workers=0) as engine, pytest.raises(
            StoreError, match="judge schema 99"):
        engine.check()


def test_run_store_is_used_unless_the_judge_names_one(server: OpenAIServer, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = {"base_url": server.base_url, "model": MODEL, "template": "{completion}",
              "criteria": {"ok": "ok?"}}
    plain = Rubric.from_dict({"components": {"q": {"judge": config}}})
    with Engine(plain, workers=0) as engine:
        engine.check()
        engine.score(rollouts(1))
    assert (tmp_path / "rewardsmith.db").exists()
    with Engine(plain, workers=0, store_path=str(tmp_path / "run.db")) as engine:
        engine.check()
        engine.score(rollouts(1))
    assert (tmp_path / "run.db").exists() and server.billed == 2
