"""Kinds and hack probes for the agent rewards (``tool_calls``, ``turn_budget``,
``workspace_files``).

================  ===========================================  ==================================
kind              graded                                       probes (none may earn full credit)
================  ===========================================  ==================================
tool-use          every call names a declared tool with        an undeclared tool beside the
                  arguments its schema accepts                 right call; no tool name;
                                                               arguments not an object; a
                                                               required argument missing; a
                                                               wrong type; a value outside the
                                                               enum; the call in prose
turn-budget       the number of assistant turns                blank turns as padding; the work
                                                               spread over many turns; a
                                                               trajectory cut at the limit
workspace-files   the files written against an allowed list    a path that climbs out; dot
                                                               segments; an absolute path;
                                                               another write tool; a lookalike
                                                               name; a path that is not text
================  ===========================================  ==================================

The calls are written as ``<tool_call>`` blocks, so each kind's completions are text (the edge
cases embed them in other text and chat messages); the turn budget's wrong answer is a list of
assistant messages, since text is always one turn.
"""

from __future__ import annotations

import json
from typing import Any

from .kind_base import Kind

__all__ = ["AGENT_DESCRIPTIONS", "AGENT_KINDS", "AGENT_TOOLS", "agent_kind", "agent_probes"]

AGENT_DESCRIPTIONS = {
    "tool-use": "tool calls that name a declared tool with arguments valid for its schema",
    "turn-budget": "a budget of assistant turns",
    "workspace-files": "the files an agent wrote, against an allowed list",
}
AGENT_KINDS: tuple[str, ...] = tuple(AGENT_DESCRIPTIONS)

# The tools ``rewardsmith test tool_calls`` declares (its profile's params).
AGENT_TOOLS = [{"type": "function", "function": {
    "name": "get_weather",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["city"],
                   "properties": {"city": {"type": "string"},
                                  "unit": {"enum": ["celsius", "fahrenheit"]}}}}}]
_QUESTION = "What is the weather in Paris, in celsius?"


def _call(name: str, arguments: Any) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def _write(path: Any, tool: str = "write_file") -> str:
    return _call(tool, {"path": path, "content": "42"})


def _turns(*texts: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text} for text in texts]


def agent_kind(name: str) -> Kind:
    """The kind ``name`` (one of ``AGENT_KINDS``)."""
    description = AGENT_DESCRIPTIONS[name]
    if name == "tool-use":
        correct = _call("get_weather", {"city": "Paris", "unit": "celsius"})
        return Kind(name, description, _QUESTION, None, correct,
                    _call("get_weather", {"city": 5}), correct[:30], "<tool_call></tool_call>",
                    uses_label=False)
    if name == "turn-budget":
        wrong: Any = _turns(*(f"Step {i}: looking at the next file." for i in range(1, 8)))
        return Kind(name, description, "Find the answer in as few turns as you can.", None,
                    "The answer is 42.", wrong, "The answer is 4", "", uses_label=False,
                    grades_answers=False)
    if name == "workspace-files":
        correct = _write("answer.txt")
        return Kind(name, description, "Write the answer to answer.txt and nothing else.", None,
                    correct, correct + _write("scratch.py"), correct[:30],
                    "<tool_call></tool_call>", uses_label=False)
    raise KeyError(name)


def agent_probes(kind: Kind) -> list[tuple[str, Any, bool]]:
    """(name, completion, truncated) for each probe of ``kind``."""
    if kind.name == "tool-use":
        right = kind.correct
        return [
            ("an undeclared tool beside the right call", right + _call("delete_files", {}),
             False),
            ("a call with no tool name", _call("", {"city": "Paris"}), False),
            ("arguments that are a list, not an object", _call("get_weather", ["Paris"]), False),
            ("a required argument missing", _call("get_weather", {"unit": "celsius"}), False),
            ("an argument of the wrong type", _call("get_weather", {"city": ["Paris"]}), False),
            ("a value outside the enum", _call("get_weather", {"city": "Paris", "unit": "kelvin"}),
             False),
            ("the call described in prose", "I would call get_weather for Paris in celsius.",
             False),
        ]
    if kind.name == "turn-budget":
        return [
            ("blank turns as padding", _turns("The answer is 42.", *[""] * 6), False),
            ("the work spread over many turns", _turns(*[f"Step {i}." for i in range(12)]),
             False),
            ("a trajectory cut at the length limit", "The answer is 42.", True),
        ]
    if kind.name == "workspace-files":
        right = kind.correct
        return [
            ("a path that climbs out of the workspace", right + _write("../answer.txt"), False),
            ("dot segments hiding another file", right + _write("answer.txt/../scratch.py"),
             False),
            ("an absolute path", _write("/tmp/answer.txt"), False),
            ("another write tool", right + _call("create_file", {"path": "notes.md"}), False),
            ("a lookalike name", right + _write("answer.txt.bak"), False),
            ("a path that is not text", _write(["answer.txt"]), False),
        ]
    return []
