"""The trainer adapters as tracker callbacks: each scoring call is one step, read back from the
TensorBoard event files it wrote (the fastest tracker to open; the three trackers share
everything above ``log_metrics``, which test_tracking_trackers.py checks for each)."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_tracking_trackers import tensorboard_scalars

from rewardsmith.integrations import close_engines, engine_for
from rewardsmith.integrations.openrlhf import reward_func
from rewardsmith.integrations.slime import custom_rm
from rewardsmith.integrations.trl import trl_reward_funcs
from rewardsmith.integrations.verl import compute_score_batch
from rewardsmith.tracking import (
    ENV_LOG_DIR,
    ENV_LOG_RUN,
    ENV_LOG_TO,
    TensorBoardTracker,
    close_scoring_trackers,
    stop_tracking,
    track_scoring,
)
from support.openai_server import OpenAIServer

RUBRIC = """
name: tracked
components:
  format: {reward: marker, params: {marker: "####"}, weight: 0.25}
  correct: {reward: gsm8k, weight: 1.0}
"""


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setenv("REWARDSMITH_WORKERS", "0")
    for name in (ENV_LOG_TO, ENV_LOG_DIR, ENV_LOG_RUN, "REWARDSMITH_LOG_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "rubric.yaml"
    path.write_text(RUBRIC)
    monkeypatch.setenv("REWARDSMITH_RUBRIC", str(path))
    yield path
    close_scoring_trackers()
    close_engines()


def test_trl_batch_is_one_step_for_all_component_functions(tmp_path: Path) -> None:
    tracker = TensorBoardTracker(tmp_path / "tb", run="trl")
    funcs = trl_reward_funcs(tracker=tracker)
    assert funcs.names == ["format", "correct"]
    prompts = ["What is 6*7?"] * 2 + ["What is 2+2?"] * 2
    for completions in (["#### 42", "#### 41", "#### 4", "#### 4"],
                        ["#### 42", "#### 42", "#### 5", "four"]):
        columns = {"answer": ["42", "42", "4", "4"]}
        for func in funcs:  # TRL calls every function; the batch is scored (and logged) once
            func(prompts=prompts, completions=completions, **columns)
    tracker.close()
    scalars = tensorboard_scalars(tmp_path / "tb" / "trl")
    assert scalars["rollouts"] == [(0, 4.0), (1, 4.0)]
    assert scalars["components/correct/mean"] == [(0, 0.75), (1, 0.5)]
    # Step 0: group 1 mixed (42 vs 41), group 2 equal; step 1: group 1 equal, group 2 mixed.
    assert scalars["groups/zero_variance"] == [(0, 1.0), (1, 1.0)]
    assert scalars["components/format/mean"][1] == (1, 0.75)


def test_verl_from_the_environment_one_step_per_batch(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_LOG_TO, "tensorboard")
    monkeypatch.setenv(ENV_LOG_DIR, str(tmp_path / "tb"))
    monkeypatch.setenv(ENV_LOG_RUN, "verl-rank0")
    for solutions in (["#### 42", "#### 7"], ["#### 42", "#### 42"], ["no answer", "#### 1"]):
        compute_score_batch(["gsm8k"] * 2, solutions, ["42", "42"],
                            [{"index": 0}, {"index": 0}])
    close_scoring_trackers()
    scalars = tensorboard_scalars(tmp_path / "tb" / "verl-rank0")
    assert scalars["reward/max"] == [(0, 1.25), (1, 1.25), (2, 0.25)]
    assert scalars["groups/zero_variance"] == [(0, 0.0), (1, 1.0), (2, 0.0)]


def test_slime_call_counts_its_masked_samples(tmp_path: Path) -> None:
    def sample(response: str, status: str | None = None) -> Any:
        return types.SimpleNamespace(prompt="Q", response=response, label="42", metadata={},
                                     status=status, index=None, group_index=0)

    tracker = track_scoring(TensorBoardTracker(tmp_path / "tb", run="slime"))
    try:
        args = types.SimpleNamespace(reward_key=None, eval_reward_key=None)
        rewards = asyncio.run(custom_rm(args, [sample("#### 42"), sample("#### 40"),
                                               sample("#### 4", "aborted")]))
        assert rewards == [1.25, 0.25, 0.0]
    finally:
        stop_tracking(tracker)
        tracker.close()
    scalars = tensorboard_scalars(tmp_path / "tb" / "slime")
    assert scalars["status/masked"] == [(0, 1.0)]
    assert scalars["status/ok"] == [(0, 2.0)]
    assert scalars["reward/count"] == [(0, 2.0)]


def test_a_failing_tracker_warns_once_and_scoring_goes_on(tmp_path: Path) -> None:
    broken = track_scoring(TensorBoardTracker(tmp_path / "tb", run="closed"))
    broken.close()  # logging to it now fails
    try:
        with pytest.warns(RuntimeWarning, match="could not log a scoring step to tensorboard"):
            first = reward_func(["Q #### 42"], ["Q"], ["42"])
        second = reward_func(["Q #### 41"], ["Q"], ["42"])  # silent the second time
    finally:
        stop_tracking(broken)
    assert first["rewards"][0] == pytest.approx(1.25)
    assert second["rewards"][0] == pytest.approx(0.25)


JUDGED = """
name: judged
components:
  correct: {{reward: gsm8k, weight: 1.0}}
  quality:
    judge:
      base_url: {base_url}
      model: judge-2024-01-01
      api_key_env: TRACKING_JUDGE_KEY
      template: "Question: {{prompt}}\\nAnswer: {{completion}}"
      criteria:
        helpful: "Does the answer help the user?"
      price_per_million_input: 0.15
      price_per_million_output: 0.60
      store: {store}
    weight: 0.5
