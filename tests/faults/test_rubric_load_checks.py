"""Rubric mistakes refused at load, naming the file, the component or key, and the fix.

Gate cycles, duplicate YAML keys, patterns that do not compile, formulas that divide by a
constant zero, component names a formula cannot refer to, and where a relative
``path/file.py:func`` is looked for.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rewardsmith import Component, Engine, LoadError, Rollout, Rubric, RubricError
from rewardsmith.types import ComponentResult, Status


def write(folder: Path, text: str, name: str = "rubric.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------- gates


@pytest.mark.parametrize(("components", "cycle"), [
    ("a: {reward: marker, requires: b}\n  b: {reward: marker, requires: a}", "a -> b -> a"),
    ("a: {reward: marker, requires: b}\n  b: {reward: marker, requires: c}\n"
     "  c: {reward: marker, requires: a}", "a -> b -> c -> a"),
    # A chain that runs into a cycle names the cycle itself.
    ("x: {reward: marker, requires: a}\n  a: {reward: marker, requires: b}\n"
     "  b: {reward: marker, requires: a}", "a -> b -> a"),
])
def test_a_cycle_of_gates_is_refused(tmp_path: Path, components: str, cycle: str) -> None:
    path = write(tmp_path, f"components:\n  {components}\n")
    with pytest.raises(RubricError) as caught:
        Rubric.from_yaml(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: components {cycle}: ")
    assert "cycle" in message and "remove the 'requires'" in message


def test_a_chain_of_gates_is_fine() -> None:
    rubric = Rubric([Component("a", "marker"), Component("b", "marker", requires="a"),
                     Component("c", "marker", requires="b"), Component("d", "marker",
                                                                      requires="b")])
    assert rubric.names == ["a", "b", "c", "d"]


def test_a_cycle_built_in_python_is_refused_too() -> None:
    with pytest.raises(RubricError, match=r"<python>: components a -> b -> a"):
        Rubric([Component("a", "marker", requires="b"), Component("b", "marker", requires="a")])


# ---------------------------------------------------------------- duplicate keys


@pytest.mark.parametrize(("text", "key", "line", "first"), [
    ("name: a\ncomponents:\n  c: {reward: gsm8k}\nname: b\n", "name", 4, 1),
    ("components:\n  correct: {reward: gsm8k}\n  format: {reward: marker}\n"
     "  correct: {reward: number}\n", "correct", 4, 2),
    ("components:\n  c:\n    reward: marker\n    params:\n      marker: '####'\n"
     "      marker: 'Answer:'\n", "marker", 6, 5),
    ("components:\n  c: {reward: gsm8k, weight: 1, weight: 2}\n", "weight", 2, 2),
])
def test_a_key_given_twice_is_refused_with_its_lines(tmp_path: Path, text: str, key: str,
                                                     line: int, first: int) -> None:
    path = write(tmp_path, text)
    with pytest.raises(RubricError) as caught:
        Rubric.from_yaml(path)
    assert str(caught.value).startswith(
        f"{path}:{line}: duplicate key {key!r} (first given on line {first})")


def test_merge_keys_still_override(tmp_path: Path) -> None:
    # '<<' copies a mapping in and lets the keys written beside it win: that is not a duplicate.
    path = write(tmp_path, """
components:
  a: &a {reward: marker, weight: 0.5}
  b: {<<: *a, weight: 2.0}
