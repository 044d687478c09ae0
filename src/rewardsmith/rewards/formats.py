"""Rule-based rewards: format and length. They look at the completion alone.

Each one's params are checked when a rubric is loaded (``check=``), so a pattern that does not
compile or a length window that makes no sense stops the run before the first rollout.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ._registry import builtin

__all__ = ["marker", "regex", "think_format", "length"]


def _check_marker(params: Mapping[str, Any]) -> None:
    value = params["marker"]
    if not isinstance(value, str) or not value:
        raise ValueError(f"marker: the marker must be a non-empty string, not {value!r}")
    count = params["max_count"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"marker: max_count must be a whole number >= 1, not {count!r}")


@builtin("marker", kind="rule", bounded=True, check=_check_marker)
def marker(completion: str, marker: str = "####", max_count: int = 1) -> float:
    """1.0 when the marker appears (at most max_count times) with an answer after it."""
    if not marker:
        raise ValueError("marker: the marker must be a non-empty string")
    count = completion.count(marker)
    if count == 0 or count > max_count:
        return 0.0
    return 1.0 if completion.rsplit(marker, 1)[1].strip() else 0.0


_FLAG_NAMES = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}


@lru_cache(maxsize=256)
def _compile(pattern: str, flags: str) -> re.Pattern[str]:
    value = 0
    for letter in flags:
        if letter not in _FLAG_NAMES:
            raise ValueError(f"regex: unknown flag {letter!r}; use any of 'imsx'")
        value |= _FLAG_NAMES[letter]
    try:
        return re.compile(pattern, value)
    except re.error as exc:
        raise ValueError(f"regex: the pattern {pattern!r} does not compile: {exc}") from exc


def _check_regex(params: Mapping[str, Any]) -> None:
    pattern, flags = params.get("pattern"), params["flags"]
    if not isinstance(pattern, str):
        raise ValueError(f"regex: the pattern must be a string, not {type(pattern).__name__} "
                         f"({pattern!r})")
    if not isinstance(flags, str):
        raise ValueError(f"regex: flags must be a string of letters from 'imsx', not {flags!r}")
    _compile(pattern, flags)


@builtin("regex", kind="rule", check=_check_regex)
def regex(completion: str, pattern: str, flags: str = "", full: bool = False) -> float:
    """1.0 when the pattern matches the completion (search, or the whole text with full=true)."""
    compiled = _compile(pattern, flags)
    found = compiled.fullmatch(completion) if full else compiled.search(completion)
    return 1.0 if found else 0.0


@builtin("think_format", kind="rule", bounded=True)
def think_format(completion: str, tag: str = "think") -> float:
    """1.0 for exactly one well-formed <think>...</think> at the start, then a non-empty answer."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    if completion.count(opening) != 1 or completion.count(closing) != 1:
        return 0.0  # missing, repeated or nested tags
    start = completion.index(opening)
    end = completion.index(closing)
    if completion[:start].strip() or end < start:
        return 0.0
    if not completion[start + len(opening) : end].strip():
        return 0.0  # an empty thought is no thought
    return 1.0 if completion[end + len(closing) :].strip() else 0.0


def _check_length(params: Mapping[str, Any]) -> None:
    for name in ("max_length", "buffer"):
        value = params[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"length: {name} must be a whole number, not {value!r}")
    _length_window(params["max_length"], params["buffer"], params["unit"])


def _length_window(max_length: int, buffer: int, unit: str) -> None:
    if unit not in ("chars", "words"):
        raise ValueError(f"length: unit must be 'chars' or 'words', not {unit!r}")
    if max_length <= 0 or buffer < 0 or buffer > max_length:
        raise ValueError(
            f"length: need 0 <= buffer <= max_length and max_length > 0 "
            f"(got max_length={max_length}, buffer={buffer})"
        )


@builtin("length", kind="rule", bounded=True, check=_check_length)
def length(
    completion: str,
    truncated: bool,
    max_length: int = 4096,
    buffer: int = 512,
    unit: str = "chars",
) -> float:
    """Overlong penalty in [-1, 0]: 0 within max_length - buffer, ramps to -1; truncated is -1."""
    _length_window(max_length, buffer, unit)
    if truncated:
        return -1.0
    size = len(completion) if unit == "chars" else len(completion.split())
    soft_limit = max_length - buffer
    if size <= soft_limit:
        return 0.0
    if size >= max_length or buffer == 0:
        return -1.0
    return -(size - soft_limit) / buffer
