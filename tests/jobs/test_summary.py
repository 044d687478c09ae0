"""The run summary: statistics fed a block at a time match the textbook ones."""

from __future__ import annotations

import math
import random
import statistics

from rewardsmith import Score, Status
from rewardsmith.jobs.summary import SummaryBuilder


def _scores(count: int, seed: int = 3) -> list[Score]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        a = rng.choice([0.0, 1.0, 0.25, rng.uniform(-3, 3)])
        if i % 97 == 0:  # b timed out: the reward is masked
            out.append(Score(str(i), str(i // 8), None, Status.TIMEOUT, {"a": a, "b": None},
                             {"b": "timed out after 1 s"}))
        elif i % 89 == 0:  # b abstained
            out.append(Score(str(i), str(i // 8), None, Status.MASKED, {"a": a, "b": None}))
        elif i % 83 == 0:  # a raised
            out.append(Score(str(i), str(i // 8), None, Status.ERROR, {"a": None, "b": 1.0},
                             {"a": "ValueError: no"}))
        else:
            b = 1e9 + rng.random()  # large offset: a naive sum of squares would lose it
            out.append(Score(str(i), str(i // 8), a + b, Status.OK, {"a": a, "b": b}))
    return out


def test_statistics_over_many_blocks_match_the_textbook() -> None:
    scores = _scores(30_001)  # several blocks and a partial one
    builder = SummaryBuilder(["a", "b"], rubric_name="r", rubric_id="x")
    for start in range(0, len(scores), 8):
        builder.add_group(scores[start : start + 8])
    summary = builder.build()
    assert summary.rollouts == 30_001 and summary.groups == math.ceil(30_001 / 8)
    expected_statuses = {s.value: sum(1 for x in scores if x.status is s) for s in Status}
    assert summary.statuses == expected_statuses
    by_name = {c.name: c for c in summary.components}
    for name in ("a", "b"):
        values = [s.components[name] for s in scores if s.components[name] is not None]
        stats = by_name[name]
        assert stats.count == len(values)
        assert math.isclose(stats.mean or 0, statistics.fmean(values), rel_tol=1e-12)
        assert math.isclose(stats.std or 0, statistics.pstdev(values), rel_tol=1e-7)
        assert (stats.minimum, stats.maximum) == (min(values), max(values))
    assert by_name["b"].timeouts == sum(1 for s in scores if s.status is Status.TIMEOUT)
    assert by_name["b"].masked == sum(1 for s in scores if s.status is Status.MASKED)
    assert by_name["a"].errors == sum(1 for s in scores if s.status is Status.ERROR)
    rewards = [s.reward for s in scores if s.reward is not None]
    assert math.isclose(summary.reward.std or 0, statistics.pstdev(rewards), rel_tol=1e-7)


def test_groups_with_one_reward_value_are_counted() -> None:
    builder = SummaryBuilder(["a"])
    builder.add_group([Score(str(i), "g", 1.0, Status.OK, {"a": 1.0}) for i in range(4)])
    builder.add_group([Score(str(i), "h", float(i), Status.OK, {"a": float(i)}) for i in range(4)])
    builder.add_group([Score("x", "k", None, Status.MASKED, {"a": None})])
    summary = builder.build()
    assert (summary.zero_variance_groups, summary.mixed_groups) == (1, 1)
    assert summary.components[0].count == 8 and summary.components[0].masked == 1
    empty = SummaryBuilder(["a"]).build()
    assert empty.components[0].mean is None and empty.reward.count == 0
