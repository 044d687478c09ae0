"""Rollout JSONL: aliases, defaults, bad lines with their numbers; scored JSONL round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rewardsmith import InputError, Score, Status, read_rollouts, read_scores, write_scores
from rewardsmith.files.rollouts import RolloutReader, rollout_from_dict


def test_aliases_and_defaults() -> None:
    r = rollout_from_dict({"response": "hi", "label": 3, "group_id": 7, "finish_reason": "length",
                           "data_source": "gsm8k"}, default_id="5")
    assert (r.id, r.group, r.text, r.answer, r.truncated) == ("5", "7", "hi", 3, True)
    assert r.metadata == {"data_source": "gsm8k"}  # unknown keys are kept as metadata
    r = rollout_from_dict({"completion": "x", "ground_truth": "y", "prompt_id": "p",
                           "status": "truncated"}, default_id="1")
    assert (r.answer, r.group, r.truncated) == ("y", "p", True)
    r = rollout_from_dict({"completion": "x", "group_index": 0}, default_id="1")
    assert r.group == "0"


def test_group_defaults_to_a_hash_of_the_prompt() -> None:
    a = rollout_from_dict({"prompt": "Q1", "completion": "x"}, default_id="1")
    b = rollout_from_dict({"prompt": "Q1", "completion": "y"}, default_id="2")
    c = rollout_from_dict({"prompt": "Q2", "completion": "y"}, default_id="3")
    assert a.group == b.group != c.group


def test_chat_messages() -> None:
    r = rollout_from_dict({
        "prompt": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"}],
        "completion": [{"role": "assistant", "content": "thinking"},
                       {"role": "tool", "content": "4"},
                       {"role": "assistant", "content": [{"type": "text", "text": "#### 4"}]}],
    }, default_id="1")
    assert r.text == "#### 4"  # the last assistant message is what is scored
    assert r.prompt_text == "2+2?"


def test_bad_lines_are_reported_with_numbers(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join([
        json.dumps({"completion": "fine"}),
        "{not json",
        json.dumps({"prompt": "no completion"}),
        json.dumps([1, 2]),
        json.dumps({"completion": 42}),
        json.dumps({"completion": "x", "metadata": "nope"}),
        json.dumps({"completion": "x", "truncated": "yes"}),
        "",
        json.dumps({"completion": "also fine"}),
    ]) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_rollouts(path)
    assert f"{path}:2: not valid JSON" in str(caught.value)
    reader = RolloutReader(str(path), on_bad_line="skip")
    good = list(reader.read(path))
    assert [r.text for r in good] == ["fine", "also fine"]
    assert [e.line for e in reader.bad_lines] == [2, 3, 4, 5, 6, 7]
    assert "missing 'completion' (or 'response')" in str(reader.bad_lines[1])
    assert good[1].id == "9"  # ids default to the line number


def test_missing_file() -> None:
    with pytest.raises(InputError, match="cannot open"):
        read_rollouts("/nonexistent/rollouts.jsonl")


def test_scored_round_trip(tmp_path: Path) -> None:
    scores = [Score("1", "g", 1.5, Status.OK, {"a": 1.0}, {}, {}, 0.25),
              Score("2", "g", None, Status.ERROR, {"a": None}, {"a": "boom"}),
              Score("3", "g", float("nan"), Status.OK, {"a": float("inf")})]
    path = tmp_path / "s.jsonl"
    write_scores(path, scores)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0] == {"id": "1", "group": "g", "reward": 1.5, "status": "ok",
                        "components": {"a": 1.0}, "errors": {}, "advantage": 0.25}
    assert lines[2]["reward"] is None  # never NaN in JSON
    back = read_scores(path)
    assert back[0] == scores[0] and back[1] == scores[1]


@given(st.dictionaries(st.sampled_from(["completion", "response", "prompt", "answer", "label",
                                        "group", "id", "metadata", "truncated", "other"]),
                       st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20),
                                 st.lists(st.integers(), max_size=3),
                                 st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))))
def test_any_object_is_a_rollout_or_a_value_error(data: dict[str, object]) -> None:
    try:
        rollout = rollout_from_dict(data, default_id="1")
    except ValueError:
        return
    assert isinstance(rollout.text, str) and isinstance(rollout.group, str)


def test_scored_lines_need_an_id_and_a_group(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"id": "1", "group": "g", "reward": 1}\n{"id": "2", "reward": 0}\n',
                    encoding="utf-8")
    with pytest.raises(InputError, match=r"s.jsonl:2: missing 'group'"):
        read_scores(path)
    path.write_text('{"id": "1", "group": "g", "reward": "high"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"s.jsonl:1: not a scored rollout"):
        read_scores(path)
