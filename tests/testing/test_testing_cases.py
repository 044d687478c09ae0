"""The cases file of ``rewardsmith test``: expectations, bad lines by number, the starter file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewardsmith.errors import ConfigError, InputError
from rewardsmith.testing import Expectation, load_cases, parse_expected, write_starter_cases
from rewardsmith.testing.cases import cases_range, starter_path
from rewardsmith.types import Status


@pytest.mark.parametrize("value, expected", [
    (1, Expectation("value", 1.0, 1.0)),
    (0.5, Expectation("value", 0.5, 0.5)),
    ([0, 0.5], Expectation("range", 0.0, 0.5)),
    ([None, 0], Expectation("range", None, 0.0)),
    ({"min": 0.2}, Expectation("range", 0.2, None)),
    ({"min": 0, "max": 1}, Expectation("range", 0.0, 1.0)),
    ([None, None], Expectation("any")),
    ("error", Expectation("error")),
    ("masked", Expectation("masked")),
    ("any", Expectation("any")),
])
def test_expected_accepts_a_value_a_range_or_a_status(value: object,
                                                      expected: Expectation) -> None:
    assert parse_expected(value) == expected


@pytest.mark.parametrize("value, message", [
    (True, "must be a number"),
    (None, "must be a number"),
    ("1", "must be a number"),
    ([1], "two bounds"),
    ([1, 0], "range is empty"),
    ({"low": 0}, "'min' and/or 'max'"),
    (float("nan"), "finite"),
    ([0, "1"], "finite number or null"),
])
def test_a_bad_expected_says_what_is_accepted(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_expected(value)


def test_expectations_match_values_ranges_and_statuses() -> None:
    assert Expectation("value", 1.0, 1.0).matches(Status.OK, 1.0 + 1e-12)
    assert not Expectation("value", 1.0, 1.0).matches(Status.OK, 0.999)
    assert not Expectation("value", 0.0, 0.0).matches(Status.ERROR, None)
    assert Expectation("range", None, 0.5).matches(Status.OK, -3.0)
    assert not Expectation("range", 0.0, 0.5).matches(Status.OK, 0.6)
    assert Expectation("error").matches(Status.ERROR, None)
    assert not Expectation("error").matches(Status.OK, 0.0)
    assert Expectation("masked").matches(Status.MASKED, None)
    assert Expectation("any").matches(Status.OK, 123.0)


def test_cases_use_the_rollout_field_names_and_aliases(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join([
        json.dumps({"response": "so 4", "label": 4, "expected": 1, "note": "alias"}),
        "",
        json.dumps({"completion": [{"role": "assistant", "content": "4"}], "answer": "4",
                    "prompt": "2+2?", "truncated": True, "metadata": {"src": "x"},
                    "expected": [0, 1]}),
    ]) + "\n", encoding="utf-8")
    first, second = load_cases(path)
    assert first.rollout.text == "so 4" and first.rollout.answer == 4
    assert first.name == "line 1: alias" and first.line == 1
    assert second.line == 3 and second.rollout.truncated and second.rollout.prompt == "2+2?"
    assert second.rollout.metadata == {"src": "x"}  # 'expected' and 'note' are not metadata
    assert cases_range([first, second]) == (0.0, 1.0)


def test_every_bad_line_is_reported_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join([
        json.dumps({"completion": "ok", "answer": "1", "expected": 1}),
        "{not json",
        json.dumps({"completion": "no expected", "answer": "1"}),
        json.dumps({"completion": "x", "answer": "1", "expected": "yes"}),
        json.dumps(["a list"]),
        json.dumps({"answer": "1", "expected": 0}),
    ]) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_cases(path)
    message = str(caught.value)
    assert message.startswith("5 unreadable line(s)")
    for line, reason in [(2, "not valid JSON"), (3, "missing 'expected'"),
                         (4, "must be a number"), (5, "expected a JSON object"),
                         (6, "missing 'completion'")]:
        assert f"{path}:{line}: " in message and reason in message
    assert f"{path}:1:" not in message


def test_an_empty_or_missing_cases_file_is_an_input_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="holds no cases"):
        load_cases(empty)
    with pytest.raises(InputError, match="does not exist"):
        load_cases(tmp_path / "missing.jsonl")


def test_the_starter_file_has_the_ten_case_checklist_and_is_never_overwritten(
        tmp_path: Path) -> None:
    path = write_starter_cases(tmp_path / "my_rewards.cases.jsonl")
    cases = load_cases(path)
    notes = " | ".join(case.note for case in cases)
    assert len(cases) == 10
    for word in ("correct", "wrong", "empty", "whitespace", "truncated", "long", "unicode",
                 "missing label", "almost right", "hack"):
        assert word in notes
    before = path.read_bytes()
    with pytest.raises(ConfigError, match="already exists; not overwritten"):
        write_starter_cases(path)
    assert path.read_bytes() == before


@pytest.mark.parametrize("target, expected", [
    ("my_rewards.py", "my_rewards.cases.jsonl"),
    ("lab/my_rewards.py:score", "lab/my_rewards.cases.jsonl"),
    ("my_rewards", "my_rewards.cases.jsonl"),
    ("rubric.yaml", "rubric.cases.jsonl"),
])
def test_the_starter_file_sits_next_to_the_reward(target: str, expected: str) -> None:
    assert starter_path(target) == Path(expected)