"""


def test_judge_cost_per_step_adds_up_to_the_engines_total(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIServer(models=["judge-2024-01-01"], api_key="sk-tracking-test") as server:
        rubric = tmp_path / "judged.yaml"
        rubric.write_text(JUDGED.format(base_url=server.base_url, store=tmp_path / "j.db"))
        monkeypatch.setenv("REWARDSMITH_RUBRIC", str(rubric))
        monkeypatch.setenv("TRACKING_JUDGE_KEY", "sk-tracking-test")
        tracker = track_scoring(TensorBoardTracker(tmp_path / "tb", run="judged"))
        try:
            for batch in range(3):
                size = 2 + batch  # different rollouts each time: nothing replayed
                reward_func([f"Q{batch} #### {n}" for n in range(size)],
                            [f"Q{batch}"] * size, ["1"] * size)
            total = engine_for().usage()["judge:quality"]
        finally:
            stop_tracking(tracker)
            tracker.close()
    scalars = tensorboard_scalars(tmp_path / "tb" / "judged")
    calls = [value for _, value in scalars["judge/quality/calls"]]
    assert calls == [2.0, 3.0, 4.0]
    costs = [value for _, value in scalars["judge/quality/cost"]]
    assert all(cost > 0 for cost in costs)
    assert sum(costs) == pytest.approx(total["cost"], rel=1e-5)  # float32 in the event file
    assert [value for _, value in scalars["cost/total"]] == costs


# ------------------------------------------------------------------ --log-to of score/rescore


def test_log_to_options_observe_a_scoring_job_and_log_one_step(tmp_path: Path,
                                                               _fresh: Path) -> None:
    import json

    from rewardsmith.cli.logging_opts import RunLogging
    from rewardsmith.jobs.score import ScoreJob
    from rewardsmith.rubric._model import Rubric

    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("".join(json.dumps(
        {"id": str(n), "group": f"q{n // 2}", "prompt": "Q", "completion": f"#### {n % 3}",
         "answer": "1"}) + "\n" for n in range(6)))
    logging = RunLogging.from_options(["tensorboard"], project="nightly", run="v2",
                                      directory=str(tmp_path / "tb"), step=3)
    assert logging is not None
    job = ScoreJob(Rubric.from_yaml(_fresh), workers=0, keep_scores=False,
                   post_process=logging.observe)  # fed a group at a time
    result = job.run(rollouts)
    metrics = logging.finish(result.summary.extra.get("usage"), quiet=True)
    scalars = tensorboard_scalars(tmp_path / "tb" / "nightly" / "v2")
    assert scalars["rollouts"] == [(3, 6.0)]
    assert metrics["components/correct/mean"] == pytest.approx(2 / 6)
    summary = result.summary  # the run's own summary agrees with what was logged
    assert metrics["reward/mean"] == pytest.approx(summary.reward.mean)
    assert metrics["groups/zero_variance"] == summary.zero_variance_groups


def test_log_to_options_fail_before_anything_runs() -> None:
    from rewardsmith.cli._app import UsageProblem
    from rewardsmith.cli.logging_opts import RunLogging

    assert RunLogging.from_options(None) is None
    assert RunLogging.from_options([]) is None
    with pytest.raises(UsageProblem, match="--log-run, --log-dir need --log-to"):
        RunLogging.from_options(None, run="x", directory="d")
    with pytest.raises(UsageProblem, match="--log-to 'neptune': choose wandb, mlflow, tensorboard or jsonl"):
        RunLogging.from_options(["tensorboard,neptune"])
    logging = RunLogging.from_options(["wandb, tensorboard", "wandb"])
    assert logging is not None and logging.names == ["wandb", "tensorboard"]
