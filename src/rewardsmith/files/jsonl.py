"""The one JSONL reader: rollouts, scored files, cases and records all go through it.

Lines end at ``\\n`` only (a U+2028 inside a string is text, not a line break), a ``\\r``
before it is ignored, blank lines are skipped, a UTF-8 byte order mark at the start is
dropped. Each line must be valid UTF-8 and valid JSON; a line that is not is reported with its
file and 1-based line number, never repaired or guessed at.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import InputError

__all__ = ["JsonLine", "parse_json_line", "read_json_objects", "read_jsonl"]

_BOM = b"\xef\xbb\xbf"


class JsonLine(NamedTuple):
    """One non-blank line: its number and value, or the error that says why it is unreadable."""

    number: int
    value: Any
    error: InputError | None


def _decode(raw: bytes, number: int, source: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start:exc.start + 1].hex()
        raise InputError(f"not valid UTF-8 (byte 0x{bad} at byte {exc.start + 1} of the line)",
                         source=source, line=number) from None


def parse_json_line(raw: bytes | str, number: int, source: str) -> Any:
    """The JSON value of one line; ``InputError`` (``source:number``) when it cannot be read."""
    text = _decode(raw, number, source) if isinstance(raw, bytes) else raw
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON ({exc.msg} at column {exc.colno})", source=source,
                         line=number) from None
    except RecursionError:
        raise InputError("JSON nested too deeply", source=source, line=number) from None


def read_jsonl(path: str | Path, *, source: str | None = None) -> Iterator[JsonLine]:
    """Each non-blank line of a JSONL file as ``JsonLine``; the caller decides whether a bad
    line stops it. A file that cannot be opened is an ``InputError``."""
    name = str(path) if source is None else source
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror or exc}", source=name) from None
    make = JsonLine._make
    loads = json.loads
    with handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM):]
            try:
                # The common case inline: a valid line costs one decode and one parse.
                yield make((number, loads(raw.decode("utf-8")), None))
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                if not raw.strip():
                    continue
                try:
                    parse_json_line(raw, number, name)
                except InputError as exc:
                    yield make((number, None, exc))


def read_json_objects(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line; the first line that is unreadable or
    not a JSON object is an ``InputError`` naming the file and the line."""
    source = str(path)
    for line in read_jsonl(path):
        if line.error is not None:
            raise line.error
        if not isinstance(line.value, dict):
            raise InputError(f"expected a JSON object, got {type(line.value).__name__}",
                             source=source, line=line.number)
        yield line.number, line.value
