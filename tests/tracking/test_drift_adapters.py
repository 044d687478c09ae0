"""The drift watch fed by the trainer adapters: each scoring call is one step of the watch, set
in Python (``watch_drift``) or from the environment (``REWARDSMITH_DRIFT``); its warnings reach
the ``rewardsmith.drift`` logger and its figures the trackers."""

from __future__ import annotations

import asyncio
import logging
import types
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_tracking_adapters import _fresh  # noqa: F401 - autouse: the same environment
from test_tracking_trackers import tensorboard_scalars

from rewardsmith.analysis import DriftWatch
from rewardsmith.errors import ConfigError
from rewardsmith.integrations.slime import custom_rm
from rewardsmith.integrations.trl import trl_reward_funcs
from rewardsmith.integrations.verl import compute_score_batch
from rewardsmith.tracking import (
    ENV_DRIFT,
    TensorBoardTracker,
    adapter_steps,
    scoring_drift,
    stop_tracking,
    stop_watching_drift,
    track_scoring,
    watch_drift,
)


@pytest.fixture(autouse=True)
def _fresh_drift(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No drift watch from earlier tests or from the environment (the tracking tests' own
    autouse ``_fresh``, imported above, sets up the rubric file, no workers, no trackers)."""
    monkeypatch.delenv(ENV_DRIFT, raising=False)
    adapter_steps._STEPS.env_drift = None  # each test reads the environment afresh
    adapter_steps._STEPS.drift_failed = False
    yield
    stop_watching_drift()
    adapter_steps._STEPS.env_drift = None


def trl_steps(completions_per_step: list[list[str]]) -> None:
    funcs = trl_reward_funcs()
    prompts = ["What is 6*7?"] * 2 + ["What is 2+2?"] * 2
    for completions in completions_per_step:
        for func in funcs:  # TRL calls each component's function; one scoring, one step
            func(prompts=prompts, completions=completions, answer=["42", "42", "4", "4"])


def test_trl_steps_feed_the_watch_and_collapsing_groups_warn(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    watch = watch_drift()
    tracker = track_scoring(TensorBoardTracker(tmp_path / "tb", run="trl"))
    try:
        with caplog.at_level(logging.WARNING, logger="rewardsmith.drift"):
            trl_steps([["#### 42", "#### 41", "#### 4", "#### 5"],   # both groups mixed
                       ["#### 42", "#### 42", "#### 4", "#### 4"]])  # both all equal
    finally:
        stop_tracking(tracker)
        tracker.close()
    assert [s.step for s in watch.history] == [1, 2]  # one step per batch, not per function
    assert [s.zero_variance_fraction for s in watch.history] == [0.0, 1.0]
    # Every completion has the marker: 'correct' alone moves the reward (dominance), then
    # both groups collapse.
    assert [(w.kind, w.step) for w in watch.warnings] == [("dominance", 1),
                                                           ("zero_variance", 2)]
    assert any("have rewards that are all equal" in r.getMessage() for r in caplog.records)
    scalars = tensorboard_scalars(tmp_path / "tb" / "trl")
    assert scalars["drift/zero_variance_fraction"] == [(0, 0.0), (1, 1.0)]
    assert scalars["drift/warnings"] == [(0, 1.0), (1, 1.0)]
    assert scalars["drift/share/correct"] == [(0, 1.0)]
    assert "drift/mean_length" in scalars


def test_the_environment_turns_it_on_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DRIFT, "on")
    for solutions in (["#### 42", "#### 7"], ["#### 42", "#### 42"]):
        compute_score_batch(["gsm8k"] * 2, solutions, ["42", "42"],
                            [{"index": 0}, {"index": 0}])
    watch = scoring_drift()
    assert isinstance(watch, DriftWatch)
    assert len(watch.history) == 2 and watch.pairs == []
    assert [w.kind for w in watch.warnings][-1] == "zero_variance"


def test_pairs_from_the_environment_and_a_bad_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DRIFT, "format~correct")
    compute_score_batch(["gsm8k"] * 2, ["#### 42", "no"], ["42", "42"],
                        [{"index": 0}, {"index": 0}])
    watch = scoring_drift()
    assert watch is not None and watch.pairs == [("format", "correct")]
    assert "format~correct" in watch.history[-1].agreement
    adapter_steps._STEPS.env_drift = None
    monkeypatch.setenv(ENV_DRIFT, "format,correct")
    with pytest.raises(ConfigError, match="component pairs to follow"):
        compute_score_batch(["gsm8k"], ["#### 42"], ["42"], [{"index": 0}])


def test_off_values_leave_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("", "0", "off"):
        adapter_steps._STEPS.env_drift = None
        monkeypatch.setenv(ENV_DRIFT, value)
        compute_score_batch(["gsm8k"], ["#### 42"], ["42"], [{"index": 0}])
        assert scoring_drift() is None


def test_slime_gives_the_watch_completion_lengths() -> None:
    def sample(response: str, status: str | None = None) -> Any:
        return types.SimpleNamespace(prompt="Q", response=response, label="42", metadata={},
                                     status=status, index=None, group_index=0)

    watch = watch_drift()
    args = types.SimpleNamespace(reward_key=None, eval_reward_key=None)
    texts = ["#### 42", "so it is #### 40", "#### 4"]
    asyncio.run(custom_rm(args, [sample(texts[0]), sample(texts[1]), sample(texts[2], "aborted")]))
    stats = watch.history[-1]
    assert stats.length_source == "characters"
    assert stats.mean_length == pytest.approx(sum(map(len, texts)) / 3)
    assert stats.rollouts == 3  # the aborted sample counts, masked


def test_a_failing_watch_warns_once_and_scoring_goes_on() -> None:
    class Broken(DriftWatch):
        def observe(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("no room")

    watch_drift(Broken())
    with pytest.warns(RuntimeWarning, match="drift watch failed on a scoring step: no room"):
        first = compute_score_batch(["gsm8k"], ["#### 42"], ["42"], [{"index": 0}])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # silent the second time
        second = compute_score_batch(["gsm8k"], ["#### 41"], ["42"], [{"index": 0}])
    assert first[0]["score"] == pytest.approx(1.25) and second[0]["score"] == pytest.approx(0.25)


def test_drift_metrics_leave_out_what_is_not_a_finite_number() -> None:
    from rewardsmith.analysis.drift import StepStats
    from rewardsmith.tracking import drift_metrics

    stats = StepStats(step=3, rollouts=4, reward_mean=None, groups=0, zero_variance_groups=0,
                      shares={"a b": 0.75, "c": float("nan")}, mean_length=float("inf"),
                      agreement={"a~c": {"disagreement": 0.25, "correlation": None}})
    assert drift_metrics(stats, 2) == {"drift/warnings": 2.0, "drift/share/a_b": 0.75,
                                       "drift/disagreement/a_c": 0.25}
