"""Grade scales a server can enforce.

Servers that constrain replies to a JSON schema (llama.cpp's grammars, vLLM's guided decoding,
hosted strict modes) enforce ``enum`` and the bounds of an ``integer``, but not the
``minimum``/``maximum`` of a ``number``: a scale sent as a bounded number can come back out of
range. So each criterion's scale is sent as something the server can hold to:

- pass/fail (``binary``): the integers 0 and 1;
- whole-number ends at least 2 apart (1 to 10, 0 to 100): an integer with those bounds, also listed as an enum
  when there are at most ``_ENUM_LIMIT`` grades;
- anything else (0 to 1, 0.5 to 2.5): an enum of ``_STEPS + 1`` evenly spaced numbers.

Replies are still read by range (``parse.grade_value``): a server that ignores the schema may
answer 0.35 on a 0-to-1 scale, which is a grade, not an error.
"""

from __future__ import annotations

from typing import Any

from .config import Criterion

__all__ = ["allowed_grades", "grade_schema", "scale_words"]

_ENUM_LIMIT = 21  # integer scales up to this many grades are also sent as an enum
_INTEGER_LIMIT = 1000  # wider whole-number ranges are stepped like fractional ones
_STEPS = 10  # a fractional range is asked in tenths of its width


def _whole(criterion: Criterion) -> bool:
    low, high = criterion.range
    # 0 to 1 is a fraction scale (the default), not the two grades 0 and 1 (that is binary)
    return (float(low).is_integer() and float(high).is_integer()
            and 2 <= high - low <= _INTEGER_LIMIT)


def allowed_grades(criterion: Criterion) -> list[int | float] | None:
    """Every grade the schema allows, or None for a wide integer range (bounds only)."""
    low, high = criterion.range
    if criterion.binary:
        return [0, 1]
    if _whole(criterion):
        if high - low + 1 > _ENUM_LIMIT:
            return None
        return list(range(int(low), int(high) + 1))
    width = high - low
    return [_tidy(low + width * step / _STEPS) for step in range(_STEPS + 1)]


def grade_schema(criterion: Criterion) -> dict[str, Any]:
    """The JSON schema of one criterion's grade, in a form servers enforce."""
    low, high = criterion.range
    grades = allowed_grades(criterion)
    if criterion.binary or _whole(criterion):
        schema: dict[str, Any] = {"type": "integer", "minimum": int(low), "maximum": int(high)}
        if grades is not None:
            schema["enum"] = grades
    else:
        schema = {"type": "number", "enum": grades}
    schema["description"] = criterion.description
    return schema


def scale_words(criterion: Criterion) -> str:
    """How the prompt states the scale (it begins 'a number from', which readers rely on)."""
    low, high = (_number(v) for v in criterion.range)
    if criterion.binary:
        return f"a number from {low} to {high}: 0 fails, 1 passes"
    if _whole(criterion):
        return f"a number from {low} to {high}, a whole number"
    step = _number((criterion.range[1] - criterion.range[0]) / _STEPS)
    return f"a number from {low} to {high}, in steps of {step}"


def _tidy(value: float) -> int | float:
    rounded = round(value, 10)  # 0.1 * 3 is 0.30000000000000004; the schema says 0.3
    return int(rounded) if rounded.is_integer() else rounded


def _number(value: float) -> str:
    tidy = _tidy(float(value))
    return str(tidy) if isinstance(tidy, int) else repr(tidy)
