"""A judge behind a closed gate is not asked: ``requires: correct`` saves the calls for the
rollouts that failed the gate, in score, rescore and the trainer adapters (against a real
OpenAI-compatible server on 127.0.0.1 that counts what it is asked)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rewardsmith import Rollout, Rubric, ScoreJob, Status
from rewardsmith.integrations import close_engines
from rewardsmith.integrations.trl import trl_reward_funcs
from rewardsmith.jobs.rescore import rescore
from support.openai_server import OpenAIServer

MODEL = "judge-2024-01-01"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(models=[MODEL]) as running:
        yield running


def config(base_url: str, store: Path, *, tidy: str = "Is it concise?",
           gate: str | None = "correct", weight: float = 0.5) -> dict[str, Any]:
    quality: dict[str, Any] = {
        "judge": {"base_url": base_url, "model": MODEL, "store": str(store),
                  "template": "Question: {prompt}\nAnswer: {completion}",
                  "criteria": {"helpful": "Does it help?", "tidy": tidy}},
        "weight": weight}
    if gate is not None:
        quality["requires"] = gate
    return {"name": "gated", "components": {"correct": {"reward": "gsm8k"}, "quality": quality}}


def items() -> list[Rollout]:
    # Even rollouts are right, odd ones wrong: half the gates open.
    return [Rollout(f"r{i}", f"g{i // 4}", f"What is {i} + {i}?",
                    f"#### {2 * i if i % 2 == 0 else 2 * i + 1}", str(2 * i)) for i in range(8)]


def test_score_asks_only_where_the_gate_opened(server: OpenAIServer, tmp_path: Path) -> None:
    rubric = Rubric.from_dict(config(server.base_url, tmp_path / "j.db"))
    result = ScoreJob(rubric, workers=0, store=str(tmp_path / "run.db")).run_rollouts(items())
    assert server.billed == 4 and server.requests == 4
    for index, score in enumerate(result.scores):
        assert score.status is Status.OK
        if index % 2:
            assert score.components == {"correct": 0.0, "helpful": None, "tidy": None}
            assert score.metrics == {"helpful.skipped": 1.0, "tidy.skipped": 1.0}
            assert score.reward == 0.0
        else:
            helpful, tidy = score.components["helpful"], score.components["tidy"]
            assert helpful is not None and tidy is not None and not score.metrics
            assert score.reward == pytest.approx(1.0 + 0.5 * (helpful + tidy))
    ungated = Rubric.from_dict(config(server.base_url, tmp_path / "j.db", gate=None))
    ScoreJob(ungated, workers=0, store=str(tmp_path / "run2.db")).run_rollouts(items())
    assert server.billed == 8  # without the gate every rollout is judged: 4 replayed, 4 new


def test_rescore_keeps_the_gate_closed_and_asks_nothing_more(server: OpenAIServer,
                                                             tmp_path: Path) -> None:
    judge_db, run_db = tmp_path / "j.db", tmp_path / "run.db"
    rubric = Rubric.from_dict(config(server.base_url, judge_db))
    first = ScoreJob(rubric, workers=0, store=str(run_db)).run_rollouts(items())
    assert server.billed == 4
    reweighted = rescore(run_db, Rubric.from_dict(config(server.base_url, judge_db, weight=2.0)),
                         workers=0)
    assert server.requests == 4  # nothing asked: the skipped cells stay skipped
    assert [s.components for s in reweighted.scores] == [s.components for s in first.scores]
    changed = Rubric.from_dict(config(server.base_url, judge_db, tidy="Is it short?"))
    again = rescore(run_db, changed, workers=0)
    assert server.billed == 8 and server.asked[4:] == [["tidy"]] * 4  # the open gates only
    assert [s.metrics.get("tidy.skipped") for s in again.scores] == [None, 1.0] * 4


def test_the_trl_adapter_skips_the_judge_behind_a_closed_gate(
        server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARDSMITH_WORKERS", "0")
    path = tmp_path / "rubric.yaml"
    path.write_text(yaml.safe_dump(config(server.base_url, tmp_path / "j.db")))
    try:
        funcs = trl_reward_funcs(str(path))
        rows = items()
        kwargs = {"prompts": [r.prompt for r in rows], "answer": [r.answer for r in rows],
                  "completions": [r.completion for r in rows]}
        per_func = [func(**kwargs) for func in funcs]
    finally:
        close_engines()
    assert server.billed == 4
    helpful = per_func[funcs.names.index("helpful")]
    assert [value == 0.0 for value in helpful[1::2]] == [True] * 4  # closed: counts 0
    assert all(value is not None for value in helpful)


def test_a_pairwise_judge_behind_a_gate_still_compares_the_whole_group(
        server: OpenAIServer, tmp_path: Path) -> None:
    settings = config(server.base_url, tmp_path / "j.db")
    settings["components"]["quality"]["judge"]["mode"] = "pairwise"
    rubric = Rubric.from_dict(settings)
    rows = items()[:4]  # one group, two gates open: a lone passer would have no opponent
    result = ScoreJob(rubric, workers=0, store=str(tmp_path / "run.db")).run_rollouts(rows)
    assert server.billed == 12  # 6 pairs in both orders, as without the gate
    assert all(s.status is Status.OK for s in result.scores)
    assert [s.reward == 0.0 for s in result.scores] == [False, True, False, True]


def test_a_reward_model_behind_a_closed_gate_scores_only_what_passed(
        server: OpenAIServer, tmp_path: Path) -> None:
    rubric = Rubric.from_dict({"name": "gated-rm", "components": {
        "correct": {"reward": "gsm8k"},
        "rm": {"reward_model": {"base_url": f"http://127.0.0.1:{server.port}", "api": "openrlhf",
                                "store": str(tmp_path / "rm.db")}, "requires": "correct"}}})
    result = ScoreJob(rubric, workers=0, store=str(tmp_path / "run.db")).run_rollouts(items())
    assert server.reward_batches == [2, 2]  # two groups of 4, two gates open in each
    assert [s.metrics.get("rm.skipped") for s in result.scores] == [None, 1.0] * 4
