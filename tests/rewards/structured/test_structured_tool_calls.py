"""``tool_call``: OpenAI-format calls in messages or JSON text against the expected calls."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rewardsmith import Component, Rollout, Rubric, Status, score_rollouts
from rewardsmith.rewards.structured import read_calls, tool_call

WEATHER = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
TIME = {"name": "get_time", "arguments": {"zone": "CET"}}


def _openai(name: str, arguments: Any) -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": f"call_{name}", "type": "function",
            "function": {"name": name, "arguments": text}}


def _messages(*calls: dict[str, Any], content: Any = None) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "Weather and time in Paris?"},
            {"role": "assistant", "content": content, "tool_calls": list(calls)}]


def score(completion: Any, answer: Any, **params: Any) -> dict[str, float]:
    return tool_call(Rollout(id="r", group="g", completion=completion, answer=answer), **params)


def test_openai_messages_in_any_order_with_numbers_by_value() -> None:
    made = _messages(_openai("get_time", {"zone": "CET"}),
                     _openai("get_weather", {"days": 3.0, "city": "Paris"}))
    assert score(made, [WEATHER, TIME]) == {"reward": 1.0, "parse_error": 0.0,
                                            "calls_expected": 2.0, "calls_made": 2.0}
    assert score(made, [WEATHER, TIME], order_free=False)["reward"] == 0.0


@pytest.mark.parametrize(("completion", "reward"), [
    (json.dumps(WEATHER), 1.0),
    (json.dumps([WEATHER]), 1.0),
    (json.dumps({"tool_calls": [_openai("get_weather", WEATHER["arguments"])]}), 1.0),
    (json.dumps({"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}), 1.0),
    (f"<tool_call>\n{json.dumps(WEATHER)}\n</tool_call>", 1.0),
    (json.dumps({"name": "get_weather", "arguments": json.dumps(WEATHER["arguments"])}), 1.0),
    (json.dumps({"name": "get_weather", "arguments": {"city": "Paris", "days": 4}}), 0.5),
    (json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}}), 0.5),
    (json.dumps({"name": "get_weather", "arguments": {"city": "Paris", "days": 3,
                                                      "units": "C"}}), 2 / 3),
    (json.dumps({"name": "get_forecast", "arguments": WEATHER["arguments"]}), 0.0),
    (json.dumps({"name": "get_weather", "arguments": "{not json"}), 0.0),
    ("It is sunny in Paris.", 0.0),  # prose: no call made
    ("", 0.0),
])
def test_calls_written_as_text(completion: str, reward: float) -> None:
    assert score(completion, [WEATHER])["reward"] == pytest.approx(reward)


def test_missing_and_surplus_calls_both_cost() -> None:
    one = json.dumps(WEATHER)
    assert score(one, [WEATHER, TIME])["reward"] == 0.5
    three = json.dumps([WEATHER, TIME, {"name": "get_time", "arguments": {"zone": "UTC"}}])
    assert score(three, [WEATHER, TIME])["reward"] == pytest.approx(2 / 3)
    # Every candidate city called: the one right call is a third of the credit.
    every = json.dumps([{"name": "get_weather", "arguments": {"city": c, "days": 3}}
                        for c in ("London", "Paris", "Rome")])
    assert score(every, [WEATHER])["reward"] == pytest.approx(1 / 3)
    assert score(every, [WEATHER], partial=False)["reward"] == 0.0


def test_no_call_expected() -> None:
    assert score("The answer is 4.", [])["reward"] == 1.0
    assert score(_messages(content="The answer is 4."), json.dumps([]))["reward"] == 1.0
    assert score(json.dumps(WEATHER), [])["reward"] == 0.0


def test_loose_types_accept_numbers_written_as_strings() -> None:
    text = json.dumps({"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}})
    assert score(text, [WEATHER])["reward"] == 0.5
    assert score(text, [WEATHER], loose_types=True)["reward"] == 1.0
    flag = {"name": "set", "arguments": {"on": True}}
    assert score(json.dumps({"name": "set", "arguments": {"on": "true"}}), [flag],
                 loose_types=True)["reward"] == 1.0
    assert score(json.dumps({"name": "set", "arguments": {"on": 1}}), [flag],
                 loose_types=True)["reward"] == 0.0  # 1 is not true


def test_unreadable_calls_and_answers() -> None:
    assert score('{"name": "get_weather", "arguments": ', [WEATHER])["parse_error"] == 1.0
    assert score("{}", [WEATHER])["parse_error"] == 1.0  # a call without a name
    with pytest.raises(ValueError, match="expected calls .* are missing"):
        score(json.dumps(WEATHER), None)
    with pytest.raises(ValueError, match="expected calls are unreadable"):
        score(json.dumps(WEATHER), "{oops")
    with pytest.raises(ValueError, match="arguments are not a JSON object"):
        score(json.dumps(WEATHER), [{"name": "f", "arguments": "[1]"}])


def test_legacy_function_call_and_content_parts() -> None:
    legacy = [{"role": "assistant", "content": None,
               "function_call": {"name": "get_weather", "arguments": json.dumps(
                   WEATHER["arguments"])}}]
    assert read_calls(legacy)[0].name == "get_weather"
    parts = [{"role": "assistant", "content": [{"type": "text", "text": json.dumps(WEATHER)}]}]
    assert score(parts, [WEATHER])["reward"] == 1.0


def test_tool_call_through_a_rubric_and_the_engine() -> None:
    rubric = Rubric([Component("calls", "tool_call")])
    rollouts = [
        Rollout(id="right", group="g", completion=_messages(_openai("get_weather", {
            "city": "Paris", "days": 3})), answer=[WEATHER]),
        Rollout(id="text", group="g", completion=json.dumps(WEATHER), answer=json.dumps([WEATHER])),
        Rollout(id="wrong", group="g", completion=json.dumps(TIME), answer=[WEATHER]),
        Rollout(id="no-answer", group="g", completion=json.dumps(TIME), answer=None),
    ]
    scores = {s.id: s for s in score_rollouts(rubric, rollouts, workers=0)}
    assert scores["right"].reward == 1.0 and scores["text"].reward == 1.0
    assert scores["wrong"].reward == 0.0
    assert scores["no-answer"].status is Status.ERROR
    assert "expected calls (the answer) are missing" in scores["no-answer"].errors["calls"]
