"""A scored file as columns: what the report reads, checked line by line.

Each line goes through the project's one JSONL reader; each field is checked here, and a bad
one is an ``InputError`` naming the file and the line. Values are kept as numpy columns (NaN
where a number is null or absent) so that a run of a million rollouts is summarized with array
operations, not per-rollout objects.

Besides the scored-JSONL contract (``id``, ``group``, ``reward``, ``status``, ``components``,
``errors``, ``advantage``) a line may carry ``timing``: component name -> seconds spent on
that rollout (written by ``rewardsmith score --timing``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rewardsmith._system.gcpause import gc_paused

from ..errors import InputError
from ..files import read_json_objects
from ..types import Status

__all__ = ["STATUSES", "ScoredColumns", "read_scored"]

STATUSES: tuple[str, ...] = tuple(status.value for status in Status)
_STATUS_INDEX = {name: index for index, name in enumerate(STATUSES)}

Floats = NDArray[np.float64]


@dataclass
class ScoredColumns:
    """One scored file, column by column, rows in file order.

    ``reward``, ``advantage``, each of ``components`` and of ``timing`` are float64 with NaN
    where the value is null or absent. ``status`` holds indices into ``STATUSES``.
    ``failures[name]`` counts why a component has no value: ``error``, ``timeout`` (an error
    message that says it timed out) and ``masked`` (null without an error: it abstained).
    """

    source: str
    ids: list[str]
    groups: list[str]
    reward: Floats
    status: NDArray[np.int8]
    advantage: Floats
    components: dict[str, Floats]
    timing: dict[str, Floats]
    failures: dict[str, dict[str, int]]
    errors: dict[int, dict[str, str]] = field(default_factory=dict)  # row -> messages
    # Pairwise-judged component -> mean of its rollouts' ``position_bias`` metric (JSONL).
    position_bias: dict[str, float] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def has_timing(self) -> bool:
        return any(bool(np.isfinite(column).any()) for column in self.timing.values())

    def row(self, index: int) -> dict[str, Any]:
        """One rollout as plain values (None for NaN), for the page's rollout details."""

        def plain(value: float) -> float | None:
            return None if math.isnan(value) else float(value)

        return {
            "id": self.ids[index],
            "group": self.groups[index],
            "reward": plain(self.reward[index]),
            "status": STATUSES[int(self.status[index])],
            "advantage": plain(self.advantage[index]),
            "components": {n: plain(c[index]) for n, c in self.components.items()},
            "timing": {n: plain(c[index]) for n, c in self.timing.items()
                       if not math.isnan(c[index])},
            "errors": dict(self.errors.get(index, {})),
        }


class _Sparse:
    """A column filled as lines come: the rows that have a value, and the values."""

    __slots__ = ("rows", "values")

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.values: list[float] = []

    def column(self, size: int) -> Floats:
        out = np.full(size, np.nan)
        if self.rows:
            out[np.asarray(self.rows, dtype=np.intp)] = np.asarray(self.values, dtype=np.float64)
        return out


def _number(value: Any, what: str, source: str, line: int, *, nonnegative: bool = False
            ) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{what} must be a number or null, got {value!r}", source=source,
                         line=line)
    number = float(value)
    if not math.isfinite(number):
        raise InputError(f"{what} is {value!r}: write null for a missing value", source=source,
                         line=line)
    if nonnegative and number < 0:
        raise InputError(f"{what} is {value!r}: seconds cannot be negative", source=source,
                         line=line)
    return number


def _mapping(data: dict[str, Any], key: str, source: str, line: int) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{key!r} must be an object (name -> value), got "
                         f"{type(value).__name__}", source=source, line=line)
    return value


def _failure_kind(message: str | None) -> str:
    if message is None:
        return "masked"
    return "timeout" if "timed out" in message else "error"


def read_scored(path: str | Path) -> ScoredColumns:
    """Read a scored JSONL file (or Parquet, by extension: no timing there) into columns.

    ``InputError`` names the file and line of the first line that is not valid JSON, not an
    object, lacks ``id`` or ``group``, has a value of the wrong type, or repeats an ``id``;
    and the file when it holds no line at all.
    """
    from rewardsmith.files.parquet import is_parquet

    if is_parquet(path):
        return _from_parquet(path)
    # A million lines build millions of small objects that form no cycles: the collector's
    # passes over them would cost more than the reading.
    with gc_paused():
        return _read_jsonl(path)


