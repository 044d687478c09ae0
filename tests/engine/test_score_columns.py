"""Scores as columns (``Engine.score_columns``): the same results as ``Engine.score``, in input
order, whatever mix of plain batches and batches with failures, metrics or gates."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rewardsmith import Component, Engine, Rollout, Rubric, Score, ScoreColumns, Status

FIXTURES = Path(__file__).parent.parent / "fixtures" / "user_rewards.py"


def spec(name: str) -> str:
    return f"{FIXTURES}:{name}"


def length_share(completion: str) -> float:
    return len(completion) / 10.0


def fails_on_x(completion: str) -> float:
    if "x" in completion:
        raise ValueError("no x allowed")
    return 0.25


def with_metric(completion: str) -> dict[str, float]:
    return {"reward": 0.5, "words": float(len(completion.split()))}


def make(count: int, group_size: int = 4, seed: int = 3, bad_every: int = 0) -> list[Rollout]:
    rng = random.Random(seed)
    out = []
    for index in range(count):
        text = "".join(rng.choice("ab #") for _ in range(rng.randint(0, 12)))
        if bad_every and index % bad_every == 0:
            text += "x"
        out.append(Rollout(f"r{index}", f"g{index // group_size}", "p", text, "1"))
    return out


def same(columns: ScoreColumns, scores: list[Score]) -> None:
    """Every column agrees with the ``Score`` objects, and ``scores()`` gives equal objects."""
    assert len(columns) == len(scores)
    assert columns.rewards == [s.reward for s in scores]
    assert columns.ids == [s.id for s in scores]
    assert columns.groups == [s.group for s in scores]
    assert columns.statuses == [s.status for s in scores]
    for name in columns.names:
        assert columns.components[name] == [s.components.get(name) for s in scores]
    assert [s.to_dict() for s in columns.scores()] == [s.to_dict() for s in scores]


@pytest.mark.parametrize("names", [["a"], ["a", "b"], ["a", "b", "c"]])
def test_plain_rewards_match_scores_to_the_last_bit(names: list[str]) -> None:
    # Weights with no exact binary form: a different order of additions would show.
    weights = [0.1, 0.7, 0.3][: len(names)]
    funcs = [length_share, "marker", length_share]
    rubric = Rubric([Component(n, f, weight=w) for n, f, w in zip(names, funcs, weights)])
    items = make(300)
    with Engine(rubric, workers=0, batch_rollouts=64) as engine:
        columns = engine.score_columns(items)
        scores = engine.score(items)
    same(columns, scores)
    assert all(s.status is Status.OK for s in scores)


def test_batches_with_failures_and_plain_batches_mixed() -> None:
    rubric = Rubric([Component("ok", length_share, weight=0.5),
                     Component("picky", fails_on_x, weight=2.0)], on_error="mask")
    # A failure in every 150th rollout: some batches of 64 hold one, most none.
    items = make(400, bad_every=150)
    with Engine(rubric, workers=0, batch_rollouts=64) as engine:
        columns = engine.score_columns(items)
        scores = engine.score(items)
    same(columns, scores)
    failed = [i for i, s in enumerate(scores) if s.status is Status.ERROR]
    assert failed == [0, 150, 300]
    assert columns.rewards[150] is None and columns.components["picky"][150] is None
    assert columns.components["ok"][150] == scores[150].components["ok"]
    assert "no x allowed" in columns.scores()[150].errors["picky"]


def test_metrics_and_gates_go_through_scores() -> None:
    rubric = Rubric([Component("m", with_metric), Component("fmt", "marker", weight=0.2,
                                                             requires="m")])
    items = make(50)
    with Engine(rubric, workers=0) as engine:
        columns = engine.score_columns(items)
        scores = engine.score(items)
    same(columns, scores)
    assert columns.scores()[0].metrics == scores[0].metrics != {}


def test_groups_out_of_order_come_back_in_input_order() -> None:
    rubric = Rubric([Component("rank", spec("rank_in_group"), group=True),
                     Component("len", length_share, weight=0.5)])
    items = make(64, group_size=4)
    random.Random(5).shuffle(items)  # each group's rollouts scattered over the input
    with Engine(rubric, workers=1, batch_rollouts=16) as engine:
        columns = engine.score_columns(items)
        scores = engine.score(items)
    assert columns.ids == [r.id for r in items]
    same(columns, scores)


def test_out_of_order_with_a_failure_keeps_the_failure_in_place() -> None:
    rubric = Rubric([Component("rank", spec("rank_in_group"), group=True),
                     Component("picky", fails_on_x)], on_error="mask")
    items = make(48, group_size=4, bad_every=20)
    random.Random(9).shuffle(items)
    with Engine(rubric, workers=0, batch_rollouts=8) as engine:
        columns = engine.score_columns(items)
        scores = engine.score(items)
    same(columns, scores)
    bad = [r.id for r in items if "x" in str(r.completion)]
    assert bad and [i for i, s in zip(columns.ids, columns.statuses)
                    if s is Status.ERROR] == bad


def test_in_workers_the_same_as_in_process() -> None:
    rubric = Rubric([Component("exact", spec("exact_len")), Component("fmt", "marker",
                                                                    weight=0.3)])
    items = make(200)
    with Engine(rubric, workers=0) as inline, Engine(rubric, workers=2) as pooled:
        here = inline.score_columns(items)
        there = pooled.score_columns(items)
    assert there.rewards == here.rewards
    assert there.components == here.components
    same(there, here.scores())


def test_empty_input() -> None:
    with Engine(Rubric([Component("fmt", "marker")]), workers=0) as engine:
        columns = engine.score_columns([])
    assert len(columns) == 0 and columns.rewards == [] and columns.scores() == []
    assert columns.components == {"fmt": []}


def test_columns_are_built_once_and_scores_reused() -> None:
    with Engine(Rubric([Component("fmt", "marker")]), workers=0) as engine:
        columns = engine.score_columns(make(20))
    assert columns.rewards is columns.rewards
    assert columns.scores() is columns.scores()
    assert "20 rollouts" in repr(columns)


def test_wrong_shapes_are_refused() -> None:
    items = make(3)
    with pytest.raises(ValueError, match="one value per rollout"):
        ScoreColumns.of_weighted_sums(["a"], [1.0], items, [[1.0, 2.0]])
    with pytest.raises(ValueError, match="one weight per name"):
        ScoreColumns.of_weighted_sums(["a", "b"], [1.0], items, [[1.0] * 3, [1.0] * 3])
    with pytest.raises(ValueError, match="at least one"):  # no column: no reward to sum
        ScoreColumns.of_weighted_sums([], [], items, [])
    with pytest.raises(ValueError, match="2 scores for 3 rollouts"):
        ScoreColumns.of_scores(["a"], items, [Score("r0", "g0", 1.0)] * 2)
