"""The TRL adapter, called the way GRPOTrainer calls its reward functions."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import ConfigError, Rollout, Rubric, score_rollouts
from rewardsmith.integrations import close_engines, engine_for
from rewardsmith.integrations.trl import trl_reward_funcs

RUBRIC = """
name: trl-test
components:
  correct: {reward: gsm8k, weight: 1.0}
  format: {reward: marker, params: {marker: "####"}, weight: 0.25}
  bonus: {reward: "REWARDS:bonus", weight: 0.5, requires: correct}
"""

REWARDS = '''
from rewardsmith import group_reward

def bonus(completion):
    if "SKIP" in completion:
        return None  # abstain: the rollout is masked
    return 1.0 if "!" in completion else 0.0

@group_reward
def group_size(completions):
    return [float(len(completions))] * len(completions)
'''


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("REWARDSMITH_WORKERS", "0")
    monkeypatch.delenv("REWARDSMITH_RUBRIC", raising=False)
    yield
    close_engines()


@pytest.fixture
def rubric_file(tmp_path: Path) -> Path:
    rewards = tmp_path / "trl_rewards.py"
    rewards.write_text(REWARDS)
    path = tmp_path / "rubric.yaml"
    path.write_text(RUBRIC.replace("REWARDS", str(rewards)))
    return path


def trl_calculate_rewards(funcs: list[Any], weights: list[float], inputs: list[dict[str, Any]],
                          completions: list[Any]) -> tuple[list[list[float]], list[float]]:
    """What GRPOTrainer does: dataset columns as keyword lists, None -> NaN, weighted nansum."""
    prompts = [row["prompt"] for row in inputs]
    keys = [k for k in inputs[0] if k not in ("prompt", "completion", "completion_ids")]
    kwargs: dict[str, Any] = {key: [row[key] for row in inputs] for key in keys}
    kwargs["trainer_state"] = object()
    completion_ids = [[ord(c) for c in str(x)][:8] for x in completions]
    per_func = []
    for func in funcs:
        out = func(prompts=prompts, completions=completions, completion_ids=completion_ids,
                   **kwargs)
        assert len(out) == len(completions)
        per_func.append([math.nan if r is None else float(r) for r in out])
    totals = []
    for row in zip(*per_func):
        terms = [w * v for w, v in zip(weights, row) if not math.isnan(v)]
        totals.append(math.fsum(terms))
    return per_func, totals


def batch() -> tuple[list[dict[str, Any]], list[str]]:
    # Two prompts, num_generations=3 each, consecutive as TRL's sampler orders them.
    inputs = [{"prompt": "What is 6*7?", "answer": "42"}] * 3 + \
             [{"prompt": "What is 2+2?", "answer": "4"}] * 3
    completions = ["#### 42!", "#### 41", "42", "#### 4", "SKIP #### 4", "5!"]
    return inputs, completions


def test_per_component_functions_reproduce_the_rubric_total(rubric_file: Path) -> None:
    funcs = trl_reward_funcs(str(rubric_file))
    assert funcs.names == ["correct", "format", "bonus"]
    assert [f.__name__ for f in funcs] == ["correct", "format", "bonus"]
    assert funcs.reward_weights == [1.0, 0.25, 0.5]
    inputs, completions = batch()
    per_func, totals = trl_calculate_rewards(funcs, funcs.reward_weights, inputs, completions)
    assert per_func[0][:4] == [1.0, 0.0, 1.0, 1.0]
    assert per_func[2][:4] == [1.0, 0.0, 0.0, 0.0]  # bonus only counts when correct
    assert math.isnan(per_func[0][4]) and math.isnan(per_func[2][4])  # masked: None everywhere
    expected = score_rollouts(Rubric.from_yaml(rubric_file), [
        Rollout(str(i), "g", row["prompt"], c, row["answer"])
        for i, (row, c) in enumerate(zip(inputs, completions))], workers=0)
    for index, score in enumerate(expected):
        if score.reward is None:
            assert all(math.isnan(values[index]) for values in per_func)
        else:
            assert totals[index] == pytest.approx(score.reward, abs=1e-12)


def test_the_batch_is_scored_once_for_all_component_functions(rubric_file: Path) -> None:
    funcs = trl_reward_funcs(rubric_file)
    inputs, completions = batch()
    engine = engine_for(rubric_file)
    before = engine.calls
    trl_calculate_rewards(funcs, funcs.reward_weights, inputs, completions)
    first = engine.calls - before
    assert first == 3 * len(completions)  # one call per component per completion, once
    trl_calculate_rewards(funcs, funcs.reward_weights, inputs, completions[::-1])
    assert engine.calls - before == 2 * first  # a new batch is scored anew


def test_conversational_completions_and_solution_column(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARDSMITH_RUBRIC", "gsm8k")
    funcs = trl_reward_funcs()
    assert funcs.names == ["gsm8k"] and funcs.reward_weights == [1.0]
    prompt = [{"role": "user", "content": "What is 6*7?"}]
    inputs = [{"prompt": prompt, "solution": "42", "level": 1}] * 2
    completions = [[{"role": "assistant", "content": "It is #### 42"}],
                   [{"role": "assistant", "content": [{"type": "text", "text": "#### 40"}]}]]
    per_func, totals = trl_calculate_rewards(funcs, funcs.reward_weights, inputs, completions)
    assert totals == [1.0, 0.0]


def test_groups_are_runs_of_identical_prompts(tmp_path: Path) -> None:
    rewards = tmp_path / "group_rewards.py"
    rewards.write_text(REWARDS)
    funcs = trl_reward_funcs(f"{rewards}:group_size")
    inputs = [{"prompt": "a"}] * 2 + [{"prompt": "b"}] * 3 + [{"prompt": "a"}] * 1
    _, totals = trl_calculate_rewards(funcs, funcs.reward_weights, inputs, ["x"] * 6)
    assert totals == [2.0, 2.0, 3.0, 3.0, 3.0, 1.0]


def test_total_mode_for_formula_rubrics_and_rubric_per_row(tmp_path: Path) -> None:
    path = tmp_path / "formula.yaml"
    path.write_text("name: f\ncomponents:\n  a: {reward: gsm8k}\n  b: {reward: number}\n"
                    "formula: a * b + 0.5\n")
    with pytest.raises(ConfigError, match="per_component=False"):
        trl_reward_funcs(path)
    funcs = trl_reward_funcs(path, per_component=False)
    assert funcs.names == ["f"] and funcs.reward_weights == [1.0]
    inputs: list[dict[str, Any]] = [{"prompt": "p", "answer": "3", "rubric": None},
              {"prompt": "p", "answer": "3", "rubric": "exact"}]
    _, totals = trl_calculate_rewards(funcs, [1.0], inputs, ["#### 3", "3"])
    assert totals == [1.5, 1.0]  # the second row is graded by the 'exact' built-in


def test_per_component_refuses_a_row_with_another_rubric(rubric_file: Path) -> None:
    funcs = trl_reward_funcs(rubric_file)
    inputs = [{"prompt": "p", "answer": "3", "rubric": "exact"}]
    with pytest.raises(ConfigError, match="per_component=False"):
        trl_calculate_rewards(funcs, funcs.reward_weights, inputs, ["3"])


def test_no_rubric_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="REWARDSMITH_RUBRIC"):
        trl_reward_funcs()
    funcs = trl_reward_funcs(per_component=False)
    with pytest.raises(ConfigError, match="REWARDSMITH_RUBRIC"):
        funcs[0](prompts=["p"], completions=["c"], completion_ids=[[1]], trainer_state=None)


def test_a_failing_rollout_with_on_error_number_keeps_the_total(tmp_path: Path) -> None:
    rewards = tmp_path / "boom.py"
    rewards.write_text("def boom(completion):\n    if 'x' in completion:\n"
                       "        raise RuntimeError('bad')\n    return 1.0\n")
    path = tmp_path / "r.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: onerr
        components:
          a: {{reward: "{rewards}:boom", weight: 2.0}}
          b: {{reward: exact, weight: 1.0}}
        on_error: -1.0
        """))
    funcs = trl_reward_funcs(path)
    inputs = [{"prompt": "p", "answer": "ok"}] * 2
    _, totals = trl_calculate_rewards(funcs, funcs.reward_weights, inputs, ["ok", "x"])
    assert totals == [3.0, -1.0]


def test_with_worker_processes(monkeypatch: pytest.MonkeyPatch, rubric_file: Path) -> None:
    monkeypatch.setenv("REWARDSMITH_WORKERS", "1")
    funcs = trl_reward_funcs(rubric_file)
    inputs, completions = batch()
    _, totals = trl_calculate_rewards(funcs, funcs.reward_weights, inputs, completions)
    assert totals[0] == 1.0 + 0.25 + 0.5
