"""The agent rewards on real OpenAI-format trajectories: tool_calls, turn_budget, workspace_files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import Engine, Rubric, RubricError, Status
from rewardsmith.types import Rollout

TOOLS = [
    {"type": "function", "function": {
        "name": "search", "parameters": {
            "type": "object", "required": ["query"], "additionalProperties": False,
            "properties": {"query": {"type": "string", "minLength": 1},
                           "limit": {"type": "integer", "minimum": 1}}}}},
    {"name": "write_file", "parameters": {
        "type": "object", "required": ["path", "content"],
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}},
]


def call(name: str, arguments: Any, call_id: str) -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


def assistant(text: str = "", *calls: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def tool(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


GOOD = [
    {"role": "user", "content": "Which doc says the launch date? Save it to answer.txt."},
    assistant("", call("search", {"query": "launch date"}, "c1")),
    tool("c1", "doc-7: the launch is on 3 May"),
    assistant("", call("write_file", {"path": "answer.txt", "content": "3 May"}, "c2")),
    tool("c2", "ok"),
    assistant("Saved: the launch is on 3 May (doc-7)."),
]


def metric(result: Any, key: str) -> float:
    """A metric of a one-component result (metrics are named ``component.key``)."""
    [value] = [v for k, v in result.metrics.items() if k.endswith(f".{key}")]
    return float(value)


def score(rubric: Rubric, *rollouts: Rollout) -> list[Any]:
    with Engine(rubric, workers=0) as engine:
        return engine.score(list(rollouts))


def rollout(completion: Any, **metadata: Any) -> Rollout:
    return Rollout(id=f"r{id(completion)}", group="g", prompt="p", completion=completion,
                   metadata=metadata)


def one(reward: str, completion: Any, metadata: dict[str, Any] | None = None,
        **params: Any) -> Any:
    [result] = score(Rubric.single(reward, params=params), rollout(completion, **(metadata or {})))
    return result


def test_tool_calls_all_valid_and_each_kind_of_invalid_call() -> None:
    good = one("tool_calls", GOOD, {"tools": TOOLS})
    assert good.status is Status.OK and good.reward == 1.0
    assert metric(good, "calls") == 2 and metric(good, "valid") == 2
    bad = GOOD[:5] + [assistant("", call("search", {"query": ""}, "c3"),          # minLength
                                call("search", {"query": "x", "limit": 0}, "c4"),  # minimum
                                call("shell", {"cmd": "rm -rf /"}, "c5"),          # undeclared
                                call("search", "{not json", "c6"),                  # not JSON
                                call("search", {"query": "x", "extra": 1}, "c7"))]  # extra key
    result = one("tool_calls", bad, {"tools": TOOLS})
    assert metric(result, "calls") == 7 and metric(result, "valid") == 2
    assert metric(result, "unknown_tool") == 1 and metric(result, "bad_arguments") == 1
    assert metric(result, "schema_invalid") == 3
    assert result.reward == pytest.approx(2 / 7)
    assert one("tool_calls", bad, {"tools": TOOLS}, mode="all").reward == 0.0


def test_tool_calls_reads_tools_from_params_metadata_or_a_request_prompt() -> None:
    assert one("tool_calls", GOOD, tools=TOOLS).reward == 1.0
    assert one("tool_calls", GOOD, {"tools": json.dumps(TOOLS)}).reward == 1.0
    [result] = score(Rubric.single("tool_calls"),
                     Rollout(id="a", group="g", prompt={"messages": [], "tools": TOOLS},
                             completion=GOOD))
    assert result.reward == 1.0


def test_no_call_is_no_credit_and_no_declared_tools_is_the_tasks_error() -> None:
    words = [assistant("I know it: 3 May.")]
    assert one("tool_calls", words, {"tools": TOOLS}).reward == 0.0
    assert one("tool_calls", words, {"tools": TOOLS}, min_calls=0).reward == 1.0
    result = one("tool_calls", GOOD)
    assert result.status is Status.ERROR
    assert "no tools declared" in next(iter(result.errors.values()))


def test_tool_calls_params_are_checked_at_load() -> None:
    with pytest.raises(RubricError, match="mode"):
        Rubric.single("tool_calls", params={"mode": "most"})
    with pytest.raises(RubricError, match="not a valid JSON schema"):
        Rubric.single("tool_calls", params={"tools": [
            {"name": "f", "parameters": {"type": "no-such-type"}}]})
    with pytest.raises(RubricError, match="needs a 'name'"):
        Rubric.single("tool_calls", params={"tools": [{"parameters": {}}]})


@pytest.mark.parametrize(("assistant_turns", "expected"), [
    (1, 1.0), (2, 1.0), (3, 0.75), (4, 0.5), (5, 0.25), (6, 0.0), (9, 0.0)])
def test_turn_budget_falls_linearly_from_max_turns_to_zero_at(assistant_turns: int,
                                                              expected: float) -> None:
    trajectory = [assistant(f"step {i}") for i in range(assistant_turns)]
    result = one("turn_budget", trajectory, max_turns=2, zero_at=6)
    assert result.reward == expected and metric(result, "turns") == assistant_turns


def test_turn_budget_matches_the_efficiency_term_it_generalises() -> None:
    # max(0, 1 - (turns - 1) / D) with D documents: max_turns 1, zero_at D + 1.
    docs = 4
    for count in range(1, 8):
        trajectory = [assistant(f"step {i}") for i in range(count)]
        got = one("turn_budget", trajectory, max_turns=1, zero_at=docs + 1).reward
        assert got == pytest.approx(max(0.0, 1.0 - (count - 1) / docs))


def test_turn_budget_gives_nothing_to_an_empty_or_cut_trajectory() -> None:
    assert one("turn_budget", "").reward == 0.0
    assert one("turn_budget", [assistant(""), assistant("  ")]).reward == 0.0
    [cut] = score(Rubric.single("turn_budget"),
                  Rollout(id="a", group="g", prompt="p", completion="Done.", truncated=True))
    assert cut.reward == 0.0
    with pytest.raises(RubricError, match="zero_at"):
        Rubric.single("turn_budget", params={"max_turns": 3, "zero_at": 3})


def test_workspace_files_from_write_calls_and_from_metadata() -> None:
    assert one("workspace_files", GOOD, allowed=["answer.txt"]).reward == 1.0
    extra = GOOD + [assistant("", call("write_file", {"path": "notes/scratch.md",
                                                       "content": ""}, "c9"))]
    result = one("workspace_files", extra, allowed=["answer.txt"])
    assert result.reward == 0.0 and metric(result, "outside") == 1
    assert one("workspace_files", extra, allowed=["answer.txt", "notes/*.md"]).reward == 1.0
    assert one("workspace_files", extra, allowed=["answer.txt"], mode="fraction").reward == 0.5
    # The environment's own record wins over what the calls claim.
    told = one("workspace_files", GOOD, {"files_written": ["answer.txt", "core.dump"]},
               allowed=["answer.txt"])
    assert told.reward == 0.0 and metric(told, "files_written") == 2


@pytest.mark.parametrize("path", ["../answer.txt", "/work/answer.txt", "answer.txt/../x.py",
                                  "./answer.txt/../../answer.txt"])
def test_workspace_files_paths_that_leave_or_hide_are_outside(path: str) -> None:
    trajectory = [assistant("", call("write_file", {"path": "answer.txt", "content": "1"}, "a"),
                            call("write_file", {"path": path, "content": "1"}, "b"))]
    assert one("workspace_files", trajectory, allowed=["answer.txt"]).reward == 0.0
    same = [assistant("", call("write_file", {"path": "./sub/../answer.txt", "content": ""}, "a"))]
    assert one("workspace_files", same, allowed=["answer.txt"]).reward == 1.0


def test_workspace_files_required_and_load_checks() -> None:
    assert one("workspace_files", [assistant("done")], allowed=["answer.txt"]).reward == 1.0
    assert one("workspace_files", [assistant("done")], allowed=["answer.txt"],
               required=["answer.txt"]).reward == 0.0
    with pytest.raises(RubricError, match="give allowed"):
        Rubric.single("workspace_files")
    with pytest.raises(RubricError, match="list of paths"):
        Rubric.single("workspace_files", params={"allowed": "answer.txt"})


def test_the_agentic_rubric_of_the_docs(tmp_path: Path) -> None:
    """A verifier, the turn budget, tidiness and valid tool use, each visible in the result."""
    (tmp_path / "check.py").write_text(
        "def found_date(completion):\n    return 1.0 if '3 May' in completion else 0.0\n",
        encoding="utf-8")
    (tmp_path / "rubric.yaml").write_text(
        "name: agent-v1\n"
        "components:\n"
        "  correct: {reward: 'check.py:found_date', weight: 1.0}\n"
        "  efficient: {reward: turn_budget, params: {max_turns: 3, zero_at: 8}, weight: 0.5,"
        " requires: correct}\n"
        "  tidy: {reward: workspace_files, params: {allowed: [answer.txt]}, weight: 0.25}\n"
        "  tools: {reward: tool_calls, weight: 0.25}\n", encoding="utf-8")
    rubric = Rubric.from_yaml(tmp_path / "rubric.yaml")
    [result] = score(rubric, rollout(GOOD, tools=TOOLS))
    assert result.components == {"correct": 1.0, "efficient": 1.0, "tidy": 1.0, "tools": 1.0}
    assert result.reward == 2.0
