"""Reading the judge's reply: JSON, else the last JSON object in the text; ranges checked.

Nothing here guesses: a reply without a readable number for a criterion, or with a number
outside the criterion's range, is an error for that criterion, never a silent 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from .config import Criterion

__all__ = ["Grades", "grade_value", "parse_reply", "last_json_object", "snippet"]

MAX_REPLY_CHARS = 200_000  # longer replies are not scanned for JSON (a runaway generation)

# criterion name -> its number, or an error message saying what was wrong
Grades = dict[str, "float | str"]


def parse_reply(content: str, criteria: Sequence[Criterion]) -> Grades:
    """One entry per criterion: a float within its range, or a string naming the problem."""
    found = _json_object(content)
    if found is None:
        message = f"judge reply holds no JSON object: {snippet(content)}"
        return {c.name: message for c in criteria}
    lowered = {str(k).lower(): v for k, v in found.items()}
    grades: Grades = {}
    for criterion in criteria:
        if criterion.name in found:
            raw = found[criterion.name]
        elif criterion.name.lower() in lowered:
            raw = lowered[criterion.name.lower()]
        else:
            grades[criterion.name] = (f"judge reply has no {criterion.name!r}: "
                                      f"{snippet(content)}")
            continue
        grades[criterion.name] = grade_value(raw, criterion)
    return grades


def grade_value(raw: Any, criterion: Criterion) -> float | str:
    """``raw`` read as a grade within ``criterion``'s range, or the message saying why not."""
    low, high = criterion.range
    value: float | None = None
    if isinstance(raw, bool):
        value = None  # true/false is not a grade on a numeric scale
    elif isinstance(raw, (int, float)):
        value = float(raw)
    elif isinstance(raw, str):
        try:
            value = float(raw.strip())
        except ValueError:
            value = None
    if value is None:
        return f"judge gave {criterion.name!r} = {json.dumps(raw)[:80]}, not a number"
    if not math.isfinite(value):
        return f"judge gave {criterion.name!r} = {value}, not a finite number"
    if not low <= value <= high:
        return (f"judge gave {criterion.name!r} = {value:g}, outside its range "
                f"[{low:g}, {high:g}]")
    return value


def _json_object(content: str) -> dict[str, Any] | None:
    text = content.strip()
    try:
        whole = json.loads(text)
    except (ValueError, RecursionError):
        whole = None
    if isinstance(whole, dict):
        return whole
    return last_json_object(content)


def last_json_object(text: str) -> dict[str, Any] | None:
    """The last top-level JSON object in ``text`` (for servers that ignore ``response_format``)."""
    if len(text) > MAX_REPLY_CHARS:
        return None
    decoder = json.JSONDecoder()
    found: dict[str, Any] | None = None
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            found = value
        position = text.find("{", end)  # skip what was decoded: objects nested in it are not top-level
    return found


def snippet(text: str, limit: int = 160) -> str:
    """A short, single-line view of a reply for error messages (the full reply is stored)."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 3] + "...")
