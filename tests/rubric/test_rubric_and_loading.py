"""Rubric files, formulas, gates, identities; loading rewards and its failures."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rewardsmith import Component, LoadError, Rubric, RubricError
from rewardsmith.rubric.loading import load_reward, source_identity
from rewardsmith.types import ComponentResult, Status

FIXTURES = Path(__file__).parent.parent / "fixtures" / "user_rewards.py"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rubric.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def ok(value: float) -> ComponentResult:
    return ComponentResult(value)


# ---------------------------------------------------------------- rubric files


def test_yaml_rubric(tmp_path: Path) -> None:
    rubric = Rubric.from_yaml(write(tmp_path, """
name: gsm8k-v1
components:
  correct: {reward: gsm8k, weight: 1.0}
  format:  {reward: marker, params: {marker: "####"}, weight: 0.2}
"""))
    assert rubric.name == "gsm8k-v1"
    assert rubric.names == ["correct", "format"]
    reward, status, components, _, _ = rubric.combine({"correct": ok(1.0), "format": ok(1.0)})
    assert reward == pytest.approx(1.2) and status is Status.OK
    assert components == {"correct": 1.0, "format": 1.0}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("components: {correct: {reward: gsm8k, wieght: 1}}", "unknown key 'components.correct.wieght'"),
        ("components: {correct: {reward: gsm8k, weight: heavy}}", "components.correct.weight"),
        ("components: {correct: {weight: 1}}", "missing key 'reward'"),
        ("components: {correct: {reward: gsm8kk}}", "Did you mean 'gsm8k'"),
        ("components: {}", "at least one component"),
        ("name: x", "components"),
        ("components: {a: {reward: gsm8k, requires: b}}", "unknown component 'b'"),
        ("components: {a: {reward: marker, params: {markr: '#'}}}", "takes no parameter(s) 'markr'"),
        ("components: {a: {reward: regex}}", "needs a value for parameter 'pattern'"),
        ("components: {a: gsm8k}\nformula: a +", "not a valid formula"),
        ("components: {a: gsm8k}\nformula: a + b", "unknown component 'b'"),
        ("components: {a: gsm8k}\nformula: __import__('os')", "not allowed"),
        ("components: {a: gsm8k}\non_error: zero", "on_error"),
        ("components: {a: gsm8k}\nquantize: 0.1", "quantize"),
        ("components: [gsm8k]", "components"),
        ("- just a list", "must be a mapping"),
        ("components: {a: {reward: 'nope_module_xyz:f'}}", "no module named 'nope_module_xyz'"),
        ("key: [unclosed", "not valid YAML"),
    ],
)
def test_bad_rubric_files_name_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises((RubricError, LoadError)) as caught:
        Rubric.from_yaml(path)
    assert message in str(caught.value)
    assert str(path) in str(caught.value)


def test_missing_rubric_file(tmp_path: Path) -> None:
    with pytest.raises(RubricError, match="does not exist"):
        Rubric.from_yaml(tmp_path / "nope.yaml")


def test_formula_gates_and_quantize() -> None:
    rubric = Rubric(
        [Component("correct", "gsm8k"), Component("format", "marker", requires="correct"),
         Component("length", "length")],
        formula="clamp(correct + 0.3 * format + length, 0, 1.2)",
        quantize=0.25,
    )
    total, status, _, _, _ = rubric.combine(
        {"correct": ok(1.0), "format": ok(1.0), "length": ok(0.0)})
    assert total == 1.25  # 1.3 clamped to 1.2, then rounded to the 0.25 grid
    total, _, _, _, _ = rubric.combine({"correct": ok(0.0), "format": ok(1.0), "length": ok(-0.5)})
    assert total == 0.0  # gate closed, then clamped at 0
    total, status, _, errors, _ = rubric.combine(
        {"correct": ok(0.0), "format": ComponentResult.failed(Status.ERROR, "boom"),
         "length": ok(0.0)})
    assert status is Status.OK and total == 0.0  # a gated-out failure does not count
    assert errors == {"format": "boom"}


def test_formula_division_by_zero_is_an_error_for_that_rollout() -> None:
    rubric = Rubric([Component("a", "marker"), Component("b", "marker")], formula="a / b")
    total, status, _, errors, _ = rubric.combine({"a": ok(1.0), "b": ok(0.0)})
    assert total is None and status is Status.ERROR and "division by zero" in errors["formula"]


def test_failure_statuses_and_on_error() -> None:
    rubric = Rubric([Component("a", "marker"), Component("b", "marker")], on_error=-1)
    total, status, *_ = rubric.combine(
        {"a": ComponentResult.failed(Status.TIMEOUT, "slow"), "b": ok(1.0)})
    assert (total, status) == (-1.0, Status.TIMEOUT)
    total, status, *_ = rubric.combine({"a": ComponentResult(None, Status.MASKED), "b": ok(1.0)})
    assert (total, status) == (None, Status.MASKED)  # abstaining masks, whatever on_error says


def test_identity_changes_with_code_and_params_not_weights() -> None:
    base = Rubric([Component("c", "marker", params={"marker": "####"})])
    heavier = Rubric([Component("c", "marker", weight=3.0, params={"marker": "####"})])
    other = Rubric([Component("c", "marker", params={"marker": "Answer:"})])
    assert base.components[0].identity() == heavier.components[0].identity()
    assert base.components[0].identity() != other.components[0].identity()
    assert base.id != heavier.id  # the rubric id covers weights too
    assert base.id == Rubric([Component("c", "marker", params={"marker": "####"})]).id


# ---------------------------------------------------------------- loading


def test_load_by_every_spelling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "my_rewards_mod.py"
    module.write_text("def score(completion):\n    return 1.0\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_reward("gsm8k").builtin
    assert load_reward("my_rewards_mod:score").func("x") == 1.0
    assert load_reward("my_rewards_mod.score").func("x") == 1.0
    assert load_reward(f"{module}:score").func("x") == 1.0
    sys.modules.pop("my_rewards_mod", None)


def test_load_failures_say_what_to_fix(tmp_path: Path) -> None:
    with pytest.raises(LoadError) as caught:
        load_reward("my_missing_rewards.custom_rm")
    message = str(caught.value)
    assert "no module named 'my_missing_rewards'" in message
    assert "PYTHONPATH" in message and "Python searched" in message

    with pytest.raises(LoadError, match="has no attribute 'exact_lenn'.*Did you mean 'exact_len'"):
        load_reward(f"{FIXTURES}:exact_lenn")
    with pytest.raises(LoadError, match="does not exist"):
        load_reward(f"{tmp_path}/nope.py:f")
    broken = tmp_path / "broken.py"
    broken.write_text("import not_installed_pkg_xyz\n", encoding="utf-8")
    with pytest.raises(LoadError, match="ModuleNotFoundError"):
        load_reward(f"{broken}:f")
    with pytest.raises(LoadError, match="name the function"):
        load_reward("rewards.py")
    with pytest.raises(LoadError, match="not a function"):
        load_reward("rewardsmith.types:__all__")


def test_source_identity_tracks_the_module(tmp_path: Path) -> None:
    path = tmp_path / "ident.py"
    path.write_text("def f(completion):\n    return 1.0\n", encoding="utf-8")
    first = source_identity(load_reward(f"{path}:f").func)
    assert first == source_identity(load_reward(f"{path}:f").func)
    from rewardsmith.rewards.answers import gsm8k, number

    assert source_identity(gsm8k) != source_identity(number)


def test_a_reward_can_ask_for_a_trajectorys_turns() -> None:
    from rewardsmith import Component, Engine, Rollout, Rubric

    def tools_used(turns: list) -> float:
        return float(sum(len(turn.tool_calls) for turn in turns))

    conversation = [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "search", "arguments": "{\"q\": \"x\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
        {"role": "assistant", "content": "done"},
    ]
    with Engine(Rubric([Component("tools", tools_used)]), workers=0) as engine:
        [score] = engine.score_group([Rollout("1", "g", "p", conversation, None)])
    assert score.reward == 1.0
