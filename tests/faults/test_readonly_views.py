"""A reward cannot change what another reward, or a later rescore, sees.

Before: rewards were handed the rollout's own ``metadata`` dict, ``answer`` and the ``Rollout``
itself. A reward that wrote ``metadata["unlocked"] = True`` made every later reward of that
rollout see it, and the store kept the edited fields: ``rescore`` then gave 1.0 where scoring
the same file from scratch gave 0.0.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import Component, Engine, Rollout, Rubric, group_reward
from rewardsmith.frozen import FrozenDict, FrozenList, freeze
from rewardsmith.types import RolloutView, content_json_of, stable_json

CLI = [sys.executable, "-m", "rewardsmith"]

# The policy's reward module: one reward tampers (and hides it), the other reads the field.
TAMPERING = """
def tamper(metadata, answer):
    try:
        metadata["unlocked"] = True
    except Exception:
        pass
    try:
        answer["value"] = "anything"
    except Exception:
        pass
    return 0.0

def check(metadata, answer, completion):
    if metadata.get("unlocked"):
        return 1.0
    return 1.0 if completion.strip() == answer["value"] else 0.0
"""


def cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def rewards_of(path: Path, name: str) -> dict[str, float]:
    return {s["id"]: s["components"][name]
            for s in map(json.loads, path.read_text().splitlines())}


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_reward_that_edits_metadata_changes_nothing_for_rescore(tmp_path: Path,
                                                                  workers: str) -> None:
    (tmp_path / "policy.py").write_text(TAMPERING, encoding="utf-8")
    lines = [{"id": str(i), "group": str(i // 2), "completion": "no",
              "answer": {"value": "yes"}, "metadata": {"source": "test"}} for i in range(6)]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    both = tmp_path / "both.yaml"
    both.write_text("components:\n  tamper: {reward: policy.py:tamper}\n"
                    "  check: {reward: policy.py:check}\n")
    alone = tmp_path / "alone.yaml"
    alone.write_text("components:\n  check: {reward: policy.py:check, version: again}\n")

    cli("score", "r.jsonl", "-r", alone, "-o", "scratch.jsonl", "--no-store", "-w", workers,
        cwd=tmp_path)
    cli("score", "r.jsonl", "-r", both, "-o", "first.jsonl", "--store", "s.db", "-w", workers,
        cwd=tmp_path)
    cli("rescore", "-s", "s.db", "-r", alone, "-o", "again.jsonl", "-w", workers, cwd=tmp_path)

    scratch = rewards_of(tmp_path / "scratch.jsonl", "check")
    assert set(scratch.values()) == {0.0}
    assert rewards_of(tmp_path / "first.jsonl", "check") == scratch
    assert rewards_of(tmp_path / "again.jsonl", "check") == scratch


def test_rewards_in_one_process_see_the_rollout_as_given() -> None:
    seen: list[Any] = []

    def rewrite_rollout(rollout: Rollout) -> float:
        rollout.answer = "4"  # AttributeError: this call's own error
        return 1.0

    def append_turn(rollout: Rollout) -> float:
        rollout.completion.append({"role": "assistant", "content": "4"})  # TypeError
        return 1.0

    def edit_metadata(metadata: dict[str, Any]) -> float:
        metadata["seen"] = True  # TypeError
        return 1.0

    @group_reward
    def edit_group(rollouts: list[Rollout], metadatas: list[dict[str, Any]]) -> list[float]:
        for rollout, metadata in zip(rollouts, metadatas, strict=True):
            for target in (rollout.metadata, metadata):
                try:
                    target["group_seen"] = 1
                except TypeError:
                    pass
        return [0.0] * len(rollouts)

    def record(rollout: Rollout, metadata: dict[str, Any], answer: Any) -> float:
        seen.append((rollout.answer, dict(metadata), answer, rollout.text))
        return 1.0 if rollout.answer == "3" else 0.0

    rubric = Rubric([Component("rewrite", rewrite_rollout), Component("append", append_turn),
                     Component("edit", edit_metadata), Component("group", edit_group),
                     Component("record", record)])
    given = {"k": "v"}
    messages = [{"role": "user", "content": "1+2?"}, {"role": "assistant", "content": "3"}]
    rollouts = [Rollout("a", "g", "1+2?", messages, "3", given)]
    with Engine(rubric, workers=0) as engine:
        (score,) = engine.score(rollouts)
    assert score.components["record"] == 1.0
    assert seen == [("3", {"k": "v"}, "3", "3")]
    assert "read-only" in score.errors["rewrite"]
    assert "read-only" in score.errors["append"]
    assert "read-only" in score.errors["edit"]
    assert given == {"k": "v"} and len(messages) == 2  # the caller's own objects too
    assert rollouts[0].answer == "3" and rollouts[0].metadata == {"k": "v"}


def test_frozen_values_behave_as_dicts_and_lists() -> None:
    value = freeze({"tests": [{"input": "1", "output": ["2"]}], "n": 3, "t": ({"a": 1},)})
    assert isinstance(value, dict) and isinstance(value["tests"], list)
    # Messages that name a value's type ("the answer is a dict, not text") read as before.
    assert type(value).__name__ == "dict" and type(value["tests"]).__name__ == "list"
    assert type(value["tests"][0]["output"]) is FrozenList
    assert type(value["t"]) is tuple and type(value["t"][0]) is FrozenDict
    assert json.loads(json.dumps(value)) == {"tests": [{"input": "1", "output": ["2"]}], "n": 3,
                                             "t": [{"a": 1}]}
    for change in (lambda: value.update(n=4), lambda: value.setdefault("x", 1),
                   lambda: value.pop("n"), lambda: value.clear(), lambda: value.__delitem__("n"),
                   lambda: value["tests"].append(1), lambda: value["tests"].sort(),
                   lambda: value["tests"][0].__setitem__("input", "9"),
                   lambda: value["tests"].__iadd__([1])):
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert value == {"tests": [{"input": "1", "output": ["2"]}], "n": 3, "t": ({"a": 1},)}
    mutable = dict(value)
    mutable["n"] = 4  # a copy is the reward's own
    assert value["n"] == 3
    for again in (pickle.loads(pickle.dumps(value)), copy.deepcopy(value), copy.copy(value)):
        assert again == value and type(again) is FrozenDict
        assert type(again["tests"][0]) is FrozenDict


def test_a_rollout_freezes_what_it_is_given_and_keeps_its_content_key() -> None:
    metadata = {"tags": ["a", "b"], "nested": {"n": 1}}
    answer = {"instruction_id_list": ["x"], "kwargs": [{}]}
    rollout = Rollout("1", "g", [{"role": "user", "content": "q"}], "c", answer, metadata)
    # The same content (and so the same store key) as the plain values it was given.
    assert rollout.content_json() == content_json_of(
        [{"role": "user", "content": "q"}], "c", answer, metadata, False)
    assert rollout.content_json() == stable_json(
        [[{"role": "user", "content": "q"}], "c", answer, metadata, False])
    metadata["tags"].append("c")  # the caller's dict is its own, not the rollout's
    assert rollout.metadata["tags"] == ["a", "b"]
    view = rollout.view()
    assert isinstance(view, RolloutView) and isinstance(view, Rollout)
    with pytest.raises(AttributeError, match="read-only"):
        view.metadata = {}
    with pytest.raises(AttributeError, match="read-only"):
        del view.answer
    fresh = dataclasses.replace(view, answer="new")  # what the error message advises
    assert type(fresh) is Rollout and fresh.answer == "new" and fresh.metadata == rollout.metadata
    assert type(pickle.loads(pickle.dumps(view))) is Rollout
    assert pickle.loads(pickle.dumps(view)) == rollout
    replaced = dataclasses.replace(rollout, answer={"x": [1]})
    assert type(replaced.answer["x"]) is FrozenList
    assert pickle.loads(pickle.dumps(rollout)) == rollout
