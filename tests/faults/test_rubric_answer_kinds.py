"""An answer of the wrong kind (a dict, a list inside the list, bytes) is the label's error.

Before, ``{"x": 42}`` was graded as its repr, and its repr "contains" 42: a silent 1.0.
"""

from __future__ import annotations

from typing import Any

import pytest

from rewardsmith import Engine, Rollout, Rubric
from rewardsmith.rubric._model import Component
from rewardsmith.types import Status

ANSWER_BUILTINS = ["gsm8k", "number", "exact", "normalized", "f1", "choice"]
ALL = ANSWER_BUILTINS + [f"boxed_{name}" for name in ANSWER_BUILTINS]


def score_one(answer: Any, completion: str = "The answer is B. #### 42 \\boxed{42}") -> dict[
        str, tuple[Status, float | None, str]]:
    rubric = Rubric([Component(name, name) for name in ALL])
    with Engine(rubric, workers=0) as engine:
        [score] = engine.score([Rollout("1", "g", "q", completion, answer)])
    return {name: (Status.OK if name not in score.errors else Status.ERROR,
                   score.components[name], score.errors.get(name, ""))
            for name in ALL}


@pytest.mark.parametrize(("answer", "kind", "shown"), [
    ({"x": 42}, "a dict,", "{'x': 42}"),
    ({"answer": "B"}, "a dict,", "{'answer': 'B'}"),
    ([[42]], "a list inside the list of answers", "[42]"),
    (["41", {"x": 42}], "a dict inside the list of answers", "{'x': 42}"),
    (b"42", "a bytes,", "b'42'"),
])
def test_a_wrong_kind_of_answer_is_an_error_naming_the_label(answer: Any, kind: str,
                                                              shown: str) -> None:
    results = score_one(answer)
    for name, (status, value, error) in results.items():
        assert status is Status.ERROR and value is None, (name, results[name])
        base = name.removeprefix("boxed_")
        assert f"{base}: the reference answer (label) {shown} is {kind}" in error, error
        assert "not text or a number" in error


def test_the_whole_rollout_is_an_error_not_a_zero() -> None:
    rubric = Rubric([Component("correct", "gsm8k")])
    with Engine(rubric, workers=0) as engine:
        [score] = engine.score([Rollout("1", "g", "q", "#### 42", {"value": 42})])
    assert score.status is Status.ERROR and score.reward is None
    assert "dict" in score.errors["correct"]


@pytest.mark.parametrize(("answer", "expected"), [
    ("42", 1.0), (42, 1.0), (42.0, 1.0), (["41", "42"], 1.0), ([41, 43], 0.0), ("B", 1.0),
])
def test_text_numbers_and_lists_of_them_still_grade(answer: Any, expected: float) -> None:
    rubric = Rubric([Component("n", "gsm8k" if answer != "B" else "choice")])
    completion = "#### 42" if answer != "B" else "The answer is B."
    with Engine(rubric, workers=0) as engine:
        [score] = engine.score([Rollout("1", "g", "q", completion, answer)])
    assert score.status is Status.OK and score.reward == expected
