"""The statistics every tracker logs for a scoring step: one pure function, checked by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rewardsmith.errors import ConfigError, InputError
from rewardsmith.tracking import StepStats, file_stats, key_part, score_stats, usage_metrics
from rewardsmith.tracking.base import TrackerBase
from rewardsmith.types import Score, Status


def line(id_: str, group: str, reward: float | None, status: str = "ok",
         **components: float | None) -> dict[str, object]:
    return {"id": id_, "group": group, "reward": reward, "status": status,
            "components": components, "errors": {}, "advantage": None}


# Group a: rewards 1, 0 (mixed). Group b: 0.5, 0.5 (zero variance). Group c: one masked and one
# errored rollout, so no reward at all: neither mixed nor zero variance.
LINES = [
    line("1", "a", 1.0, correct=1.0, fmt=0.0),
    line("2", "a", 0.0, correct=0.0, fmt=0.0),
    line("3", "b", 0.5, correct=0.5, fmt=1.0),
    line("4", "b", 0.5, correct=0.5, fmt=None),
    line("5", "c", None, "masked", correct=None, fmt=1.0),
    line("6", "c", None, "error", correct=None, fmt=None),
]


def test_statistics_of_a_step_by_hand() -> None:
    metrics = score_stats(LINES)
    assert metrics["rollouts"] == 6
    assert metrics["reward/count"] == 4
    assert metrics["reward/mean"] == pytest.approx(0.5)
    assert metrics["reward/std"] == pytest.approx(math.sqrt(0.125))  # population std
    assert (metrics["reward/min"], metrics["reward/max"]) == (0.0, 1.0)
    assert metrics["components/correct/count"] == 4
    assert metrics["components/correct/mean"] == pytest.approx(0.5)
    # A missing value is not a zero: fmt has 0, 0, 1, 1 -> mean 0.5 over four values.
    assert metrics["components/fmt/count"] == 4
    assert metrics["components/fmt/mean"] == pytest.approx(0.5)
    assert metrics["components/fmt/std"] == pytest.approx(0.5)
    assert {k: metrics[f"status/{k}"] for k in ("ok", "error", "timeout", "masked")} == {
        "ok": 4, "error": 1, "timeout": 0, "masked": 1}
    assert metrics["groups/count"] == 3
    assert metrics["groups/zero_variance"] == 1
    assert metrics["groups/mixed"] == 1
    assert metrics["groups/zero_variance_fraction"] == pytest.approx(0.5)
    # No timing and no usage: no latency or cost keys, and nothing that is not finite.
    assert not any(k.startswith(("latency/", "cost/", "judge/")) for k in metrics)
    assert all(math.isfinite(v) for v in metrics.values())


def test_scores_and_scored_lines_give_the_same_numbers() -> None:
    scores = [Score.from_dict(item) for item in LINES]
    assert score_stats(scores) == score_stats(LINES)
    assert scores[4].status is Status.MASKED


def test_a_group_split_over_batches_counts_once() -> None:
    whole = score_stats(LINES)
    stats = StepStats()
    for item in LINES:  # one rollout at a time, as a streaming job may hand them over
        stats.add([item])
    assert stats.metrics() == whole


def test_an_empty_step_has_counts_and_no_invented_means() -> None:
    metrics = score_stats([])
    assert metrics["rollouts"] == 0 and metrics["reward/count"] == 0
    assert "reward/mean" not in metrics and "groups/zero_variance_fraction" not in metrics
    only_masked = score_stats([line("1", "g", None, "masked", x=None)])
    assert only_masked["components/x/count"] == 0 and "components/x/mean" not in only_masked


def test_latency_from_per_rollout_timing() -> None:
    rng = np.random.default_rng(7)
    seconds = rng.exponential(0.2, size=200)
    rows = []
    for index, value in enumerate(seconds):
        row = line(str(index), f"g{index // 4}", 1.0, correct=1.0)
        # The judge was timed on every other rollout only; a null timing is "not timed".
        row["timing"] = {"correct": float(value),
                         "llm judge": float(value * 10) if index % 2 == 0 else None}
        rows.append(row)
    metrics = score_stats(rows)
    assert metrics["latency/correct/mean"] == pytest.approx(seconds.mean())
    assert metrics["latency/correct/p50"] == pytest.approx(np.percentile(seconds, 50))
    assert metrics["latency/correct/p99"] == pytest.approx(np.percentile(seconds, 99))
    assert metrics["latency/correct/max"] == pytest.approx(seconds.max())
    judged = seconds[::2] * 10
    assert metrics["latency/llm_judge/p99"] == pytest.approx(np.percentile(judged, 99))


def test_judge_usage_becomes_cost_keys() -> None:
    usage = {"judge:grader": {"calls": 12.0, "tokens_in": 3000.0, "tokens_out": 400.0,
                              "cost": 0.25},
             "reward_model:rm/v2": {"calls": 3.0, "cost": 0.5}}
    metrics = score_stats(LINES, usage)
    assert metrics["judge/grader/calls"] == 12
    assert metrics["judge/grader/cost"] == 0.25
    assert metrics["reward_model/rm_v2/cost"] == 0.5  # the "/" in the name adds no level
    assert metrics["cost/total"] == pytest.approx(0.75)
    assert usage_metrics(None) == {}


def test_key_parts_are_safe_for_every_tracker() -> None:
    assert key_part("correct") == "correct"
    assert key_part("format v2/strict:yes") == "format_v2_strict_yes"
    assert key_part("a.b-c_d") == "a.b-c_d"
    assert key_part("") == "_"


@pytest.mark.parametrize(("bad", "message"), [
    ({"id": "x", "group": "g", "reward": "high"}, "'reward' must be a number"),
    ({"id": "x", "group": "g", "reward": float("nan")}, "not a finite number"),
    ({"id": "x", "group": "g", "status": "great"}, "status 'great' is not one of"),
    ({"id": "x", "reward": 1.0}, "missing 'group'"),
    ({"id": "x", "group": "g", "components": [1, 2]}, "'components' must be an object"),
    ({"id": "x", "group": "g", "components": {"c": True}}, "component 'c' must be a number"),
    ({"id": "x", "group": "g", "timing": {"c": -1.0}}, "timing of 'c' is -1.0, below zero"),
    ({"id": "x", "group": "g", "timing": 3}, "'timing' must be an object"),
    ("not a line", "expected a Score or a scored line"),
])
def test_bad_results_are_named(bad: object, message: str) -> None:
    with pytest.raises(InputError, match=message) as caught:
        score_stats([LINES[0], bad])  # type: ignore[list-item]
    assert "result 1" in str(caught.value)


def test_scored_files_name_the_bad_line(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps(item) + "\n" for item in LINES))
    assert file_stats(good) == score_stats(LINES)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(LINES[0]) + "\n\n" + json.dumps({"id": "z", "reward": 1}) + "\n")
    with pytest.raises(InputError, match=r"bad.jsonl: line 3: .*missing 'group'"):
        file_stats(bad)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(InputError, match="no scored rollouts"):
        file_stats(empty)
    with pytest.raises(InputError, match="cannot open"):
        file_stats(tmp_path / "missing.jsonl")


def test_parquet_scored_files(tmp_path: Path) -> None:
    from rewardsmith.files.parquet import write_scores_parquet

    path = tmp_path / "scored.parquet"
    write_scores_parquet(path, [Score.from_dict(item) for item in LINES])
    assert file_stats(path) == score_stats(LINES)


class _Kept(TrackerBase):
    """A tracker that keeps what it is given: the step rules are TrackerBase's own."""

    name = "kept"

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[int, dict[str, float]]] = []
        self.finished = 0

    def _write(self, metrics: dict[str, float], step: int) -> None:
        self.rows.append((step, metrics))

    def _finish(self) -> None:
        self.finished += 1


def test_steps_count_up_repeat_but_never_go_back() -> None:
    with _Kept() as tracker:
        assert tracker.log_metrics({"a": 1}) == 0
        assert tracker.log_metrics({"a": 2}) == 1
        assert tracker.log_metrics({"a": 3}, step=5) == 5
        assert tracker.log_metrics({"b": 3}, step=5) == 5  # more keys at the same step
        with pytest.raises(ConfigError, match="step 4 comes after step 5"):
            tracker.log_metrics({"a": 4}, step=4)
        with pytest.raises(ConfigError, match="whole number"):
            tracker.log_metrics({"a": 4}, step=-1)
        with pytest.raises(ConfigError, match="'a' is nan"):
            tracker.log_metrics({"a": float("nan")})
        with pytest.raises(ConfigError, match="expected a number"):
            tracker.log_metrics({"a": "1"})  # type: ignore[dict-item]
        metrics = tracker.log_scores(LINES)
        assert tracker.rows[-1] == (6, metrics)
    assert tracker.finished == 1
    tracker.close()  # closing twice is harmless
    assert tracker.finished == 1
    with pytest.raises(ConfigError, match="closed"):
        tracker.log_metrics({"a": 1})
