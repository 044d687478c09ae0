"""The report with a store: the rubric and its id, the judge's calls, tokens and cost (from
the judge ledger, checked against the ledger's own rows and what a real OpenAI-compatible
server on 127.0.0.1 billed), and the linked rollouts' text; and a store without the run."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_report_content import Tables

from rewardsmith import Rollout, Rubric, ScoreJob
from rewardsmith.errors import StoreError
from rewardsmith.report import build_report
from support.openai_server import OpenAIServer

MODEL = "judge-2024-01-01"
SECRET = "sk-report-test-7a2c"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    monkeypatch.setenv("REPORT_JUDGE_KEY", SECRET)
    with OpenAIServer(models=[MODEL], api_key=SECRET) as running:
        yield running


def judged_rubric(base_url: str) -> Rubric:
    config: dict[str, Any] = {
        "name": "judged-report",
        "components": {
            "correct": {"reward": "gsm8k", "weight": 1.0},
            "quality": {
                "judge": {
                    "base_url": base_url, "model": MODEL, "api_key_env": "REPORT_JUDGE_KEY",
                    "template": "Question: {prompt}\nAnswer: {completion}",
                    "criteria": {"helpful": "Does the answer help the user?"},
                    "max_concurrency": 4,
                    "price_per_million_input": 0.15, "price_per_million_output": 0.60,
                },
            },
        },
    }
    return Rubric.from_dict(config)


def scored_run(server: OpenAIServer, folder: Path) -> tuple[Path, Path, Rubric]:
    store = folder / "run.db"
    rubric = judged_rubric(server.base_url)
    rollouts = [Rollout(f"r{i}", f"q{i // 4}", f"What is {i} * 2?", f"#### {2 * i + i % 2}",
                        str(2 * i)) for i in range(12)]
    result = ScoreJob(rubric, workers=0, store=str(store)).run_rollouts(rollouts)
    scored = folder / "scored.jsonl"
    with scored.open("w") as handle:
        for index, score in enumerate(result.scores):
            line = score.to_dict()
            line["timing"] = {"correct": 0.001 * (index + 1), "quality": 0.01 * (12 - index)}
            handle.write(json.dumps(line) + "\n")
    return store, scored, rubric


def test_rubric_judge_cost_and_text_from_the_store(server: OpenAIServer,
                                                   tmp_path: Path) -> None:
    store, scored, rubric = scored_run(server, tmp_path)
    text = build_report(scored, store=store, top=3)
    page = Tables(text)

    assert f"<code>{rubric.id}</code>" in text and "judged-report" in text
    components = page.rows("rubric")
    assert set(components) == {"correct", "helpful"}  # a judge component per criterion
    assert "gsm8k" in components["correct"][0]

    with sqlite3.connect(store) as db:
        calls, tokens_in, tokens_out, cost = db.execute(
            "SELECT count(*), sum(tokens_in), sum(tokens_out), sum(cost) FROM judge_calls"
        ).fetchone()
    assert calls == server.billed == 12
    rows = page.tables["judges"][1]  # the ledger's calls, after the run's own counters
    assert len(rows) == 1
    judge, model, shown_calls, failed, retries, shown_in, shown_out, shown_cost = rows[0][:8]
    assert model == MODEL
    assert (shown_calls, failed, retries) == ("12", "0", "0")
    assert (shown_in, shown_out) == (f"{tokens_in:,}", f"{tokens_out:,}")
    assert shown_cost == f"{cost:.8g}"
    counters = page.rows("judges", 0)
    assert list(counters.values())[0][0] == "12"  # the run's own count of calls

    # the slowest rollouts by the file's timing: r0 (0.121 s), r1, r2; their text is shown
    slowest = page.tables["latency"][1]
    assert [row[0] for row in slowest] == ["r0", "r1", "r2"]
    assert "What is 0 * 2?" in text and "#### 3" in text


def test_a_second_report_of_a_rescored_file_replays_nothing(server: OpenAIServer,
                                                            tmp_path: Path) -> None:
    store, scored, _ = scored_run(server, tmp_path)
    # Scoring the same rollouts again replays every grade: its run made no calls.
    again = ScoreJob(judged_rubric(server.base_url), workers=0, store=str(store))
    again.run_rollouts([Rollout(f"r{i}", f"q{i // 4}", f"What is {i} * 2?",
                                f"#### {2 * i + i % 2}", str(2 * i)) for i in range(12)])
    assert server.billed == 12
    text = build_report(scored, store=store)
    assert "holds no calls made while this run ran" in text


def test_store_without_this_run(server: OpenAIServer, tmp_path: Path) -> None:
    store, scored, _ = scored_run(server, tmp_path)
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "x", "group": "g", "reward": 1.0}) + "\n")
    with pytest.raises(StoreError, match="no run in .* holds the rollouts of"):
        build_report(other, store=store)
    with pytest.raises(StoreError, match="is not in this store"):
        build_report(scored, store=store, run="score-nothing")
    with pytest.raises(StoreError, match="no store at"):
        build_report(scored, store=tmp_path / "missing.db")
