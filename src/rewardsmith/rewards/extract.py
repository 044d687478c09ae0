"""Pulling answers out of model text: boxes, markers, numbers, letters.

Everything here is a pure function of its inputs and linear in the text's length, so a 1 MB
completion costs milliseconds, never a regex blow-up.
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = [
    "all_boxed",
    "last_boxed",
    "after_last_marker",
    "NUMBER_PATTERN",
    "find_numbers",
    "last_number",
    "parse_number",
]

_BOX_COMMANDS = ("\\boxed", "\\fbox")


def all_boxed(text: str) -> list[str]:
    """Contents of every ``\\boxed{...}`` / ``\\fbox{...}`` in order, nested braces handled.

    ``\\boxed 5`` (no braces) yields ``5``. An unclosed box (a truncated answer) is skipped.
    """
    if not isinstance(text, str) or "\\" not in text:
        return []
    found: list[str] = []
    index = 0
    length = len(text)
    while True:
        start = -1
        command = ""
        for candidate in _BOX_COMMANDS:
            pos = text.find(candidate, index)
            if pos != -1 and (start == -1 or pos < start):
                start, command = pos, candidate
        if start == -1:
            return found
        cursor = start + len(command)
        if cursor < length and text[cursor].isalpha():
            index = cursor  # e.g. \boxedsomething: not a box
            continue
        while cursor < length and text[cursor] in " \t":
            cursor += 1
        if cursor < length and text[cursor] == "{":
            depth = 0
            for end in range(cursor, length):
                char = text[end]
                if char == "{":
                    depth += 1
                elif char == "}":
                    depth -= 1
                    if depth == 0:
                        found.append(text[cursor + 1 : end].strip())
                        index = end + 1
                        break
            else:
                return found  # unclosed: truncated mid-box
        elif cursor < length and cursor > start + len(command):
            match = re.match(r"[^\s$]+", text[cursor:])
            if match:
                found.append(match.group(0))
                index = cursor + match.end()
            else:
                index = cursor
        else:
            index = cursor


def last_boxed(text: str) -> str | None:
    """Content of the last complete ``\\boxed{...}`` or ``\\fbox{...}``; None when there is none."""
    boxes = all_boxed(text)
    return boxes[-1] if boxes else None


def after_last_marker(text: str, marker: str) -> str | None:
    """The text after the last ``marker``, stripped; None when the marker is absent."""
    if not isinstance(text, str) or not marker or marker not in text:
        return None
    return text.rsplit(marker, 1)[1].strip()


# A number as people and models write it: sign, thousands separators, decimals, exponent.
NUMBER_PATTERN = re.compile(
    r"(?<![\d.])"  # not the tail of a longer number
    r"[-+−]?"
    r"(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)"  # 1,234.5 / 1234 / .5
    r"(?:[eE][-+]?\d+)?"
    r"(?![\d])"
)


def find_numbers(text: str) -> list[str]:
    """Every number in ``text`` as written (thousands commas kept), in order."""
    if not isinstance(text, str):
        return []
    text = text.replace("{,}", ",").replace("\\,", ",").replace("\\!", "")
    return NUMBER_PATTERN.findall(text)


def last_number(text: str) -> str | None:
    """The last number in ``text`` as written, or None."""
    numbers = find_numbers(text)
    return numbers[-1] if numbers else None


_NUMERIC_CLEAN = re.compile(r"[\s$€£¥,]|\\[$%]|\\,|\{,\}")


def parse_number(token: object) -> Fraction | None:
    """A number token (or a number) as an exact Fraction; None when it is not one number.

    Handles thousands commas, currency signs, a trailing ``%`` is *not* stripped (a percent is
    not the same answer), ``1e3``, ``-5``, the Unicode minus, ``.5``, and trailing ``.0``.
    """
    if isinstance(token, bool) or token is None:
        return None
    if isinstance(token, int):
        return Fraction(token)
    if isinstance(token, float):
        if token != token or token in (float("inf"), float("-inf")):
            return None
        return Fraction(repr(token))
    if not isinstance(token, str):
        return None
    cleaned = _NUMERIC_CLEAN.sub("", token.strip()).replace("−", "-").rstrip(".")
    if not cleaned or len(cleaned) > 400:
        return None
    if cleaned.startswith("+"):
        cleaned = cleaned[1:]
    try:
        if "e" in cleaned or "E" in cleaned:
            mantissa, _, exponent = cleaned.lower().partition("e")
            exp = int(exponent)
            if abs(exp) > 400:
                return None
            return Fraction(mantissa) * Fraction(10) ** exp
        return Fraction(cleaned)
    except (ValueError, ZeroDivisionError):
        return None
