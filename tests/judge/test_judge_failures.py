"""A failed grade is asked again on later runs only ``retry_failed`` times; then its recorded
failure is replayed as the error (``--refresh`` asks again). Against a real HTTP server on
127.0.0.1 whose replies are out of range."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import Rollout, Rubric, Status
from rewardsmith.engine import Engine
from rewardsmith.judge import refresh_judges
from rewardsmith.judge.ledger import Ledger
from support.openai_server import OpenAIServer

MODEL = "judge-2024-01-01"


def rubric(server: OpenAIServer, store: Path, **judge: Any) -> Rubric:
    config: dict[str, Any] = {
        "base_url": server.base_url, "model": MODEL, "store": str(store),
        "template": "Question: {prompt}\nAnswer: {completion}",
        "criteria": {"helpful": "Does it help?"}, **judge}
    return Rubric.from_dict({"components": {"quality": {"judge": config}}})


def run(rubric: Rubric, n: int = 3) -> tuple[list[Any], dict[str, float]]:
    items = [Rollout(f"r{i}", "g", f"What is {i}?", f"{i}", str(i)) for i in range(n)]
    with Engine(rubric, workers=0) as engine:
        engine.check()
        return engine.score(items), engine.usage()["judge:quality"]


def test_failed_grades_are_asked_again_a_bounded_number_of_times(tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    with OpenAIServer(models=[MODEL], style="out_of_range") as server:
        billed = []
        for _ in range(4):
            scores, usage = run(rubric(server, store, retry_failed=2))
            billed.append(server.billed)
            assert all(s.status is Status.ERROR for s in scores)
        assert billed == [3, 6, 9, 9]  # the first run and two more; then replayed
        assert usage["calls"] == 0 and usage["failed_replayed"] == 3
        assert "outside its range" in scores[0].errors["helpful"]
        assert "failed 3 times, not asked again; --refresh asks again" in \
            scores[0].errors["helpful"]
        refreshed = rubric(server, store, retry_failed=2)
        refresh_judges(refreshed)
        _, usage = run(refreshed)
        assert server.billed == 12 and usage["calls"] == 3
        _, usage = run(rubric(server, store, retry_failed=0))
        assert server.billed == 12 and usage["failed_replayed"] == 3
    with OpenAIServer(models=[MODEL]) as healthy:  # same keys, a server that now answers
        scores, usage = run(rubric(healthy, store, retry_failed=5))
        assert all(s.status is Status.OK for s in scores) and healthy.billed == 3
        _, usage = run(rubric(healthy, store, retry_failed=0))
        assert healthy.billed == 3 and usage["replayed"] == 3  # grades, as always


@pytest.mark.parametrize(("mode", "calls"), [("group", 1), ("pairwise", 6)])
def test_group_and_pairwise_failures_are_asked_again_a_bounded_number_of_times(
        tmp_path: Path, mode: str, calls: int) -> None:
    # Three rollouts of one group: one group call, or 3 pairs in both orders.
    store = tmp_path / "j.db"
    with OpenAIServer(models=[MODEL], style="malformed") as server:
        billed = []
        for _ in range(3):
            scores, usage = run(rubric(server, store, mode=mode, retry_failed=1))
            billed.append(server.billed)
            assert all(s.status is Status.ERROR for s in scores)
        assert billed == [calls, 2 * calls, 2 * calls]  # the first run and one more
        assert usage["calls"] == 0 and usage["failed_replayed"] == (3 if mode == "group"
                                                                    else 6)
        assert "failed 2 times, not asked again; --refresh asks again" in \
            scores[0].errors["helpful"]
        refreshed = rubric(server, store, mode=mode, retry_failed=1)
        refresh_judges(refreshed)
        _, usage = run(refreshed)
        assert server.billed == 3 * calls and usage["calls"] == calls
    with OpenAIServer(models=[MODEL]) as healthy:  # a server that now answers: asked again
        scores, usage = run(rubric(healthy, store, mode=mode, retry_failed=5))
        assert all(s.status is Status.OK for s in scores) and healthy.billed == calls
        scores, usage = run(rubric(healthy, store, mode=mode, retry_failed=0))
        assert healthy.billed == calls and all(s.status is Status.OK for s in scores)


def test_a_version_1_store_counts_its_failures_once(tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    with OpenAIServer(models=[MODEL], style="out_of_range") as server:
        run(rubric(server, store), 2)
        assert server.billed == 2
        with sqlite3.connect(store) as db:  # as version 1 left it: no failure count
            db.execute("ALTER TABLE judge_records DROP COLUMN failures")
            db.execute("UPDATE judge_meta SET value = '1' WHERE key = 'schema'")
        ledger = Ledger(str(store))
        ledger.open()
        records = ledger.lookup(list(ledger._db().execute(
            "SELECT key FROM judge_records").fetchall()[0]))
        ledger.close()
        ledger.shutdown()
        assert [r.failures for r in records.values()] == [1]
        run(rubric(server, store, retry_failed=1), 2)
        run(rubric(server, store, retry_failed=1), 2)
        assert server.billed == 4  # asked once more (count 1 -> 2), then no more


def test_a_reply_cut_at_max_tokens_says_so_in_the_scored_line(tmp_path: Path) -> None:
    with OpenAIServer(models=[MODEL], style="cut") as server:
        scores, usage = run(rubric(server, tmp_path / "j.db", max_tokens=8), 1)
    line = scores[0].to_dict()
    assert line["status"] == "error" and usage["failed"] == 1
    assert "cut at max_tokens=8: raise max_tokens" in line["errors"]["helpful"]


def test_a_cut_group_reply_says_so_too(tmp_path: Path) -> None:
    with OpenAIServer(models=[MODEL], style="cut") as server:
        scores, _ = run(rubric(server, tmp_path / "j.db", max_tokens=8, mode="group"), 3)
    assert server.billed == 1
    assert all("cut at max_tokens=8: raise max_tokens" in s.errors["helpful"] for s in scores)