""")
    rubric = Rubric.from_yaml(path)
    assert [c.weight for c in rubric.components] == [0.5, 2.0]


# ---------------------------------------------------------------- patterns and params


@pytest.mark.parametrize(("params", "message"), [
    ({"pattern": "([a-"}, r"the pattern '\(\[a-' does not compile"),
    ({"pattern": "(?P<x>a)(?P<x>b)"}, "does not compile"),
    ({"pattern": "a", "flags": "iq"}, "unknown flag 'q'"),
    ({"pattern": 42}, "the pattern must be a string, not int"),
])
def test_a_regex_that_cannot_work_is_refused_at_load(tmp_path: Path, params: dict[str, object],
                                                     message: str) -> None:
    with pytest.raises(RubricError, match=message) as caught:
        Rubric.from_dict({"components": {"answer_shape": {"reward": "regex", "params": params}}},
                         source="r.yaml")
    assert str(caught.value).startswith("r.yaml: components.answer_shape.params: ")


@pytest.mark.parametrize(("reward", "params", "message"), [
    ("length", {"max_length": 100, "buffer": 200}, "need 0 <= buffer <= max_length"),
    ("length", {"unit": "tokens"}, "unit must be 'chars' or 'words'"),
    ("length", {"max_length": "100"}, "max_length must be a whole number"),
    ("marker", {"marker": ""}, "the marker must be a non-empty string"),
    ("marker", {"max_count": 0}, "max_count must be a whole number >= 1"),
])
def test_other_builtin_params_are_checked_at_load(reward: str, params: dict[str, object],
                                                  message: str) -> None:
    with pytest.raises(RubricError, match=message):
        Rubric([Component("c", reward, params=params)])


def test_good_params_still_load_and_score() -> None:
    rubric = Rubric([Component("r", "regex", params={"pattern": r"#### \d+", "flags": "i"}),
                     Component("m", "marker", params={"marker": "####", "max_count": 2}),
                     Component("n", "length", params={"max_length": 10, "buffer": 0})])
    with Engine(rubric, workers=0) as engine:
        [score] = engine.score([Rollout("1", "g", "q", "#### 72", "72")])
    assert score.components == {"r": 1.0, "m": 1.0, "n": 0.0}


# ---------------------------------------------------------------- formulas


@pytest.mark.parametrize(("formula", "divisor"), [
    ("a / 0", "0"),
    ("a / (1 - 1)", "1 - 1"),
    ("a / min(0, 3)", "min(0, 3)"),
    ("(a + b) / (2 * 0.5 - 1)", "2 * 0.5 - 1"),
    ("a / -0.0", "-0.0"),
    ("a / 1e-400", "1e-400"),  # a literal that is 0.0 once read
    ("b + 1 / abs(0)", "abs(0)"),
])
def test_a_division_by_a_constant_zero_is_refused(formula: str, divisor: str) -> None:
    with pytest.raises(RubricError) as caught:
        Rubric([Component("a", "marker"), Component("b", "marker")], formula=formula)
    assert f"divides by zero: {divisor!r} is 0 whatever the components score" in str(caught.value)


def test_a_division_by_a_component_is_decided_per_rollout() -> None:
    rubric = Rubric([Component("a", "marker"), Component("b", "marker")], formula="a / (b - b)")
    reward, status, _, errors, _ = rubric.combine({"a": ComponentResult(1.0),
                                                   "b": ComponentResult(1.0)})
    assert reward is None and status is Status.ERROR and "division by zero" in errors["formula"]
    assert Rubric([Component("a", "marker")], formula="a / 4 + 1 / 2").combine(
        {"a": ComponentResult(1.0)})[0] == 0.75


@pytest.mark.parametrize(("name", "suggestion"), [
    ("my-comp", "my_comp"),
    ("2x", "c_2x"),
    ("lambda", "lambda_"),
    ("if", "if_"),
    ("has space", "has_space"),
    ("ﬁnal", "final"),  # Python reads the ligature as 'fi'
])
def test_a_name_a_formula_cannot_use_is_refused(tmp_path: Path, name: str,
                                                suggestion: str) -> None:
    path = write(tmp_path, f"components:\n  '{name}': {{reward: marker}}\n  other: gsm8k\n"
                           f"formula: other + 1\n")
    with pytest.raises(RubricError) as caught:
        Rubric.from_yaml(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: components.{name}: a formula cannot refer to the name "
                              f"{name!r}: ")
    assert f"rename the component, for example to {suggestion!r}" in message


def test_the_suggested_name_is_not_one_already_taken() -> None:
    with pytest.raises(RubricError, match=r"for example to 'my_comp_2'"):
        Rubric([Component("my-comp", "marker"), Component("my_comp", "marker")],
               formula="my_comp")


def test_such_names_are_fine_without_a_formula() -> None:
    rubric = Rubric([Component("my-comp", "marker"), Component("2x", "marker")])
    assert rubric.names == ["my-comp", "2x"]
    assert Rubric([Component("café", "marker")], formula="2 * café").names == ["café"]


# ---------------------------------------------------------------- where file rewards are found


REWARD = "def graded(completion):\n    return {value}\n"


def test_a_relative_file_is_found_next_to_the_rubric(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    write(project / "helpers", REWARD.format(value=0.25), "mine.py")
    path = write(project, "components:\n  mine: {reward: 'helpers/mine.py:graded'}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    rubric = Rubric.from_yaml(path)
    assert rubric.components[0].spec == "helpers/mine.py:graded"
    # Worker processes import it by its absolute path, from any working directory.
    assert rubric.components[0].reward == f"{(project / 'helpers' / 'mine.py').resolve()}:graded"
    with Engine(rubric, workers=1) as engine:
        [score] = engine.score([Rollout("1", "g", "q", "text", None)])
    assert score.status is Status.OK and score.reward == 0.25


def test_the_rubric_folder_comes_before_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    write(project / "helpers", REWARD.format(value=0.25), "mine.py")
    path = write(project, "components:\n  mine: {reward: 'helpers/mine.py:graded'}\n")
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere / "helpers", REWARD.format(value=0.75), "mine.py")
    monkeypatch.chdir(elsewhere)
    with Engine(Rubric.from_yaml(path), workers=0) as engine:
        [score] = engine.score([Rollout("1", "g", "q", "text", None)])
    assert score.reward == 0.25
    # Only in the working directory: found there.
    (project / "helpers" / "mine.py").unlink()
    with Engine(Rubric.from_yaml(path), workers=0) as engine:
        [score] = engine.score([Rollout("1", "g", "q", "text", None)])
    assert score.reward == 0.75


def test_a_file_in_neither_place_names_both(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    path = write(project, "components:\n  mine: {reward: 'helpers/missing.py:graded'}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(LoadError) as caught:
        Rubric.from_yaml(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: components.mine: ")
    assert str((project / "helpers" / "missing.py").resolve()) in message
    assert str((elsewhere / "helpers" / "missing.py").resolve()) in message
    assert re.search(r"rubric's folder .* then in the working directory", message)
