"""Deciding on the host whether a test's result matches what was expected.

The program's output arrives as text: printed lines, or a value encoded by the harness from
exact built-in types only. Nothing the program defined (an ``__eq__`` that always says True)
takes part in a comparison.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["COMPARE_MODES", "DEFAULT_FLOAT_TOLERANCE", "decode_typed", "outputs_match",
           "values_match"]

# How printed output is compared (the ``compare`` param of ``reward: code``).
COMPARE_MODES = ("exact", "tokens", "float")
DEFAULT_FLOAT_TOLERANCE = 1e-6  # ``compare: float`` without a float_tolerance
# A token, as judges' checkers read them: a run of anything but ASCII whitespace.
_WORD = re.compile(r"[^ \t\n\r\f\v]+")


def _lines(text: str) -> list[str]:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return [line.rstrip() for line in text.rstrip().split("\n")]


def _number(token: str) -> float | None:
    try:
        value = float(token)
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def _float_token(token: str) -> bool:
    """A printed float (``0.5``, ``1e-9``): the only kind of token a tolerance loosens.
    Integers (``7000000``) and words compare as text."""
    return any(mark in token for mark in ".eE") and _number(token) is not None


def _finite(value: int | float) -> float | None:
    """``value`` as a finite float, or None (an int past the float range, inf, nan)."""
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _close(a: float, b: float, tolerance: float) -> bool:
    return abs(a - b) <= tolerance * max(1.0, abs(b))


def _tokens_match(got_tokens: list[str], want_tokens: list[str],
                  tolerance: float | None) -> bool:
    if len(got_tokens) != len(want_tokens):
        return False
    for a, b in zip(got_tokens, want_tokens):
        if a == b:
            continue
        if tolerance is None or not _float_token(b):
            return False
        x, y = _number(a), _number(b)
        if x is None or y is None or not _close(x, y, tolerance):
            return False
    return True


def outputs_match(got: str, expected: str, tolerance: float | None = None,
                  mode: str = "exact") -> bool:
    """Printed output against the expected text, by ``mode`` (see ``COMPARE_MODES``).

    ``exact``: equal after trailing whitespace is dropped from each line and from the end.
    ``tokens``: the same sequence of whitespace-separated tokens (runs of spaces, leading
    spaces and line breaks do not matter). ``float``: as ``tokens``, with ``tolerance``
    defaulting to ``DEFAULT_FLOAT_TOLERANCE``. With a tolerance, where the expected token is
    a float the printed number may differ by that much (absolute, or relative past 1);
    integer and word tokens must match exactly whatever the tolerance.
    """
    if mode == "exact":
        got_lines, want_lines = _lines(got), _lines(expected)
        if got_lines == want_lines:
            return True
        if tolerance is None or len(got_lines) != len(want_lines):
            return False
        return all(_tokens_match(_WORD.findall(a), _WORD.findall(b), tolerance)
                   for a, b in zip(got_lines, want_lines))
    if mode == "tokens":
        return _tokens_match(_WORD.findall(got), _WORD.findall(expected), tolerance)
    if mode == "float":
        return _tokens_match(_WORD.findall(got), _WORD.findall(expected),
                             DEFAULT_FLOAT_TOLERANCE if tolerance is None else tolerance)
    raise ValueError(f"compare mode {mode!r} is not one of {', '.join(COMPARE_MODES)}")


def values_match(got: Any, expected: Any, tolerance: float | None = None) -> bool:
    """Two plain values, equal as Python compares them; with ``tolerance``, a number may
    differ by that much from an expected ``float`` (never from an expected ``int``: integer
    answers compare exactly)."""
    if isinstance(got, bool) or isinstance(expected, bool):
        return bool(got == expected)
    if isinstance(got, (int, float)) and isinstance(expected, (int, float)):
        if tolerance is not None and isinstance(expected, float):
            x, y = _finite(got), _finite(expected)
            if x is not None and y is not None:
                return _close(x, y, tolerance)
        return bool(got == expected)
    if isinstance(got, (list, tuple)) and isinstance(expected, (list, tuple)):
        return type(got) is type(expected) and len(got) == len(expected) and all(
            values_match(a, b, tolerance) for a, b in zip(got, expected))
    if isinstance(got, dict) and isinstance(expected, dict):
        return got.keys() == expected.keys() and all(
            values_match(got[k], expected[k], tolerance) for k in got)
    return bool(got == expected)


class _BadEncoding(ValueError):
    pass


def decode_typed(data: Any, depth: int = 0) -> Any:
    """Rebuild a value the harness encoded with its types kept (see ``_typed`` there)."""
    if depth > 210:
        raise _BadEncoding("nested too deeply")
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode_typed(v, depth + 1) for v in data]
    if isinstance(data, dict) and len(data) == 1:
        (tag, inner), = data.items()
        if tag == "f" and isinstance(inner, str):
            return float(inner)
        if tag == "t" and isinstance(inner, list):
            return tuple(decode_typed(v, depth + 1) for v in inner)
        if tag == "s" and isinstance(inner, list):
            return frozenset(decode_typed(v, depth + 1) for v in inner)
        if tag == "d" and isinstance(inner, list):
            return {decode_typed(k, depth + 1): decode_typed(v, depth + 1) for k, v in inner}
    raise _BadEncoding(f"not a typed value: {json.dumps(data)[:80]}")
