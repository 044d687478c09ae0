"""Reading rollouts and writing scores, with the field names users already have.

Rollout JSONL, one object a line. Accepted names:

- ``completion`` or ``response`` (text, or a list of chat messages) — required
- ``prompt`` (text or chat messages)
- ``answer``, ``label`` or ``ground_truth`` (any JSON value)
- ``group``, ``group_id``, ``prompt_id`` or ``group_index`` (default: a hash of the prompt)
- ``id`` (default: the line number)
- ``metadata`` (an object; other unknown top-level keys are added to it)
- ``truncated``, or ``finish_reason: "length"``, or ``status: "truncated"``

A line that cannot be read (not UTF-8, not JSON, not a rollout) is an ``InputError`` with its
line number; nothing is dropped silently. Two rollouts with one ``id`` are refused, naming both
lines: results are matched to rollouts by id downstream.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from .errors import InputError
from .files.atomic import atomic_text
from .files.jsonl import parse_json_line, read_json_objects, read_jsonl
from .gcpause import gc_paused
from .types import Rollout, Score, content_hash

__all__ = [
    "RolloutReader",
    "scores_by_id",
    "rollout_from_dict",
    "read_json_objects",
    "read_rollouts",
    "read_scores",
    "score_line",
    "write_scores",
    "group_rollouts",
    "OnBadLine",
    "UniqueIds",
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


class UniqueIds:
    """Refuses a second rollout with an id already seen, naming where both are."""

    def __init__(self, source: str, unit: str = "line"):
        self.source = source
        self.unit = unit
        self.first_line: dict[str, int] = {}  # id -> where it was first seen

    def add(self, rollout_id: str, number: int) -> None:
        first = self.first_line.setdefault(rollout_id, number)
        if first != number:
            raise InputError(
                f"rollout id {rollout_id!r} is also the id of {self.unit} {first}: ids must be "
                f"unique (scores are matched to rollouts by id)", source=self.source,
                line=number if self.unit == "line" else None)


@dataclass
class RolloutReader:
    """Reads rollout JSONL; with ``on_bad_line="skip"`` bad lines are collected in ``bad_lines``.

    A duplicate id is refused even when skipping: which of the two is right cannot be known."""

    source: str
    on_bad_line: OnBadLine = "fail"
    bad_lines: list[InputError] = field(default_factory=list)
    lines_read: int = 0

    def __post_init__(self) -> None:
        self._ids = UniqueIds(self.source)

    def _rollout(self, number: int, value: Any, error: InputError | None) -> Rollout | None:
        try:
            if error is not None:
                raise error
            rollout = rollout_from_dict(value, default_id=str(number))
        except (ValueError, RecursionError) as exc:
            bad = exc if isinstance(exc, InputError) else InputError(
                str(exc), source=self.source, line=number)
            if self.on_bad_line == "fail":
                raise bad from None
            self.bad_lines.append(bad)
            return None
        self._ids.add(rollout.id, number)
        return rollout

    def iter_lines(self, lines: Iterable[str | bytes]) -> Iterator[Rollout]:
        for number, raw in enumerate(lines, start=1):
            self.lines_read = number
            if not raw.strip():
                continue
            value: Any = None
            error: InputError | None = None
            try:
                value = parse_json_line(raw, number, self.source)
            except InputError as exc:
                error = exc
            rollout = self._rollout(number, value, error)
            if rollout is not None:
                yield rollout

    def read(self, path: str | Path) -> Iterator[Rollout]:
        first_line = self._ids.first_line
        for number, value, error in read_jsonl(path, source=self.source):
            self.lines_read = number
            if error is None:  # the common case inline: files hold millions of lines
                try:
                    rollout = rollout_from_dict(value, default_id=str(number))
                except (ValueError, RecursionError):
                    pass  # reported by the general path below
                else:
                    if first_line.setdefault(rollout.id, number) != number:
                        self._ids.add(rollout.id, number)  # raises, naming both lines
                    yield rollout
                    continue
            found = self._rollout(number, value, error)
            if found is not None:
                yield found


def read_rollouts(path: str | Path, *, on_bad_line: OnBadLine = "fail") -> list[Rollout]:
    """Every rollout in a JSONL file (bad lines raise, or are skipped with ``on_bad_line``)."""
    with gc_paused():  # a file's rollouts form no reference cycles: no collector passes
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
    """Write scored JSONL to a path (replaced atomically: complete or not at all) or an open
    text file; returns the number of lines."""
    if isinstance(target, (str, Path)):
        with atomic_text(target) as handle:
            return write_scores(handle, scores)
    count = 0
    for score in scores:
        target.write(score_line(score) + "\n")
        count += 1
    target.flush()
    return count


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


def scores_by_id(scores: Sequence[Score], which: str) -> dict[str, Score]:
    """Scores by rollout id, to match two scored runs; a repeated id is an ``InputError``
    naming ``which`` run it is in."""
    out: dict[str, Score] = {}
    for score in scores:
        if score.id in out:
            raise InputError(f"rollout id {score.id!r} appears twice in the {which} run: ids "
                             f"must be unique to match two runs")
        out[score.id] = score
    return out
