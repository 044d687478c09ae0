"""Multi-turn trajectories: a completion that is a whole conversation with tool calls.

A rollout's ``completion`` may be a list of chat messages in the OpenAI shape: assistant
messages (with ``content`` and optional ``tool_calls``, each ``{"id", "type": "function",
"function": {"name", "arguments"}}``) and ``tool`` messages answering them by
``tool_call_id``. Rewards read it through these helpers (ask for ``rollout`` or
``completion``-as-messages via ``rollout.completion``)::

    from rewardsmith.trajectory import tool_calls, turns

    def tidy(rollout):
        written = [c.arguments.get("path") for c in tool_calls(rollout) if c.name == "write_file"]
        return 1.0 if written == ["answer.txt"] else 0.0

    def efficient(rollout):
        return 1.0 / len(turns(rollout))

A judge template shows the whole conversation with ``{trajectory}`` (see ``render``).
A plain-text completion is one turn with no tool calls.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .types import Rollout, message_text, stable_json

__all__ = ["ToolCall", "Turn", "render", "tool_calls", "turns"]


@dataclass(frozen=True)
class ToolCall:
    """One tool call of an assistant turn, with the tool's reply when there is one.

    ``arguments`` is the decoded JSON object when the model sent valid JSON, else ``{}`` with
    the text kept in ``raw_arguments`` (a malformed call is data a reward may punish).
    """

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw_arguments: str = ""
    id: str = ""
    result: str | None = None


@dataclass(frozen=True)
class Turn:
    """One assistant message: what it said and the tools it called."""

    index: int
    text: str
    tool_calls: tuple[ToolCall, ...] = ()


def _messages(value: Any) -> list[Mapping[str, Any]] | None:
    if isinstance(value, Rollout):
        value = value.completion
    if isinstance(value, (list, tuple)):
        return [m for m in value if isinstance(m, Mapping)]
    return None


def _decode_arguments(raw: Any) -> tuple[dict[str, Any], str]:
    if isinstance(raw, Mapping):
        return dict(raw), stable_json(raw)
    text = "" if raw is None else str(raw)
    try:
        decoded = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}, text
    return (decoded, text) if isinstance(decoded, dict) else ({}, text)


def _calls_of(message: Mapping[str, Any], results: Mapping[str, str]) -> tuple[ToolCall, ...]:
    calls = message.get("tool_calls")
    if not isinstance(calls, (list, tuple)):
        return ()
    out = []
    for call in calls:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        function = function if isinstance(function, Mapping) else call
        arguments, raw = _decode_arguments(function.get("arguments"))
        call_id = str(call.get("id") or "")
        out.append(ToolCall(name=str(function.get("name") or ""), arguments=arguments,
                            raw_arguments=raw, id=call_id,
                            result=results.get(call_id) if call_id else None))
    return tuple(out)


def turns(value: Rollout | str | Sequence[Any] | None) -> list[Turn]:
    """The assistant turns of a completion (or of ``rollout.completion``), in order."""
    messages = _messages(value)
    if messages is None:
        text = message_text(value.completion if isinstance(value, Rollout) else value)
        return [Turn(0, text)] if text else []
    results = {str(m.get("tool_call_id")): message_text(m) for m in messages
               if m.get("role") == "tool" and m.get("tool_call_id") is not None}
    out: list[Turn] = []
    for message in messages:
        if message.get("role") == "assistant":
            out.append(Turn(len(out), message_text(message), _calls_of(message, results)))
    return out


def tool_calls(value: Rollout | str | Sequence[Any] | None) -> list[ToolCall]:
    """Every tool call of the completion, in the order made, each with its result."""
    return [call for turn in turns(value) for call in turn.tool_calls]


def render(value: Rollout | str | Sequence[Any] | None) -> str:
    """The conversation as text a judge reads: each message on its own lines, tool calls as
    ``-> name({json arguments})`` and tool replies as ``tool (name): reply``."""
    messages = _messages(value)
    if messages is None:
        return message_text(value.completion if isinstance(value, Rollout) else value)
    names: dict[str, str] = {}
    lines: list[str] = []
    assistant_turn = 0
    for message in messages:
        role = str(message.get("role") or "message")
        text = message_text(message)
        if role == "assistant":
            assistant_turn += 1
            lines.append(f"[turn {assistant_turn}] assistant: {text}".rstrip())
            for call in _calls_of(message, {}):
                names[call.id] = call.name
                shown = stable_json(call.arguments) if call.arguments else call.raw_arguments
                lines.append(f"  -> {call.name}({shown})")
        elif role == "tool":
            name = names.get(str(message.get("tool_call_id")), message.get("name") or "?")
            lines.append(f"tool ({name}): {text}")
        else:
            lines.append(f"{role}: {text}")
    return "\n".join(lines)