def _read_jsonl(path: str | Path) -> ScoredColumns:
    source = str(path)
    ids: list[str] = []
    groups: list[str] = []
    rewards: list[float] = []
    advantages: list[float] = []
    statuses: list[int] = []
    components: dict[str, _Sparse] = {}
    timing: dict[str, _Sparse] = {}
    failures: dict[str, dict[str, int]] = {}
    errors: dict[int, dict[str, str]] = {}
    seen: dict[str, int] = {}
    bias: dict[str, list[float]] = {}
    nan = math.nan
    for line, data in read_json_objects(path):
        row = len(ids)
        for key in ("id", "group"):
            if key not in data or data[key] is None:
                raise InputError(f"missing {key!r}", source=source, line=line)
        rollout_id = str(data["id"])
        first = seen.setdefault(rollout_id, line)
        if first != line:
            raise InputError(f"id {rollout_id!r} was already used on line {first}: ids must be "
                             f"unique", source=source, line=line)
        status = data.get("status", "ok")
        code = _STATUS_INDEX.get(status) if isinstance(status, str) else None
        if code is None:
            raise InputError(f"status must be one of {', '.join(STATUSES)}, got {status!r}",
                             source=source, line=line)
        reward = data.get("reward")
        if type(reward) is not float or reward - reward != 0:  # fast path: a finite float
            reward = _number(reward, "'reward'", source, line)
        advantage = data.get("advantage")
        if advantage is not None and (type(advantage) is not float
                                      or advantage - advantage != 0):
            advantage = _number(advantage, "'advantage'", source, line)
        messages = data.get("errors")
        if type(messages) is not dict:  # None is no entries; anything else not an object fails
            messages = _mapping(data, "errors", source, line)
        values = data.get("components")
        if type(values) is not dict:  # None is no entries; anything else not an object fails
            values = _mapping(data, "components", source, line)
        for name, value in values.items():
            if type(value) is not float or value - value != 0:
                value = _number(value, f"component {name!r}", source, line)
            column = components.get(name)
            if column is None:
                column = components[name] = _Sparse()
            if value is None:
                kind = _failure_kind(str(messages[name]) if name in messages else None)
                counts = failures.setdefault(name, {"error": 0, "timeout": 0, "masked": 0})
                counts[kind] += 1
                continue
            column.rows.append(row)
            column.values.append(value)
        times = data.get("timing")
        if type(times) is not dict:  # None is no entries; anything else not an object fails
            times = _mapping(data, "timing", source, line)
        for name, seconds in times.items():
            if type(seconds) is not float or not 0 <= seconds < math.inf:
                seconds = _number(seconds, f"timing of {name!r}", source, line,
                                  nonnegative=True)
                if seconds is None:
                    continue
            column = timing.get(name)
            if column is None:
                column = timing[name] = _Sparse()
            column.rows.append(row)
            column.values.append(seconds)
        if messages:
            errors[row] = {str(k): str(v) for k, v in messages.items()}
        metrics = data.get("metrics")
        if type(metrics) is dict:
            for key, value in metrics.items():
                if key.endswith(".position_bias") and type(value) in (float, int):
                    bias.setdefault(key[: -len(".position_bias")], []).append(float(value))
        ids.append(rollout_id)
        groups.append(str(data["group"]))
        rewards.append(nan if reward is None else reward)
        advantages.append(nan if advantage is None else advantage)
        statuses.append(code)
    size = len(ids)
    if size == 0:
        raise InputError("holds no scored rollouts (only blank lines, or nothing)",
                         source=source)
    for name in components:
        failures.setdefault(name, {"error": 0, "timeout": 0, "masked": 0})
    return ScoredColumns(
        source=source,
        ids=ids,
        groups=groups,
        reward=np.asarray(rewards, dtype=np.float64),
        status=np.asarray(statuses, dtype=np.int8),
        advantage=np.asarray(advantages, dtype=np.float64),
        components={name: column.column(size) for name, column in components.items()},
        timing={name: column.column(size) for name, column in timing.items()},
        failures=failures,
        errors=errors,
        position_bias={name: math.fsum(v) / len(v) for name, v in bias.items()},
    )


def _from_parquet(path: str | Path) -> ScoredColumns:
    from rewardsmith.files.parquet import read_scores_parquet

    scores = read_scores_parquet(path)
    if not scores:
        raise InputError("holds no scored rollouts", source=str(path))
    seen: set[str] = set()
    for number, score in enumerate(scores, start=1):
        if score.id in seen:
            raise InputError(f"row {number}: id {score.id!r} appears twice: ids must be unique",
                             source=str(path))
        seen.add(score.id)
    names = list(dict.fromkeys(n for s in scores for n in s.components))
    failures = {n: {"error": 0, "timeout": 0, "masked": 0} for n in names}
    for score in scores:
        for name, value in score.components.items():
            if value is None:
                failures[name][_failure_kind(score.errors.get(name))] += 1

    def floats(values: list[float | None]) -> Floats:
        return np.asarray([math.nan if v is None else v for v in values], dtype=np.float64)

    return ScoredColumns(
        source=str(path),
        ids=[s.id for s in scores],
        groups=[s.group for s in scores],
        reward=floats([s.reward for s in scores]),
        status=np.asarray([_STATUS_INDEX[s.status.value] for s in scores], dtype=np.int8),
        advantage=floats([s.advantage for s in scores]),
        components={n: floats([s.components.get(n) for s in scores]) for n in names},
        timing={},
        failures=failures,
        errors={i: dict(s.errors) for i, s in enumerate(scores) if s.errors},
    )
