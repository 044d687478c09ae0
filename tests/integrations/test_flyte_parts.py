"""The Flyte integration's parts that need no Flyte run: task names, argument checks, the
resolver a pod uses to find a task, recording a run for ``rewardsmith rescore``; and
multi-turn trajectories as rewards and judge templates read them."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rewardsmith import Component, ConfigError, Engine, Rollout, Rubric
from rewardsmith.cli import app
from rewardsmith.judge.prompt import Template
from rewardsmith.trajectory import ToolCall, render, tool_calls, turns

flyte = pytest.importorskip("flyte")
from rewardsmith.integrations.flyte import (  # noqa: E402
    RewardResult,
    RewardTaskResolver,
    record_run,
    reward_task,
    task_name_for,
)

CONVERSATION: list[dict[str, Any]] = [
    {"role": "user", "content": "Find the secret."},
    {"role": "assistant", "content": "Searching.", "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "search", "arguments": '{"query": "secret"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "doc 3 has it"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c2", "type": "function",
         "function": {"name": "write_file", "arguments": '{"path": "answer.txt"}'}},
        {"id": "c3", "type": "function", "function": {"name": "oops", "arguments": "{not json"}}]},
    {"role": "tool", "tool_call_id": "c2", "content": "ok"},
    {"role": "assistant", "content": "Done. #### 42"},
]


def test_turns_and_tool_calls_of_a_multi_turn_completion() -> None:
    rollout = Rollout("r", "g", "Find the secret.", CONVERSATION, answer="42")
    found = turns(rollout)
    assert [t.index for t in found] == [0, 1, 2]
    assert [t.text for t in found] == ["Searching.", "", "Done. #### 42"]
    assert tool_calls(rollout) == [
        ToolCall("search", {"query": "secret"}, '{"query": "secret"}', "c1", "doc 3 has it"),
        ToolCall("write_file", {"path": "answer.txt"}, '{"path": "answer.txt"}', "c2", "ok"),
        ToolCall("oops", {}, "{not json", "c3", None),  # malformed: kept as text, no reply
    ]
    assert rollout.text == "Done. #### 42"  # what a plain reward grades is unchanged
    assert turns("plain answer") == [turns("plain answer")[0]]
    assert turns("plain answer")[0].tool_calls == () and turns("") == []
    assert tool_calls(None) == []
    odd = [{"role": "assistant", "content": "x", "tool_calls": "not a list"},
           {"role": "assistant", "content": "y", "tool_calls": [7, {"function": {"name": "f",
                                                                           "arguments": "[1]"}}]},
           "not a message"]
    assert [(t.text, t.tool_calls) for t in turns(odd)] == [
        ("x", ()), ("y", (ToolCall("f", {}, "[1]"),))]


def test_render_shows_turns_tool_calls_and_replies() -> None:
    text = render(CONVERSATION)
    assert text.splitlines() == [
        "user: Find the secret.",
        "[turn 1] assistant: Searching.",
        '  -> search({"query":"secret"})',
        "tool (search): doc 3 has it",
        "[turn 2] assistant:",
        '  -> write_file({"path":"answer.txt"})',
        "  -> oops({not json)",
        "tool (write_file): ok",
        "[turn 3] assistant: Done. #### 42",
    ]
    assert render("just text") == "just text"


def test_judge_template_reads_the_trajectory() -> None:
    template = Template("Task: {prompt}\n{trajectory}")
    values = template.values(Rollout("r", "g", "Find the secret.", CONVERSATION))
    assert values["trajectory"] == render(CONVERSATION)
    assert "-> write_file" in template.render(values, [])
    with pytest.raises(ConfigError, match=r"never shows the completion.*\{trajectory\}"):
        Template("Task: {prompt}")
    with pytest.raises(ConfigError, match=r"did you mean \{trajectory\}"):
        Template("{completion} {trajectroy}")


def length(completion: str) -> float:
    return float(len(completion))


def test_task_names_follow_the_rubric() -> None:
    one = Rubric([Component("length", length)], name="GSM8K v1 (final)!")
    assert task_name_for(one) == f"rewardsmith-gsm8k-v1-final-{one.id[:8]}"
    assert task_name_for(Rubric([Component("length", length)], name="!!!")).startswith(
        "rewardsmith-")
    reward = reward_task(one, retries=3, timeout=timedelta(minutes=2), workers=0)
    assert reward.name == task_name_for(one)
    assert reward.score_group.name == f"{reward.name}.score_group"
    assert reward.score_group.retries.count == 3
    assert reward.score_group.cache.salt == one.id  # a changed rubric is a cache miss
    assert reward_task(one, cache=False, workers=0).score_group.cache.behavior == "disable"
    assert reward.env.resources == flyte.Resources(cpu=1, memory="2Gi")


def test_bad_arguments_are_refused() -> None:
    rubric = Rubric([Component("length", length)], name="args")
    with pytest.raises(ConfigError, match="retries must be >= 0"):
        reward_task(rubric, retries=-1)
    with pytest.raises(ConfigError, match="timeout must be >= 0"):
        reward_task(rubric, timeout=-5)
    with pytest.raises(ConfigError, match="timeout must be >= 0 seconds, not -1.0"):
        reward_task(rubric, timeout=timedelta(seconds=-1))
    with pytest.raises(ConfigError, match="workers must be >= 0"):
        reward_task(rubric, workers=-2)

    def not_async(results: list[RewardResult]) -> None:
        return None

    with pytest.raises(ConfigError, match="after_scoring must be an async function"):
        reward_task(rubric, after_scoring=not_async)  # type: ignore[arg-type]
    reward_task(rubric, workers=0)
    with pytest.raises(ConfigError, match="already has a task with workers=0"):
        reward_task(rubric, workers=2)


def test_resolver_finds_the_task_by_its_module_level_name(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "flyte_resolver_module.py").write_text(textwrap.dedent("""
        from rewardsmith import Component, Rubric
        from rewardsmith.integrations.flyte import reward_task

        def shout(completion: str) -> float:
            return 1.0 if completion.isupper() else 0.0

        reward = reward_task(Rubric([Component("shout", shout)], name="resolved"), workers=0)
    """), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("flyte_resolver_module")
    try:
        resolver = RewardTaskResolver()
        args = resolver.loader_args(module.reward.score_group, tmp_path)
        assert args == ["mod", "flyte_resolver_module", "attr", "reward"]
        assert resolver.load_task(args) is module.reward.score_group
        assert resolver.import_path == "rewardsmith.integrations.flyte.RewardTaskResolver"
        unbound = reward_task(Rubric([Component("shout", module.shout)], name="unbound"),
                              workers=0)
        unbound.score_group.func.__module__ = "flyte_resolver_module"
        with pytest.raises(ConfigError, match="bind the reward_task"):
            resolver.loader_args(unbound.score_group, tmp_path)
    finally:
        sys.modules.pop("flyte_resolver_module", None)


def test_recorded_run_is_rescored_by_the_cli(tmp_path: Path) -> None:
    rewards = tmp_path / "rw.py"
    rewards.write_text(textwrap.dedent("""
        def words(completion: str) -> float:
            with open(__file__ + ".calls", "a") as log:
                log.write("x")
            return float(len(completion.split()))

        def exclaims(completion: str) -> float:
            return 1.0 if completion.endswith("!") else 0.0
    """), encoding="utf-8")
    v1 = {"name": "v1", "components": {"words": {"reward": f"{rewards}:words"}}}
    rubric = Rubric.from_dict(v1)
    groups = [[Rollout(f"g{g}-{i}", f"g{g}", "say", "hi " * i + "there!") for i in range(3)]
              for g in range(2)]
    with Engine(rubric, workers=0) as engine:
        results = [[RewardResult.of(s, rubric) for s in engine.score_group(group)]
                   for group in groups]
    assert Path(str(rewards) + ".calls").read_text() == "x" * 6
    store = tmp_path / "run.db"
    run_id = record_run(store, rubric, groups, results)
    assert run_id

    v2 = {"name": "v2", "components": {"words": {"reward": f"{rewards}:words", "weight": 2.0},
                                       "exclaims": {"reward": f"{rewards}:exclaims"}}}
    (tmp_path / "v2.yaml").write_text(json.dumps(v2))
    runner = CliRunner()
    plan = runner.invoke(app, ["rescore", "--store", str(store), "-r", str(tmp_path / "v2.yaml"),
                               "--dry-run", "--json"])
    assert plan.exit_code == 0, plan.output
    assert [(c["name"], c["reused"], c["compute"])
            for c in json.loads(plan.output)["plan"]["components"]] == [
        ("words", 6, 0), ("exclaims", 0, 6)]
    out = tmp_path / "v2.jsonl"
    done = runner.invoke(app, ["rescore", "--store", str(store), "-r", str(tmp_path / "v2.yaml"),
                               "-o", str(out), "-w", "0"])
    assert done.exit_code == 0, done.output
    rescored = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["reward"] for r in rescored] == [3.0, 5.0, 7.0] * 2
    assert Path(str(rewards) + ".calls").read_text() == "x" * 6  # words was not called again


def test_record_run_refuses_mismatched_results(tmp_path: Path) -> None:
    rubric = Rubric([Component("length", length)], name="mismatch")
    group = [Rollout("a", "g", "p", "c")]
    with pytest.raises(ConfigError, match="1 groups but 0 result lists"):
        record_run(tmp_path / "x.db", rubric, [group], [])
    with pytest.raises(ConfigError, match="group 0 has 1 rollouts but 0 results"):
        record_run(tmp_path / "x.db", rubric, [group], [[]])
