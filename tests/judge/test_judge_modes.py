"""Group and pairwise judging, samples, logprob-weighted grades and refresh, against the local
OpenAI-compatible server; every call count is exact."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import ConfigError, Engine, Rollout, Rubric, Score, Status
from rewardsmith.judge import Judge, JudgeConfig
from rewardsmith.judge.ranking import (
    align_chunks,
    combine_samples,
    pair_scores,
    plan_chunks,
    plan_pairs,
    position_flip,
)
from support.openai_server import OpenAIServer, default_grade, unfenced

MODEL = "judge-2024-01-01"
TEMPLATE = "Question: {prompt}\nAnswer: {completion}"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(models=[MODEL]) as running:
        yield running


def judge_config(server: OpenAIServer, store: Path, **extra: Any) -> dict[str, Any]:
    return {"base_url": server.base_url, "model": MODEL, "store": str(store),
            "template": TEMPLATE, "criteria": {"helpful": "Does it help?",
                                               "tidy": "Is it concise?"}, **extra}


def rubric(server: OpenAIServer, store: Path, **extra: Any) -> Rubric:
    return Rubric.from_dict({"components": {"quality": {"judge": judge_config(server, store,
                                                                               **extra)}}})


def rollouts(groups: int, size: int, *, tag: str = "") -> list[Rollout]:
    return [Rollout(f"r{g}-{i}", f"g{g}", f"What is {g} + {i}?", f"It is {g + i}{tag}.")
            for g in range(groups) for i in range(size)]


def shown(rollout: Rollout) -> str:
    return TEMPLATE.format(prompt=rollout.prompt, completion=rollout.completion)


def run(rubric: Rubric, items: list[Rollout]) -> tuple[list[Score], dict[str, float]]:
    with Engine(rubric, workers=0) as engine:
        engine.check()
        return engine.score(items), engine.usage()["judge:quality"]


def pair_of(body: dict[str, Any]) -> tuple[str, str]:
    text = unfenced(body["messages"][-1]["content"])
    first = text.split("### Response A\n", 1)[1].split("\n\n### Response B\n", 1)[0]
    second = text.split("### Response B\n", 1)[1].split("\n\nEach graded response is", 1)[0]
    return first.strip(), second.strip()


# ---------------------------------------------------------------- group mode


def test_group_mode_one_call_per_group_then_replayed(server: OpenAIServer,
                                                     tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    items = rollouts(3, 4)
    scores, usage = run(rubric(server, store, mode="group"), items)
    assert server.billed == 3 and usage["calls"] == 3
    assert all(s.status is Status.OK for s in scores)
    for item, result in zip(items, scores, strict=True):
        assert result.components == {c: default_grade(c, shown(item))
                                     for c in ("helpful", "tidy")}
    schema = server.bodies[0]["response_format"]["json_schema"]["schema"]
    assert sorted(schema["properties"]) == ["1", "2", "3", "4"]

    # A rerun (and new weights) pay nothing; one changed rollout re-asks its group only.
    _, usage = run(rubric(server, store, mode="group"), items)
    assert server.billed == 3 and usage["calls"] == 0 and usage["replayed"] == 24
    changed = list(items)
    changed[5] = Rollout("r1-1", "g1", changed[5].prompt, "Something else entirely.")
    _, usage = run(rubric(server, store, mode="group"), changed)
    assert server.billed == 4 and usage["calls"] == 1 and usage["replayed"] == 16


def test_group_mode_keys_differ_from_pointwise(server: OpenAIServer, tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    run(rubric(server, store), rollouts(1, 3))
    assert server.billed == 3
    _, usage = run(rubric(server, store, mode="group"), rollouts(1, 3))
    assert server.billed == 4 and usage["calls"] == 1


def test_large_groups_are_chunked_around_an_anchor(server: OpenAIServer,
                                                   tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    items = rollouts(1, 10)
    scores, usage = run(rubric(server, store, mode="group", group_chunk=4), items)
    # chunks [0 1 2 3], [0 4 5 6], [0 7 8 9]: three calls, each holding the anchor r0-0
    assert server.billed == 3 and usage["calls"] == 3
    anchor = shown(items[0])
    assert all(anchor in unfenced(body["messages"][-1]["content"]) for body in server.bodies)
    for item, result in zip(items, scores, strict=True):
        assert result.components["helpful"] == pytest.approx(default_grade("helpful",
                                                                           shown(item)))


def test_chunk_plan_and_alignment_on_the_anchor() -> None:
    assert plan_chunks(4, 8) == [[0, 1, 2, 3]]
    assert plan_chunks(10, 4) == [[0, 1, 2, 3], [0, 4, 5, 6], [0, 7, 8, 9]]
    assert plan_chunks(5, 4) == [[0, 1, 2, 3], [0, 4]]
    # The second call graded the anchor 0.2 higher: its other grades come down by 0.2.
    chunks = [[0, 1, 2], [0, 3, 4]]
    aligned = align_chunks(chunks, [[0.5, 0.25, 0.75], [0.7, 0.3, 1.0]], 0.0, 1.0)
    assert aligned == pytest.approx([0.5, 0.25, 0.75, 0.1, 0.8])
    # Clipped to the range; a chunk whose anchor has no grade gives none.
    assert align_chunks(chunks, [[0.1, 0.2, 0.3], [0.5, 0.0, 0.9]], 0.0, 1.0)[3:] == [0.0, 0.5]
    assert align_chunks(chunks, [[0.1, 0.2, 0.3], [None, 0.0, 0.9]], 0.0, 1.0)[3:] == [None,
                                                                                         None]


def test_pair_plans_and_scores() -> None:
    assert len(plan_pairs(8, 8, 4)) == 28
    design = plan_pairs(16, 8, 4)
    assert len(design) == 32
    assert all(sum(i in pair for pair in design) == 4 for i in range(16))
    assert plan_pairs(1, 8, 4) == []
    # a beats b beats c: win rates and Bradley-Terry agree on the order.
    wins = {(0, 1): 1.0, (1, 2): 1.0, (0, 2): 1.0}
    assert pair_scores(3, wins, "win_rate") == [1.0, 0.5, 0.0]
    strengths = pair_scores(3, wins, "bradley_terry")
    assert strengths[0] > strengths[1] > strengths[2]  # type: ignore[operator]
    assert strengths[1] == pytest.approx(0.5)
    assert position_flip(1.0, 1.0) == 1.0 and position_flip(1.0, 0.0) == 0.0


def test_samples_combine_by_mean_or_majority() -> None:
    assert combine_samples([0.2, 0.4, 0.6], binary=False) == (pytest.approx(0.4),
                                                              pytest.approx(0.163299, abs=1e-6))
    assert combine_samples([1.0, 0.0, 1.0], binary=True)[0] == 1.0
    assert combine_samples([1.0, 0.0], binary=True)[0] == 0.0  # a tie fails


# ---------------------------------------------------------------- pairwise mode


def test_pairwise_asks_every_pair_in_both_orders(server: OpenAIServer, tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    items = rollouts(1, 4)
    scores, usage = run(rubric(server, store, mode="pairwise"), items)
    assert server.billed == 12 and usage["calls"] == 12  # 6 pairs x 2 orders
    asked = [pair_of(body) for body in server.bodies]
    texts = [shown(item) for item in items]
    expected = {(a, b) for a in texts for b in texts if a != b}
    assert set(asked) == expected and len(asked) == 12
    # Win rate: the share of a rollout's comparisons it wins (ties count half).
    for i, result in enumerate(scores):
        grade = default_grade("helpful", texts[i])
        others = [default_grade("helpful", t) for j, t in enumerate(texts) if j != i]
        wins = sum(1.0 if grade > o else 0.5 if grade == o else 0.0 for o in others)
        assert result.components["helpful"] == pytest.approx(wins / 3)
        assert result.metrics["helpful.position_bias"] == 0.0

    _, usage = run(rubric(server, store, mode="pairwise"), items)
    assert server.billed == 12 and usage["calls"] == 0


def test_pairwise_bounds_pairs_for_large_groups(server: OpenAIServer, tmp_path: Path) -> None:
    _, usage = run(rubric(server, tmp_path / "j.db", mode="pairwise"), rollouts(1, 16))
    # 16 rollouts, 4 opponents each: 32 pairs, both orders
    assert server.billed == 64 and usage["calls"] == 64


def test_position_bias_is_measured(tmp_path: Path) -> None:
    with OpenAIServer(models=[MODEL], bias_first=True) as server:
        scores, _ = run(rubric(server, tmp_path / "j.db", mode="pairwise",
                               pair_scoring="bradley_terry"), rollouts(1, 3))
    for result in scores:
        assert result.metrics["helpful.position_bias"] == 1.0
        assert result.components["helpful"] == pytest.approx(0.5)  # every pair a draw


def test_bradley_terry_orders_like_the_grades(server: OpenAIServer, tmp_path: Path) -> None:
    items = rollouts(1, 6)
    scores, _ = run(rubric(server, tmp_path / "j.db", mode="pairwise",
                           pair_scoring="bradley_terry"), items)
    grades = [default_grade("tidy", shown(i)) for i in items]
    values = [s.components["tidy"] for s in scores]
    for a in range(6):
        for b in range(6):
            if grades[a] > grades[b]:
                assert values[a] > values[b]
    assert all(v is not None and 0 < v < 1 for v in values)


# ---------------------------------------------------------------- samples and logprobs


def test_samples_ask_n_times_and_keep_the_spread(server: OpenAIServer, tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    items = rollouts(1, 3)
    scores, usage = run(rubric(server, store, samples=3, temperature=0.7, seed=11), items)
    assert server.billed == 9 and usage["calls"] == 9
    assert sorted(b["seed"] for b in server.bodies) == [11] * 3 + [12] * 3 + [13] * 3
    for item, result in zip(items, scores, strict=True):
        assert result.components["helpful"] == pytest.approx(default_grade("helpful",
                                                                           shown(item)))
        assert result.metrics["helpful.spread"] == 0.0
    _, usage = run(rubric(server, store, samples=3, temperature=0.7, seed=11), items)
    assert usage["calls"] == 0 and server.billed == 9


def test_samples_at_temperature_zero_are_refused(server: OpenAIServer, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="samples: 3 needs temperature > 0"):
        rubric(server, tmp_path / "j.db", samples=3)


def test_logprobs_weight_the_score_tokens(tmp_path: Path) -> None:
    def grade(criterion: str, text: str) -> float:
        # An integer (JSON "4", one token) from the graded answer alone.
        return int(text.split("It is ", 1)[1].split(".", 1)[0]) * 3 + 1

    with OpenAIServer(models=[MODEL], grade=grade) as server:
        config = judge_config(server, tmp_path / "j.db", logprobs=True, top_logprobs=5,
                              criteria={"helpful": {"description": "Help?", "range": [0, 10]}})
        items = rollouts(1, 3)
        scores, _ = run(Rubric.from_dict({"components": {"quality": {"judge": config}}}), items)
        assert server.bodies[0]["logprobs"] is True and server.bodies[0]["top_logprobs"] == 5
    for item, result in zip(items, scores, strict=True):
        prompt = shown(item)
        value = grade("helpful", prompt)
        weights = [(value, 0.6), (value + 1, 0.3), (value - 1, 0.1)]
        kept = [(v, p) for v, p in weights if 0 <= v <= 10]
        expected = sum(v * p for v, p in kept) / sum(p for _, p in kept)
        assert result.components["helpful"] == pytest.approx(expected)
        assert not math.isclose(expected, value)


# ---------------------------------------------------------------- refresh


def test_refresh_asks_again_and_keeps_the_old_grades(server: OpenAIServer,
                                                     tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    items = rollouts(1, 3)
    run(rubric(server, store), items)
    judged = rubric(server, store)
    judge = judged.components[0].evaluator.judge  # type: ignore[union-attr]
    assert isinstance(judge, Judge)
    judge.refresh()
    _, usage = run(judged, items)
    assert server.billed == 6 and usage["calls"] == 3
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM judge_history").fetchone() == (6,)
    # A rerun of the same refresh (same cut-off) replays what it already asked.
    again = rubric(server, store)
    again.components[0].evaluator.judge.refresh(judge.refresh_before)  # type: ignore[union-attr]
    _, usage = run(again, items)
    assert server.billed == 6 and usage["calls"] == 0


def test_mode_options_are_checked(server: OpenAIServer, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="pointwise only"):
        JudgeConfig.parse(judge_config(server, tmp_path / "j.db", mode="group", logprobs=True))
    with pytest.raises(ConfigError, match="must be even"):
        JudgeConfig.parse(judge_config(server, tmp_path / "j.db", pairs_per_rollout=3))
    with pytest.raises(ConfigError, match="binary"):
        JudgeConfig.parse(judge_config(server, tmp_path / "j.db", mode="pairwise", criteria={
            "ok": {"description": "Right?", "binary": True}}))
    with pytest.raises(ConfigError, match="mode"):
        JudgeConfig.parse(judge_config(server, tmp_path / "j.db", mode="listwise"))


def test_group_reply_missing_a_response_is_an_error_for_it_alone(tmp_path: Path) -> None:
    with OpenAIServer(models=[MODEL]) as server:
        from support.openai_server import Fault

        server.inject(Fault.reply("malformed"))
        scores, usage = run(rubric(server, tmp_path / "j.db", mode="group"), rollouts(1, 3))
    assert usage["failed"] == 1
    assert all(s.status is not Status.OK for s in scores)
    assert "judge reply" in json.dumps([s.errors for s in scores])


def test_a_lone_rollout_cannot_be_judged_pairwise(server: OpenAIServer, tmp_path: Path) -> None:
    scores, usage = run(rubric(server, tmp_path / "j.db", mode="pairwise"), rollouts(1, 1))
    assert usage["calls"] == 0 and scores[0].status is not Status.OK
    assert "at least two rollouts" in scores[0].errors["helpful"]
