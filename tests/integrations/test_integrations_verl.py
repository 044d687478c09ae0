"""The verl adapter, loaded and called the way verl's reward managers do."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rewardsmith.integrations.verl as verl_module
from rewardsmith import ConfigError
from rewardsmith.integrations import close_engines
from rewardsmith.integrations.verl import compute_score, compute_score_async, compute_score_batch

RUBRIC = """
name: verl-test
components:
  format: {reward: marker, params: {marker: "####"}, weight: 0.25}
  correct: {reward: gsm8k, weight: 1.0}
  judge: {reward: "REWARDS:abstain_on_skip", weight: 0.0}
"""
REWARDS = """
def abstain_on_skip(completion):
    return None if "SKIP" in completion else 0.5
"""


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("REWARDSMITH_WORKERS", "0")
    monkeypatch.delenv("REWARDSMITH_RUBRIC", raising=False)
    yield
    close_engines()


@pytest.fixture
def rubric_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    rewards = tmp_path / "verl_rewards.py"
    rewards.write_text(REWARDS)
    path = tmp_path / "rubric.yaml"
    path.write_text(RUBRIC.replace("REWARDS", str(rewards)))
    monkeypatch.setenv("REWARDSMITH_RUBRIC", str(path))
    return path


def load_like_verl(path: str, name: str, reward_kwargs: dict[str, Any] | None = None
                   ) -> Callable[..., Any]:
    """verl's get_custom_reward_fn: pkg:// imports a module, else the file is run by path."""
    if path.startswith("pkg://"):
        module = importlib.import_module(path[len("pkg://"):])
    else:
        spec = importlib.util.spec_from_file_location("custom_module", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["custom_module"] = module
        spec.loader.exec_module(module)
    raw = getattr(module, name)
    kwargs = dict(reward_kwargs or {})

    def wrapped(*args: Any, **more: Any) -> Any:
        return raw(*args, **more, **kwargs)

    return wrapped


def naive_manager(fn: Callable[..., Any], samples: list[tuple[str, str, Any, Any]]
                  ) -> tuple[list[float], dict[str, list[float]]]:
    """verl's NaiveRewardManager loop: one call per sample, extra keys collected per key."""
    rewards: list[float] = []
    extra: dict[str, list[float]] = {}
    for data_source, response, ground_truth, extra_info in samples:
        result = fn(data_source=data_source, solution_str=response, ground_truth=ground_truth,
                    extra_info=extra_info)
        if isinstance(result, dict):
            rewards.append(result["score"])
            for key, value in result.items():
                extra.setdefault(key, []).append(value)
        else:
            rewards.append(result)
    for key, values in extra.items():
        assert len(values) == len(samples), f"key {key!r} missing for some samples"
    return rewards, extra


SAMPLES = [
    ("openai/gsm8k", "so #### 72", "72", {"index": 0, "question": "How many clips?"}),
    ("openai/gsm8k", "72", "72", {"index": 0}),
    ("openai/gsm8k", "#### 70", "72", {"index": 0}),
    ("openai/gsm8k", "SKIP #### 72", "72", None),
]


def test_per_sample_form_same_keys_and_masking(rubric_env: Path) -> None:
    for path in ("pkg://rewardsmith.integrations.verl", verl_module.__file__):
        fn = load_like_verl(path, "compute_score")
        rewards, extra = naive_manager(fn, SAMPLES)
        assert rewards == [1.25, 1.0, 0.25, 0.0]
        assert extra["acc"] == [1.0, 1.0, 0.0, 0.0]  # 'correct' is the first verifier
        assert extra["masked"] == [0.0, 0.0, 0.0, 1.0]
        assert extra["failed"] == [0.0, 0.0, 0.0, 0.0]
        assert extra["correct"] == [1.0, 1.0, 0.0, 1.0]
        assert extra["judge"] == [0.5, 0.5, 0.5, 0.0]
        assert set(extra) == {"score", "acc", "masked", "failed", "format", "correct", "judge"}


def test_batch_form_through_compute_score_and_by_name(rubric_env: Path) -> None:
    fn = load_like_verl("pkg://rewardsmith.integrations.verl", "compute_score")
    columns = list(zip(*SAMPLES))
    out = fn(data_sources=list(columns[0]), solution_strs=list(columns[1]),
             ground_truths=list(columns[2]), extra_infos=list(columns[3]))
    assert [r["score"] for r in out] == [1.25, 1.0, 0.25, 0.0]
    assert len({tuple(r) for r in out}) == 1  # the same keys, in the same order
    same = compute_score_batch(list(columns[0]), list(columns[1]), list(columns[2]),
                               list(columns[3]))
    assert same == out
    # verl's batch manager passes its non_tensor_batch columns: numpy object arrays.
    arrays = fn(**{name: np.array(list(column), dtype=object) for name, column in zip(
        ("data_sources", "solution_strs", "ground_truths", "extra_infos"), columns)})
    assert arrays == out


def test_rubric_from_reward_kwargs_and_extra_info(tmp_path: Path) -> None:
    fn = load_like_verl("pkg://rewardsmith.integrations.verl", "compute_score",
                        {"rubric": "number"})
    result = fn(data_source="d", solution_str="it is 41", ground_truth="41", extra_info={})
    assert result == {"score": 1.0, "acc": 1.0, "masked": 0.0, "failed": 0.0, "number": 1.0}
    # A sample that names its own rubric: the default rubric's component keys stay, as 0.0.
    own = fn(data_source="d", solution_str="abc", ground_truth="abc",
             extra_info={"rubric": "exact"})
    assert own == {"score": 1.0, "acc": 1.0, "masked": 0.0, "failed": 0.0, "number": 0.0}


def test_errors_are_failed_not_crashes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rewards = tmp_path / "bad.py"
    rewards.write_text("def bad(completion):\n    raise ValueError('nope')\n")
    monkeypatch.setenv("REWARDSMITH_RUBRIC", f"{rewards}:bad")
    result = compute_score("d", "x", "y")
    assert result == {"score": 0.0, "acc": 0.0, "masked": 1.0, "failed": 1.0, "bad": 0.0}


def test_async_form(rubric_env: Path) -> None:
    async def run() -> list[dict[str, float]]:
        return list(await asyncio.gather(*(
            compute_score_async(data_source=d, solution_str=s, ground_truth=g, extra_info=e)
            for d, s, g, e in SAMPLES)))

    out = asyncio.run(run())
    assert [r["score"] for r in out] == [1.25, 1.0, 0.25, 0.0]


def test_bad_input_names_what_is_wrong(rubric_env: Path) -> None:
    with pytest.raises(ValueError, match="3 ground_truths for 2 solution_strs"):
        compute_score_batch(["d", "d"], ["a", "b"], ["1", "2", "3"], None)
    with pytest.raises(ValueError, match="solution_str must be text"):
        compute_score("d", 42, "42")


def test_no_rubric(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="REWARDSMITH_RUBRIC"):
        compute_score("d", "x", "y")
    monkeypatch.setenv("REWARDSMITH_RUBRIC", "no_such_reward")
    with pytest.raises(ImportError, match="REWARDSMITH_RUBRIC='no_such_reward'"):
        compute_score("d", "x", "y")


def test_with_worker_processes(rubric_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARDSMITH_WORKERS", "1")
    rewards, _ = naive_manager(compute_score, SAMPLES[:2])
    assert rewards == [1.25, 1.0]
