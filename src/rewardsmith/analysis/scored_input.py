"""Scored files as the gate and the drift watch read them: every line checked for the fields
they rely on, so that a rollouts file given by mistake, a NaN reward or a duplicated id is an
``InputError`` naming the file and the line instead of a silently wrong verdict.

Besides the scored-JSONL contract (``id``, ``group``, ``reward``, ``status``, ``components``,
``errors``, ``advantage``, ``metrics``) a line may carry ``step`` (a training step, an integer):
a file holding several steps can be split into them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardsmith._system.gcpause import gc_paused
from rewardsmith.files.parquet import (
    is_parquet,
    read_scores_parquet,
)

from ..errors import InputError
from ..files import read_json_objects
from ..types import Score, Status

__all__ = ["ScoredLine", "read_scored"]

_ROLLOUT_KEYS = ("completion", "response", "prompt")
_STATUSES = {status.value: status for status in Status}
_EMPTY: dict[str, Any] = {}


@dataclass(frozen=True, slots=True)
class ScoredLine:
    """One scored rollout with where it came from (``line``: 1-based line or row number)."""

    score: Score
    step: int | None
    line: int


def _number(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a number or null, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{what} is {value!r}: only finite numbers (or null) are accepted")
    return number


def _step(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"'step' must be an integer, got {value!r}")
    return value


def _missing_reward(data: Mapping[str, Any]) -> ValueError:
    hint = (" (this looks like a rollouts file: score it first)"
            if any(key in data for key in _ROLLOUT_KEYS) else "")
    return ValueError(f"no 'reward': not a scored line{hint}")


def _mapping(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key) or _EMPTY
    if type(value) is not dict:
        raise ValueError(f"{key!r} must be an object, got {type(value).__name__}")
    return value


def _score_of(data: Mapping[str, Any]) -> Score:
    """The checked ``Score`` of one scored line (finite floats take the short path)."""
    try:
        rollout_id, group, reward = data["id"], data["group"], data["reward"]
    except KeyError:
        missing = [key for key in ("id", "group") if key not in data]
        if missing:
            raise ValueError(f"missing {', '.join(map(repr, missing))}") from None
        raise _missing_reward(data) from None
    if type(reward) is not float or reward - reward != 0:  # not a finite float
        reward = _number(reward, "'reward'")
    given = data.get("status", "ok")
    status = _STATUSES.get(given) if isinstance(given, str) else None
    if status is None:
        raise ValueError(f"'status' must be one of {sorted(_STATUSES)}, got {given!r}")
    components = dict(_mapping(data, "components"))
    for name, value in components.items():
        if type(value) is not float or value - value != 0:
            components[name] = _number(value, f"component {name!r}")
    errors = _mapping(data, "errors")
    metrics = _mapping(data, "metrics")
    advantage = data.get("advantage")
    if advantage is not None:
        advantage = _number(advantage, "'advantage'")
    return Score(
        id=str(rollout_id), group=str(group), reward=reward, status=status,
        components=components,
        errors={str(k): str(v) for k, v in errors.items()} if errors else {},
        metrics={str(k): float(v) for k, v in metrics.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool)} if metrics else {},
        advantage=advantage)


def _read_jsonl(path: Path) -> list[ScoredLine]:
    out: list[ScoredLine] = []
    append = out.append
    with gc_paused():  # a file's scores form no reference cycles: no collector passes
        for number, data in read_json_objects(path):
            try:
                step = data.get("step")
                append(ScoredLine(_score_of(data), None if step is None else _step(step),
                                  number))
            except (ValueError, TypeError) as exc:
                raise InputError(str(exc), source=str(path), line=number) from None
    return out


def _read_parquet(path: Path) -> list[ScoredLine]:
    out = []
    for number, score in enumerate(read_scores_parquet(path), start=1):
        values = [score.reward, *score.components.values()]
        if any(v is not None and not math.isfinite(v) for v in values):
            raise InputError(f"row {number}: a reward or component that is not finite",
                             source=str(path))
        out.append(ScoredLine(score, None, number))
    return out


def read_scored(path: str | Path) -> list[ScoredLine]:
    """Every scored rollout of a JSONL (or Parquet: ``.parquet``/``.pq``) file, checked.

    ``InputError`` (naming the file, and the line when there is one) for: a file that cannot
    be opened, a line that is not JSON or not an object, a line without ``id``, ``group`` or
    ``reward`` (a rollouts file), a reward or component that is not a finite number or null, an
    unknown status, a ``step`` that is not an integer, an id that appears twice, an empty file.
    """
    source = Path(path)
    if source.is_dir():
        raise InputError("is a folder, not a scored file", source=str(path))
    lines = _read_parquet(source) if is_parquet(source) else _read_jsonl(source)
    if not lines:
        raise InputError("no scored rollouts in the file", source=str(path))
    _refuse_duplicate_ids(lines, str(path))
    return lines


def _refuse_duplicate_ids(lines: Sequence[ScoredLine], source: str) -> None:
    """Ids must be unique within one step (the same id may come back at another step)."""
    seen: dict[tuple[int | None, str], int] = {}
    for item in lines:
        key = (item.step, item.score.id)
        first = seen.setdefault(key, item.line)
        if first != item.line:
            raise InputError(f"rollout id {item.score.id!r} appears again (first on line "
                             f"{first}); ids must be unique", source=source, line=item.line)
