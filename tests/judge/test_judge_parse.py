"""Judge parts that need no server: reply parsing, templates, config errors, record keys."""

from __future__ import annotations

import json
import re
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardsmith import ConfigError, Rollout, Rubric, RubricError
from rewardsmith.judge import Criterion, Judge, JudgeConfig
from rewardsmith.judge.parse import last_json_object, parse_reply
from rewardsmith.judge.prompt import MissingField, Template

HELPFUL = Criterion(name="helpful", description="Does it help?")
TIDY = Criterion(name="tidy", description="Is it concise?", range=(1, 5))


def config(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "base_url": "http://127.0.0.1:9/v1", "model": "judge-2024-01-01",
        "template": "Q: {prompt}\nA: {completion}",
        "criteria": {"helpful": "Does it help?", "tidy": {"description": "Concise?"}},
    }
    base.update(overrides)
    return base


# ---------------------------------------------------------------- parsing replies


def test_plain_json_reply() -> None:
    assert parse_reply('{"helpful": 0.25, "tidy": 3}', [HELPFUL, TIDY]) == {
        "helpful": 0.25, "tidy": 3.0}


def test_json_inside_prose_takes_the_last_top_level_object() -> None:
    text = ('First thought {"helpful": 0.1, "tidy": 1}. On reflection:\n```json\n'
            '{"helpful": 0.9, "tidy": 4, "notes": {"helpful": 0}}\n```\nDone {not json}.')
    assert parse_reply(text, [HELPFUL, TIDY]) == {"helpful": 0.9, "tidy": 4.0}


def test_unparseable_reply_is_an_error_naming_the_reply_never_zero() -> None:
    grades = parse_reply('{"helpful": 0.5, "tidy":', [HELPFUL, TIDY])
    assert all(isinstance(v, str) and "no JSON object" in v for v in grades.values())
    assert "helpful" in str(grades["helpful"])  # the raw reply is quoted


@pytest.mark.parametrize(("raw", "problem"), [
    (1.5, "outside its range [0, 1]"),
    (-0.01, "outside its range"),
    (True, "not a number"),
    ("high", "not a number"),
    (None, "not a number"),
    ([0.5], "not a number"),
])
def test_bad_grades_are_errors_for_that_criterion(raw: Any, problem: str) -> None:
    grades = parse_reply(json.dumps({"helpful": raw, "tidy": 2}), [HELPFUL, TIDY])
    assert problem in str(grades["helpful"])
    assert grades["tidy"] == 2.0  # the other criterion stands on its own


def test_missing_criterion_and_loose_spellings() -> None:
    grades = parse_reply('{"Helpful": "0.5"}', [HELPFUL, TIDY])
    assert grades["helpful"] == 0.5
    assert "no 'tidy'" in str(grades["tidy"])
    assert "not a finite" in str(parse_reply('{"helpful": NaN}', [HELPFUL])["helpful"])


grade_values = st.floats(min_value=0, max_value=1, allow_nan=False)
prose = st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=60)


@settings(max_examples=150, deadline=None)
@given(helpful=grade_values, tidy=st.floats(min_value=1, max_value=5), before=prose, after=prose)
def test_any_in_range_grades_survive_prose_around_them(helpful: float, tidy: float,
                                                       before: str, after: str) -> None:
    text = before + json.dumps({"helpful": helpful, "tidy": tidy}) + after
    assert parse_reply(text, [HELPFUL, TIDY]) == {"helpful": helpful, "tidy": tidy}


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_never_raises_and_never_invents_a_grade(text: str) -> None:
    grades = parse_reply(text, [HELPFUL])
    value = grades["helpful"]
    if isinstance(value, float):
        found = last_json_object(text) or json.loads(text)
        assert 0 <= value <= 1 and isinstance(found, dict)


# ---------------------------------------------------------------- templates


def test_template_reads_fields_and_metadata_keys() -> None:
    template = Template("{prompt}|{completion}|{answer}|{difficulty}|{{literal}}")
    rollout = Rollout("r", "g", [{"role": "user", "content": "hi"}], "ans", 42,
                      {"difficulty": "hard"})
    values = template.values(rollout)
    assert values == {"prompt": "hi", "completion": "ans", "answer": "42", "difficulty": "hard"}
    rendered = template.render(values, [HELPFUL])
    tag = re.search(r"<(response-[0-9a-f]{12})>", rendered)
    assert tag is not None
    assert rendered.startswith(f"hi|<{tag[1]}>\nans\n</{tag[1]}>|42|hard|{{literal}}\n\n"
                               f"Each graded response is")
    assert "\n\nCriteria:\n- helpful" in rendered
    with pytest.raises(MissingField, match="no metadata key 'difficulty'"):
        template.values(Rollout("r2", "g", "p", "c"))


