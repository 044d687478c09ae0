"""Reading rollouts and writing scores, with the field names users already have.

Rollout JSONL, one object a line. Accepted names:

- ``completion`` or ``response`` (text, or a list of chat messages) — required
- ``prompt`` (text or chat messages)
- ``answer``, ``label`` or ``ground_truth`` (any JSON value)
- ``group``, ``group_id``, ``prompt_id`` or ``group_index`` (default: a hash of the prompt)
- ``id`` (default: the line number)
- ``metadata`` (an object; other unknown top-level keys are added to it)
- ``truncated``, or ``finish_reason: "length"``, or ``status: "truncated"``

A line that cannot be read is an ``InputError`` with its line number; nothing is dropped
silently.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from .errors import InputError
from .types import Rollout, Score, content_hash

__all__ = [
    "RolloutReader",
    "rollout_from_dict",
    "read_json_objects",
    "read_rollouts",
    "read_scores",
    "score_line",
    "write_scores",
    "group_rollouts",
    "OnBadLine",
]

OnBadLine = Literal["fail", "skip"]

_COMPLETION_KEYS = ("completion", "response")
_ANSWER_KEYS = ("answer", "label", "ground_truth")
_GROUP_KEYS = ("group", "group_id", "prompt_id", "group_index")
_KNOWN_KEYS = frozenset(
    (*_COMPLETION_KEYS, *_ANSWER_KEYS, *_GROUP_KEYS, "id", "prompt", "metadata", "truncated",
     "finish_reason", "status")
)


def _text_or_messages(value: Any, key: str) -> str | list[dict[str, Any]]:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, dict) for m in value):
        return value
    if isinstance(value, dict) and "content" in value:
        return [value]
    raise ValueError(
        f"{key!r} must be text or a list of chat messages, not {type(value).__name__}"
    )


def _first(data: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[str | None, Any]:
    for key in keys:
        if key in data:
            return key, data[key]
    return None, None


def rollout_from_dict(data: Any, *, default_id: str) -> Rollout:
    """Build a ``Rollout`` from one record, accepting the aliases; ``ValueError`` says what is wrong."""
    if not isinstance(data, Mapping):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    key, completion = _first(data, _COMPLETION_KEYS)
    if key is None:
        raise ValueError("missing 'completion' (or 'response')")
    if completion is None:
        completion = ""
    completion = _text_or_messages(completion, key)
    prompt = data.get("prompt", "")
    prompt = "" if prompt is None else _text_or_messages(prompt, "prompt")
    _, answer = _first(data, _ANSWER_KEYS)
    metadata = data.get("metadata")
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, dict):
        raise ValueError(f"'metadata' must be an object, not {type(metadata).__name__}")
    extras = {k: v for k, v in data.items() if k not in _KNOWN_KEYS}
    if extras:
        metadata = {**extras, **metadata}
    group_key, group = _first(data, _GROUP_KEYS)
    if group_key is None or group is None:
        group = content_hash(prompt, length=12)
    elif isinstance(group, (dict, list)):
        raise ValueError(f"{group_key!r} must be a string or number, not {type(group).__name__}")
    truncated = data.get("truncated", False)
    if truncated is None:
        truncated = False
    if not isinstance(truncated, bool):
        raise ValueError(f"'truncated' must be true or false, not {truncated!r}")
    if data.get("finish_reason") == "length" or data.get("status") == "truncated":
        truncated = True
    rollout_id = data.get("id")
    if rollout_id is None:
        rollout_id = default_id
    elif isinstance(rollout_id, (dict, list)):
        raise ValueError("'id' must be a string or number")
    return Rollout(
        id=str(rollout_id),
        group=str(group),
        prompt=prompt,
        completion=completion,
        answer=answer,
        metadata=metadata,
        truncated=truncated,
    )


@dataclass
class RolloutReader:
    """Reads rollout JSONL; with ``on_bad_line="skip"`` bad lines are collected in ``bad_lines``."""

    source: str
    on_bad_line: OnBadLine = "fail"
    bad_lines: list[InputError] = field(default_factory=list)
    lines_read: int = 0

    def iter_lines(self, lines: Iterable[str | bytes]) -> Iterator[Rollout]:
        for number, raw in enumerate(lines, start=1):
            self.lines_read = number
            text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
            if not text.strip():
                continue
            try:
                try:
                    data = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from exc
                yield rollout_from_dict(data, default_id=str(number))
            except (ValueError, RecursionError) as exc:
                error = InputError(str(exc), source=self.source, line=number)
                if self.on_bad_line == "fail":
                    raise error from exc
                self.bad_lines.append(error)

    def read(self, path: str | Path) -> Iterator[Rollout]:
        try:
            handle = open(path, encoding="utf-8", errors="replace", newline="")  # noqa: SIM115
        except OSError as exc:
            raise InputError(f"cannot open: {exc.strerror or exc}", source=str(path)) from exc
        with handle:
            yield from self.iter_lines(handle)


def read_rollouts(path: str | Path, *, on_bad_line: OnBadLine = "fail") -> list[Rollout]:
    """Every rollout in a JSONL file (bad lines raise, or are skipped with ``on_bad_line``)."""
    return list(RolloutReader(str(path), on_bad_line).read(path))


def group_rollouts(rollouts: Iterable[Rollout]) -> list[list[Rollout]]:
    """Rollouts gathered by ``group``, groups in order of first appearance."""
    groups: dict[str, list[Rollout]] = {}
    for rollout in rollouts:
        groups.setdefault(rollout.group, []).append(rollout)
    return list(groups.values())


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def score_line(score: Score, extra: Mapping[str, Any] | None = None) -> str:
    """One scored JSONL line (no newline)."""
    data = score.to_dict()
    if extra:
        data.update(extra)
    return json.dumps(data, ensure_ascii=False, allow_nan=False, default=_clean)


def write_scores(target: str | Path | IO[str], scores: Iterable[Score]) -> int:
    """Write scored JSONL to a path or an open text file; returns the number of lines."""
    if isinstance(target, (str, Path)):
        with open(target, "w", encoding="utf-8") as handle:
            return write_scores(handle, scores)
    count = 0
    for score in scores:
        target.write(score_line(score) + "\n")
        count += 1
    target.flush()
    return count


def read_json_objects(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line of a JSONL file; an unopenable file or a
    line that is not a JSON object is an ``InputError`` naming the file and the line."""
    source = str(path)
    try:
        handle = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror or exc}", source=source) from exc
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"not valid JSON ({exc.msg} at column {exc.colno})",
                                 source=source, line=number) from exc
            except RecursionError as exc:
                raise InputError("JSON nested too deeply", source=source, line=number) from exc
            if not isinstance(data, dict):
                raise InputError(f"expected a JSON object, got {type(data).__name__}",
                                 source=source, line=number)
            yield number, data


def read_scores(path: str | Path) -> list[Score]:
    """Read scored JSONL; a bad line is an ``InputError`` with its line number.

    Each line needs ``id`` and ``group`` (a missing group would silently merge rollouts into
    one GRPO group)."""
    out: list[Score] = []
    for number, data in read_json_objects(path):
        missing = [key for key in ("id", "group") if key not in data]
        if missing:
            raise InputError(f"missing {', '.join(map(repr, missing))}", source=str(path),
                             line=number)
        try:
            out.append(Score.from_dict(data))
        except (ValueError, TypeError, KeyError) as exc:
            raise InputError(f"not a scored rollout: {exc}", source=str(path),
                             line=number) from exc
    return out
