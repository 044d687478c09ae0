"""``reward: tool_call``: the tool calls a completion made against the expected calls.

Calls are read from the completion's last assistant message (OpenAI ``tool_calls``, or the older
``function_call``), or, for a text completion, from JSON text: one call, a list of calls, an
object with ``tool_calls``, or ``<tool_call>...</tool_call>`` blocks. A call is OpenAI-shaped
(``{"type": "function", "function": {"name", "arguments"}}``) or flat (``{"name",
"arguments"}``, ``parameters`` accepted for ``arguments``); arguments are a JSON string or an
object.

Each expected call scores against one made call: 0 for a different name, else the share of
argument keys whose values match (numbers by value; with ``loose_types: true`` also ``"5"`` for
5 and ``"true"`` for true), where an argument the expected call lacks counts as a miss. The
reward is the best total over pairings (``order_free``, the default, for parallel calls) or the
in-order total, divided by the larger of the two call counts, so missing and surplus calls both
cost. ``partial: false`` gives 1.0 only when every call matches exactly.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...types import Rollout, message_text
from .._registry import builtin
from .jsontext import NotJSON, load_json, require_bools, values_equal

__all__ = ["tool_call", "ToolCall", "read_calls"]

_TAGGED = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
# Past this many calls the best pairing is found greedily, not by trying every order.
_EXHAUSTIVE_LIMIT = 7


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Mapping[str, Any] | None  # None: the arguments were not a JSON object


def _arguments(raw: Any) -> Mapping[str, Any] | None:
    if raw is None:
        return {}
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            raw = load_json(raw)
        except NotJSON:
            return None
    return raw if isinstance(raw, Mapping) else None


def _one_call(raw: Any, where: str) -> ToolCall:
    if not isinstance(raw, Mapping):
        raise NotJSON(f"{where}: a call must be an object, got {type(raw).__name__}")
    function = raw.get("function")
    body: Mapping[str, Any] = function if isinstance(function, Mapping) else raw
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise NotJSON(f"{where}: a call has no function name")
    args = body.get("arguments", body.get("parameters"))
    return ToolCall(name, _arguments(args))


def _calls_of(value: Any, where: str) -> list[ToolCall]:
    if isinstance(value, Mapping) and "tool_calls" in value:
        value = value["tool_calls"] or []
    elif isinstance(value, Mapping) and isinstance(value.get("function_call"), Mapping):
        value = [value["function_call"]]
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise NotJSON(f"{where}: expected a call or a list of calls")
    return [_one_call(item, where) for item in value]


def _calls_from_text(text: str) -> list[ToolCall]:
    tagged = _TAGGED.findall(text)
    if tagged:
        return [call for block in tagged for call in _calls_of(load_json(block.strip()),
                                                                 "completion")]
    body = text.strip()
    if not body.startswith(("{", "[")):
        return []  # prose: the model answered without calling a tool
    return _calls_of(load_json(body), "completion")


def read_calls(completion: Any) -> list[ToolCall]:
    """The calls a completion made (messages or text); ``NotJSON`` when they are unreadable."""
    if isinstance(completion, str):
        return _calls_from_text(completion)
    messages = [m for m in completion if isinstance(m, Mapping)] if isinstance(
        completion, Sequence) else []
    assistant = [m for m in messages if m.get("role", "assistant") == "assistant"]
    if not assistant:
        return []
    last = assistant[-1]
    if last.get("tool_calls") or isinstance(last.get("function_call"), Mapping):
        return _calls_of(last, "completion")
    return _calls_from_text(message_text(last))


def _expected_calls(answer: Any) -> list[ToolCall]:
    if answer is None:
        raise ValueError("tool_call: the expected calls (the answer) are missing")
    try:
        value = load_json(answer) if isinstance(answer, str) else answer
        calls = _calls_of(value, "the answer")
    except NotJSON as exc:
        raise ValueError(f"tool_call: the expected calls are unreadable: {exc}") from None
    if any(call.arguments is None for call in calls):
        raise ValueError("tool_call: an expected call's arguments are not a JSON object")
    return calls


def _loosely_equal(expected: Any, actual: Any) -> bool:
    if values_equal(expected, actual):
        return True
    if isinstance(actual, str) and not isinstance(expected, str):
        try:
            return values_equal(expected, load_json(actual))
        except NotJSON:
            return False
    if isinstance(expected, str) and isinstance(actual, (int, float)) and \
            not isinstance(actual, bool):
        try:
            return values_equal(load_json(expected), actual)
        except NotJSON:
            return False
    return False


def _pair_score(expected: ToolCall, actual: ToolCall, loose_types: bool) -> float:
    if expected.name != actual.name or actual.arguments is None:
        return 0.0
    want, got = expected.arguments or {}, actual.arguments
    keys = set(want) | set(got)
    if not keys:
        return 1.0
    same = values_equal if not loose_types else _loosely_equal
    hits = sum(1 for key in want if key in got and same(want[key], got[key]))
    return hits / len(keys)


def _best_total(scores: list[list[float]]) -> float:
    rows, cols = len(scores), len(scores[0]) if scores else 0
    if min(rows, cols) == 0:
        return 0.0
    if max(rows, cols) <= _EXHAUSTIVE_LIMIT:
        if rows <= cols:
            return max(sum(scores[r][c] for r, c in enumerate(pick))
                       for pick in itertools.permutations(range(cols), rows))
        return max(sum(scores[r][c] for c, r in enumerate(pick))
                   for pick in itertools.permutations(range(rows), cols))
    pairs = sorted(((scores[r][c], r, c) for r in range(rows) for c in range(cols)),
                   reverse=True)
    used_rows: set[int] = set()
    used_cols: set[int] = set()
    total = 0.0
    for score, r, c in pairs:
        if r not in used_rows and c not in used_cols:
            used_rows.add(r)
            used_cols.add(c)
            total += score
    return total


def _check_params(params: Mapping[str, Any]) -> None:
    require_bools("tool_call", params, "order_free", "partial", "loose_types")


@builtin("tool_call", kind="verifier", check=_check_params)
def tool_call(rollout: Rollout, order_free: bool = True, partial: bool = True,
              loose_types: bool = False) -> dict[str, float]:
    """Tool calls made (messages or JSON text) against the answer's expected calls."""
    expected = _expected_calls(rollout.answer)
    try:
        made = read_calls(rollout.completion)
    except NotJSON:
        return {"reward": 0.0, "parse_error": 1.0, "calls_expected": float(len(expected)),
                "calls_made": 0.0}
    metrics = {"parse_error": 0.0, "calls_expected": float(len(expected)),
               "calls_made": float(len(made))}
    if not expected or not made:
        return {"reward": 1.0 if not expected and not made else 0.0, **metrics}
    if order_free:
        scores = [[_pair_score(e, m, loose_types) for m in made] for e in expected]
        total = _best_total(scores)
    else:
        total = sum(_pair_score(e, m, loose_types) for e, m in zip(expected, made))
    share = total / max(len(expected), len(made))
    reward = share if partial else float(share == 1.0)
    return {"reward": reward, **metrics}