def test_multi_turn_completion_is_shown_as_a_transcript() -> None:
    completion = [{"role": "assistant", "content": "call tool"},
                  {"role": "tool", "content": "42"}, {"role": "assistant", "content": "42"}]
    values = Template("{completion}").values(Rollout("r", "g", "p", completion))
    assert values["completion"] == "assistant: call tool\n\ntool: 42\n\nassistant: 42"


@pytest.mark.parametrize(("text", "message"), [
    ("Q: {prompt}", "never shows the completion"),
    ("{completoin} {completion}", "did you mean {completion}"),
    ("{} {completion}", "is not a field"),
    ("{0} {completion}", "is not a field"),
    ("{completion!r}", "format spec or conversion"),
    ("{completion:>10}", "format spec or conversion"),
    ("{metadata.x} {completion}", "not a plain field"),
    ('Reply like {"helpful": 1} {completion}', "not a plain field"),
    ("{completion", "literal braces"),
])
def test_template_mistakes_are_config_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("{", r"\{").replace("}", r"\}")):
        Template(text)


# ---------------------------------------------------------------- config


@pytest.mark.parametrize(("overrides", "message"), [
    ({"criteria": {"not valid": "x"}}, "valid identifier"),
    ({"criteria": {"tidy": {"description": "x", "range": [1, 0]}}}, "finite low < high"),
    ({"criteria": {}}, "at least one criterion"),
    ({"api_key_env": "sk-abc123"}, "NAME of an environment variable"),
    ({"base_url": "127.0.0.1:8000"}, "http"),
    ({"temperature": -1}, "temperature"),
    ({"budget": {"max_calls": -1}}, "budget.max_calls"),
    ({"colour": "blue"}, "unknown key 'colour'"),
    ({"template": "{answer}"}, "never shows the completion"),
])
def test_bad_judge_config_names_the_key(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(RubricError) as info:
        Rubric.from_dict({"components": {"quality": {"judge": config(**overrides)}}},
                         source="r.yaml")
    assert message in str(info.value)
    assert "r.yaml: components.quality" in str(info.value)
    assert "sk-abc123" not in str(info.value)


def test_rubric_keys_beside_judge() -> None:
    with pytest.raises(RubricError, match="unknown criteria"):
        Rubric.from_dict({"components": {"q": {"judge": config(), "weights": {"nope": 1}}}})
    with pytest.raises(RubricError, match="unknown key 'wieght'"):
        Rubric.from_dict({"components": {"q": {"judge": config(), "wieght": 1}}})
    with pytest.raises(RubricError, match="duplicate component"):
        Rubric.from_dict({"components": {"helpful": {"reward": "gsm8k"}, "q": {"judge": config()}}})
    rubric = Rubric.from_dict({"components": {
        "helpful": {"reward": "gsm8k"},
        "q": {"judge": config(), "prefix": True, "weight": 0.5, "weights": {"tidy": 2}}},
        "formula": "helpful + q_helpful * q_tidy"})
    assert [(c.name, c.weight) for c in rubric.components] == [
        ("helpful", 1.0), ("q_helpful", 0.5), ("q_tidy", 2.0)]


# ---------------------------------------------------------------- record keys


def keys_for(rollout: Rollout, **overrides: Any) -> dict[str, str]:
    return Judge("q", config(**overrides)).record_keys(rollout)


def test_record_keys_follow_content_not_location_or_secrets() -> None:
    rollout = Rollout("r", "g", "p", "c", metadata={"unused": 1})
    same = keys_for(rollout)
    assert keys_for(rollout, base_url="http://10.0.0.1:1/v1", api_key_env="OTHER",
                    max_concurrency=2, timeout=5, retries=0,
                    budget={"max_calls": 1}) == same
    assert keys_for(Rollout("other-id", "g2", "p", "c", metadata={"unused": 2})) == same
    changed = keys_for(rollout, criteria={"helpful": "Does it help?",
                                          "tidy": {"description": "Concise, really?"}})
    assert changed["helpful"] == same["helpful"] and changed["tidy"] != same["tidy"]
    for override in ({"model": "judge-2024-02-02"}, {"temperature": 0.5},
                     {"template": "Q: {prompt}\nA: {completion}!"}, {"system": "Be strict."}):
        assert set(keys_for(rollout, **override).values()).isdisjoint(same.values()), override
    assert keys_for(Rollout("r", "g", "p", "c2")) != same


def test_component_identity_ignores_weights_and_names() -> None:
    a = Judge("q", config()).components(weights={"tidy": 3})
    b = Judge("other", config()).components(prefix=True)
    assert [c.evaluator.identity() for c in a] == [c.evaluator.identity() for c in b]  # type: ignore[union-attr]


def test_python_config_object() -> None:
    cfg = JudgeConfig(base_url="http://127.0.0.1:1/v1/", model="m-2024-01-01",
                      template="{completion}", criteria=({"name": "ok", "description": "fine?"},))  # type: ignore[arg-type]
    assert cfg.base_url == "http://127.0.0.1:1/v1" and cfg.criterion_names == ["ok"]
    assert set(string.Formatter().parse(cfg.template)) == {("", "completion", "", None)}
