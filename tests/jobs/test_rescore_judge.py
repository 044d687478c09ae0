"""Rescoring with a judge, against a real OpenAI-compatible server on 127.0.0.1: new weights
ask nothing (the endpoint is not even contacted); a changed criterion asks only for itself."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import Rollout, Rubric, ScoreJob
from rewardsmith.jobs.rescore import rescore
from support.openai_server import OpenAIServer

MODEL = "judge-2024-01-01"
SECRET = "sk-rescore-test-51c0"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    monkeypatch.setenv("RESCORE_JUDGE_KEY", SECRET)
    with OpenAIServer(models=[MODEL], api_key=SECRET) as running:
        yield running


def rubric(base_url: str, *, tidy: str = "Is it concise?", tidy_weight: float = 0.5,
           name: str = "judged") -> Rubric:
    config: dict[str, Any] = {
        "name": name,
        "components": {
            "correct": {"reward": "gsm8k", "weight": 1.0},
            "quality": {
                "judge": {
                    "base_url": base_url, "model": MODEL, "api_key_env": "RESCORE_JUDGE_KEY",
                    "template": "Question: {prompt}\nAnswer: {completion}",
                    "criteria": {"helpful": "Does the answer help the user?", "tidy": tidy},
                    "max_concurrency": 4,
                },
                "weights": {"helpful": 1.0, "tidy": tidy_weight},
            },
        },
    }
    return Rubric.from_dict(config)


def test_only_the_changed_criterion_is_asked(server: OpenAIServer, tmp_path: Path) -> None:
    db = tmp_path / "run.db"
    rollouts = [Rollout(f"r{i}", f"q{i // 5}", f"What is {i} * 2?", f"#### {2 * i}", str(2 * i))
                for i in range(10)]
    first = ScoreJob(rubric(server.base_url), workers=0, store=str(db)).run_rollouts(rollouts)
    assert server.billed == 10 and all(s.components["tidy"] is not None for s in first.scores)
    requests = server.requests

    reweighted = rescore(db, rubric(server.base_url, tidy_weight=2.0, name="v2"), workers=0)
    assert reweighted.reward_calls == 0
    assert server.billed == 10 and server.requests == requests  # not even contacted
    assert [s.components for s in reweighted.scores] == [s.components for s in first.scores]

    changed = rubric(server.base_url, tidy="Is it short and tidy?")
    plan = rescore(db, changed, dry_run=True).plan
    assert [(c.name, c.kind, c.reused, c.compute, c.judge_calls) for c in plan.components] == [
        ("correct", "reward", 10, 0, 0), ("helpful", "judge", 10, 0, 0),
        ("tidy", "judge", 0, 10, 10)]
    assert plan.judge_calls == 10 and server.billed == 10  # the dry run spent nothing

    result = rescore(db, changed, workers=0)
    assert server.billed == 20 and server.asked[10:] == [["tidy"]] * 10
    assert [u["calls"] for u in result.usage.values()] == [10]
    assert [s.components["helpful"] for s in result.scores] == [
        s.components["helpful"] for s in first.scores]
    assert rescore(db, changed, workers=0).reward_calls == 0 and server.billed == 20
