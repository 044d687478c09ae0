"""Reading rollouts, with the field names users already have.

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

import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rewardsmith._system.gcpause import gc_paused
from rewardsmith.errors import InputError
from rewardsmith.files.jsonl import (
    read_json_objects,
    read_jsonl,
)
from rewardsmith.types import (
    Rollout,
    content_hash,
)

__all__ = [
    "GroupCheck",
    "MixedGroups",
    "RolloutReader",
    "rollout_from_dict",
    "rollout_and_group",
    "read_json_objects",
    "read_rollouts",
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
    return rollout_and_group(data, default_id)[0]


def rollout_and_group(data: Any, default_id: str) -> tuple[Rollout, Any]:
    """The rollout, and its group as the record wrote it (None when it has none)."""
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
    group_key, written = _first(data, _GROUP_KEYS)
    if group_key is None or written is None:
        group = content_hash(prompt, length=12)
    elif isinstance(written, (dict, list)):
        raise ValueError(f"{group_key!r} must be a string or number, not "
                         f"{type(written).__name__}")
    else:
        group = written
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
    rollout = Rollout(
        id=str(rollout_id),
        group=str(group),
        prompt=prompt,
        completion=completion,
        answer=answer,
        metadata=metadata,
        truncated=truncated,
    )
    return rollout, written


class MixedGroups(InputError):
    """A file whose groups are written two ways (some rollouts with a group and some without,
    or ``1`` and ``"1"``), refused under ``strict_groups``."""


_SHOWN_LINES = 5


class GroupCheck:
    """Watches how a file writes its groups, to say where two ways are mixed.

    A rollout without a group is grouped by a hash of its prompt, and groups are text once read:
    in a file that gives some rollouts a group and not others, or writes one group as ``1`` and
    another as ``"1"``, rollouts end up in groups nobody meant (GRPO normalizes over them)."""

    def __init__(self, source: str, unit: str = "line"):
        self.source = source
        self.unit = unit
        self.without: list[int] = []  # the first lines without a group
        self.without_count = 0
        self.with_group: list[int] = []
        self.with_count = 0
        self._text: dict[str, int] = {}  # group written as text -> first line
        self._other: dict[str, tuple[Any, int]] = {}  # written as a number: its text -> first

    def add(self, number: int, written: Any) -> None:
        if written is None:
            self.without_count += 1
            if len(self.without) < _SHOWN_LINES:
                self.without.append(number)
            return
        self.with_count += 1
        if len(self.with_group) < _SHOWN_LINES:
            self.with_group.append(number)
        if type(written) is str:
            self._text.setdefault(written, number)
        else:
            self._other.setdefault(str(written), (written, number))

    def problems(self) -> list[str]:
        """What is mixed, naming lines (empty when the file writes its groups one way)."""
        out = []
        if self.without_count and self.with_count:
            out.append(
                f"{self.source}: {self.without_count:,} rollout(s) have no group "
                f"({self._where(self.without, self.without_count)}) and are grouped by a hash "
                f"of their prompt, while {self.with_count:,} have one "
                f"({self._where(self.with_group, self.with_count)}): give every rollout a "
                f"group, or none")
        clashes = [(text, line, self._other[text]) for text, line in self._text.items()
                   if text in self._other]
        if clashes:
            shown = "; ".join(f"{written!r} ({self.unit} {other}) and {text!r} ({self.unit} "
                              f"{line})" for text, line, (written, other) in
                              clashes[:_SHOWN_LINES])
            more = f" and {len(clashes) - _SHOWN_LINES} more" if len(clashes) > _SHOWN_LINES \
                else ""
            out.append(f"{self.source}: groups written as numbers and as text are one group "
                       f"once read: {shown}{more}: write each group one way")
        return out

    def _where(self, lines: list[int], count: int) -> str:
        shown = ", ".join(map(str, lines))
        more = f" and {count - len(lines):,} more" if count > len(lines) else ""
        return f"{self.unit}s {shown}{more}" if count > 1 else f"{self.unit} {shown}"

    def finish(self, strict: bool, warnings: list[str] | None) -> None:
        """Raise ``MixedGroups`` (``strict``) or add the problems to ``warnings``."""
        problems = self.problems()
        if not problems:
            return
        if strict:
            raise MixedGroups("; ".join(problems) + " (or score without --strict-groups to "
                              "be warned only)")
        if warnings is not None:
            warnings.extend(problems)


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
    # Groups written two ways (see ``GroupCheck``): an error at the end of the file when
    # strict, else a line each in ``warnings``.
    strict_groups: bool = False
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._ids = UniqueIds(self.source)
        self.groups = GroupCheck(self.source)

    def _rollout(self, number: int, value: Any, error: InputError | None) -> Rollout | None:
        try:
            if error is not None:
                raise error
            rollout, written = rollout_and_group(value, str(number))
        except (ValueError, RecursionError) as exc:
            bad = exc if isinstance(exc, InputError) else InputError(
                str(exc), source=self.source, line=number)
            if self.on_bad_line == "fail":
                raise bad from None
            self.bad_lines.append(bad)
            return None
        self._ids.add(rollout.id, number)
        self.groups.add(number, written)
        return rollout

    def read(self, path: str | Path) -> Iterator[Rollout]:
        first_line = self._ids.first_line
        note_group = self.groups.add
        for number, value, error in read_jsonl(path, source=self.source):
            self.lines_read = number
            if error is None:  # the common case inline: files hold millions of lines
                try:
                    rollout, written = rollout_and_group(value, str(number))
                except (ValueError, RecursionError):
                    pass  # reported by the general path below
                else:
                    if first_line.setdefault(rollout.id, number) != number:
                        self._ids.add(rollout.id, number)  # raises, naming both lines
                    note_group(number, written)
                    yield rollout
                    continue
            found = self._rollout(number, value, error)
            if found is not None:
                yield found
        self.groups.finish(self.strict_groups, self.warnings)


def read_rollouts(path: str | Path, *, on_bad_line: OnBadLine = "fail",
                  strict_groups: bool = False) -> list[Rollout]:
    """Every rollout in a JSONL file (bad lines raise, or are skipped with ``on_bad_line``).

    Groups written two ways are a ``MixedGroups`` error with ``strict_groups``, else a
    ``UserWarning`` naming the lines."""
    reader = RolloutReader(str(path), on_bad_line, strict_groups=strict_groups)
    with gc_paused():  # a file's rollouts form no reference cycles: no collector passes
        rollouts = list(reader.read(path))
    for problem in reader.warnings:
        warnings.warn(problem, UserWarning, stacklevel=2)
    return rollouts


def group_rollouts(rollouts: Iterable[Rollout]) -> list[list[Rollout]]:
    """Rollouts gathered by ``group``, groups in order of first appearance."""
    groups: dict[str, list[Rollout]] = {}
    for rollout in rollouts:
        groups.setdefault(rollout.group, []).append(rollout)
    return list(groups.values())
