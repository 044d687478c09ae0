"""Finding the JSON a completion holds: the whole text, else its last fenced code block.

Only standard JSON is read: ``NaN`` and ``Infinity`` are not JSON and make the text unreadable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["NotJSON", "read_json", "load_json", "values_equal", "require_bools"]

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)


class NotJSON(ValueError):
    """The text holds no readable JSON."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def load_json(text: str) -> Any:
    """``json.loads`` without NaN and Infinity; ``NotJSON`` when the text is not JSON."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise NotJSON(str(exc)) from None


def read_json(completion: str) -> Any:
    """The JSON value of ``completion``: the whole text, else the last fenced block's content."""
    stripped = completion.strip()
    if not stripped:
        raise NotJSON("the completion is empty")
    try:
        return load_json(stripped)
    except NotJSON as whole:
        blocks = _FENCE.findall(completion)
        if not blocks:
            raise whole from None
        return load_json(blocks[-1][1].strip())


def values_equal(left: Any, right: Any) -> bool:
    """JSON equality with numbers compared by value (1 == 1.0) and booleans never numbers."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(values_equal(v, right[k])
                                                   for k, v in left.items())
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(values_equal(a, b) for a, b in zip(left, right))
    return type(left) is type(right) and bool(left == right)


def require_bools(reward: str, params: Mapping[str, Any], *names: str) -> None:
    """``ValueError`` naming the first of ``names`` whose param is not true or false."""
    for name in names:
        if not isinstance(params.get(name), bool):
            raise ValueError(f"{reward}: {name} must be true or false, not {params.get(name)!r}")
