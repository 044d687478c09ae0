"""The OpenRLHF reward function file, loaded and called the way OpenRLHF does."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import rewardsmith.integrations.openrlhf as openrlhf_module
from rewardsmith import InputError
from rewardsmith.integrations import close_engines
from rewardsmith.integrations.openrlhf import split_query

RUBRIC = """
name: openrlhf-test
components:
  correct: {reward: gsm8k, weight: 1.0}
  format: {reward: marker, params: {marker: "####"}, weight: 0.5}
"""


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("REWARDSMITH_WORKERS", "0")
    path = tmp_path / "rubric.yaml"
    path.write_text(RUBRIC)
    monkeypatch.setenv("REWARDSMITH_RUBRIC", str(path))
    yield
    close_engines()


def load_like_openrlhf(path: str) -> Callable[..., Any]:
    """OpenRLHF: a --remote_rm_url ending in .py is run as module 'reward_func'."""
    spec = importlib.util.spec_from_file_location("reward_func", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reward_func  # type: ignore[no-any-return]


def as_list(value: Any) -> list[float]:
    return [float(v) for v in (value.tolist() if hasattr(value, "tolist") else value)]


def test_file_form_splits_queries_and_answers_rewards_scores_logs() -> None:
    reward_func = load_like_openrlhf(openrlhf_module.__file__)
    prompts = ["<user>6*7?</user>"] * 2 + ["<user>2+2?</user>"] * 2
    responses = ["#### 42", "41", "#### 4", "#### 5"]
    queries = [p + r for p, r in zip(prompts, responses)]
    out = reward_func(queries, prompts, ["42", "42", "4", "4"])
    assert set(out) == {"rewards", "scores", "extra_logs"}
    assert as_list(out["rewards"]) == [1.5, 0.0, 1.5, 0.5]
    assert as_list(out["scores"]) == [1.5, 0.0, 1.5, 0.5]
    logs = {k: as_list(v) for k, v in out["extra_logs"].items()}
    assert logs == {"masked": [0.0] * 4, "acc": [1.0, 0.0, 1.0, 0.0],
                    "correct": [1.0, 0.0, 1.0, 0.0], "format": [1.0, 0.0, 1.0, 1.0]}


def test_the_prompt_is_not_graded() -> None:
    # The prompt holds the right number; only the response may earn the reward.
    reward_func = load_like_openrlhf(openrlhf_module.__file__)
    out = reward_func(["Is it 42? I say 7"], ["Is it 42?"], ["42"])
    assert as_list(out["rewards"]) == [0.0]


def test_split_query() -> None:
    assert split_query("PROMPT answer", "PROMPT") == " answer"
    assert split_query("<bos>PROMPT answer", "PROMPT") == " answer"  # special tokens in front
    assert split_query("something else", "PROMPT") == "something else"
    assert split_query("whole", None) == "whole"


def test_without_prompts_or_labels() -> None:
    reward_func = load_like_openrlhf(openrlhf_module.__file__)
    out = reward_func(["#### 3"], None, None)
    # No label: gsm8k errors, the rubric masks the sample, OpenRLHF gets 0.0 and the flag.
    assert as_list(out["rewards"]) == [0.0]
    assert as_list(out["extra_logs"]["masked"]) == [1.0]
    assert as_list(out["extra_logs"]["format"]) == [1.0]
    out = reward_func(["#### 3", "3"], None, ["3", "3"])
    assert as_list(out["rewards"]) == [1.5, 1.0]


def test_mismatched_lists_are_named() -> None:
    with pytest.raises(InputError, match="2 labels for 1 queries"):
        openrlhf_module.reward_func(["q"], ["p"], ["a", "b"])
    with pytest.raises(InputError, match="'query' must be a list"):
        openrlhf_module.reward_func("q", None, None)
