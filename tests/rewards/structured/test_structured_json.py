"""``json_schema`` and ``json_match``: hand-labeled completions, metrics, and bad references."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rewardsmith.rewards.structured import json_match, json_schema

SCHEMA = {"type": "object", "required": ["name", "age"], "additionalProperties": False,
          "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}}}


@pytest.mark.parametrize(("completion", "reward", "parse_error", "schema_error"), [
    ('{"name": "Ada", "age": 36}', 1.0, 0.0, 0.0),
    ('  {"age": 36, "name": "Ada"}\n', 1.0, 0.0, 0.0),
    ('Here it is:\n```json\n{"name": "Ada", "age": 36}\n```', 1.0, 0.0, 0.0),
    ('```json\n{"name": 1}\n```\nfixed:\n```\n{"name": "Ada", "age": 36}\n```', 1.0, 0.0, 0.0),
    ('```json\n{"name": "Ada", "age": 36}\n```\nno wait:\n```json\n{"name": 1}\n```', 0.0, 0.0,
     1.0),  # the last block is the answer
    ('{"name": "Ada", "age": -1}', 0.0, 0.0, 1.0),
    ('{"name": "Ada", "age": 36, "extra": true}', 0.0, 0.0, 1.0),
    ('{"name": "Ada", "age": 36.5}', 0.0, 0.0, 1.0),
    ("{}", 0.0, 0.0, 1.0),
    ('{"name": "Ada", "age": NaN}', 0.0, 1.0, 0.0),  # NaN is not JSON
    ('{"name": "Ada", "age": 36}{"name": "Bob", "age": 1}', 0.0, 1.0, 0.0),  # two glued
    ('{"name": "Ada", "age": 3', 0.0, 1.0, 0.0),
    ("", 0.0, 1.0, 0.0),
    ("The name is Ada and the age is 36.", 0.0, 1.0, 0.0),
])
def test_json_schema(completion: str, reward: float, parse_error: float,
                     schema_error: float) -> None:
    result = json_schema(completion, schema=SCHEMA)
    assert result == {"reward": reward, "parse_error": parse_error, "schema_error": schema_error}


def test_json_schema_from_the_answer_or_params() -> None:
    good = '{"name": "Ada", "age": 36}'
    assert json_schema(good, answer=SCHEMA)["reward"] == 1.0
    assert json_schema(good, answer=json.dumps(SCHEMA))["reward"] == 1.0
    assert json_schema(good, answer={"schema": SCHEMA})["reward"] == 1.0
    # params win over the answer
    assert json_schema(good, answer={"type": "array"}, schema=SCHEMA)["reward"] == 1.0


@pytest.mark.parametrize(("answer", "schema", "message"), [
    (None, None, "must be an object, got NoneType"),
    ("not json", None, "the schema in the answer is not JSON"),
    ([1, 2], None, "must be an object, got list"),
    (None, {"type": "no-such-type"}, "not a valid JSON Schema"),
    (None, {"minimum": "zero"}, "not a valid JSON Schema"),
])
def test_json_schema_bad_schemas_are_errors(answer: Any, schema: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        json_schema('{"a": 1}', answer=answer, schema=schema)


EXPECTED = {"name": "Ada", "born": 1815, "tags": ["math", "poetry"], "meta": {"ok": True}}


@pytest.mark.parametrize(("completion", "reward", "matched"), [
    ('{"meta": {"ok": true}, "tags": ["math", "poetry"], "born": 1815.0, "name": "Ada"}', 1.0,
     5),
    ('{"name": "Ada", "born": 1815, "tags": ["math", "poetry"], "meta": {"ok": true}, '
     '"extra": 1}', 1.0, 5),  # extra fields are free by default
    ('{"name": "Ada", "born": "1815", "tags": ["math", "poetry"], "meta": {"ok": true}}', 0.8,
     4),  # a string is not the number
    ('{"name": "Ada", "born": 1815, "tags": ["poetry", "math"], "meta": {"ok": 1}}', 0.4, 2),
    ('{"name": "Ada"}', 0.2, 1),
    ("{}", 0.0, 0),
    ('```json\n{"name": "Ada", "born": 1815, "tags": ["math", "poetry"], "meta": {"ok": true}}'
     '\n```', 1.0, 5),
])
def test_json_match_partial_credit(completion: str, reward: float, matched: int) -> None:
    result = json_match(completion, EXPECTED)
    assert result["reward"] == pytest.approx(reward)
    assert result["fields_matched"] == matched and result["fields_total"] == 5
    assert result["parse_error"] == 0.0


def test_json_match_options_and_failures() -> None:
    exact = json.dumps(EXPECTED)
    extra = json.dumps({**EXPECTED, "extra": 1})
    assert json_match(extra, EXPECTED, allow_extra=False)["reward"] == pytest.approx(5 / 6)
    assert json_match(exact, EXPECTED, allow_extra=False)["reward"] == 1.0
    assert json_match('{"name": "Ada"}', EXPECTED, partial=False)["reward"] == 0.0
    assert json_match(exact, EXPECTED, partial=False)["reward"] == 1.0
    assert json_match(exact, json.dumps(EXPECTED))["reward"] == 1.0  # answer as a JSON string
    broken = json_match('{"name": "Ada"', EXPECTED)
    assert broken == {"reward": 0.0, "parse_error": 1.0, "fields_matched": 0.0,
                      "fields_total": 5.0}
    assert json_match("[1, 2]", [1, 2])["reward"] == 1.0
    assert json_match("true", 1)["reward"] == 0.0  # a boolean is never a number
    assert json_match('{"a": {}}', {"a": {}})["reward"] == 1.0
    assert json_match('{"a": {"b": 1}}', {"a": {}})["reward"] == 0.0
    with pytest.raises(ValueError, match="expected value .* is missing"):
        json_match("{}", None)
    with pytest.raises(ValueError, match="is a string but not JSON"):
        json_match("{}", "{oops")


def test_bad_params_stop_the_rubric_at_load() -> None:
    from rewardsmith import Component, Rubric, RubricError

    def load(reward: str, params: dict[str, Any]) -> None:
        Rubric([Component("c", reward, params=params)])

    load("json_schema", {"schema": SCHEMA})
    load("ifeval", {"loose": True, "mode": "all"})
    with pytest.raises(RubricError, match="not a valid JSON Schema"):
        load("json_schema", {"schema": {"type": "no-such-type"}})
    with pytest.raises(RubricError, match="partial must be true or false"):
        load("json_match", {"partial": "yes"})
    with pytest.raises(RubricError, match="order_free must be true or false"):
        load("tool_call", {"order_free": 1})
    with pytest.raises(RubricError, match="mode must be 'fraction' or 'all'"):
        load("ifeval", {"mode": "most"})
    with pytest.raises(RubricError, match="loose must be true or false"):
        load("ifeval", {"loose": "true"})
