"""Scored files in JSONL: one line per rollout, its reward, status, components and errors.

The format is the contract in the README: the rollout's ``id`` and ``group``, plus ``reward``
(a number, or null when masked), ``status``, ``components``, ``errors`` and ``advantage``.
Non-finite numbers are written as null: JSON has no NaN.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from rewardsmith.errors import InputError
from rewardsmith.files.atomic import atomic_text
from rewardsmith.files.jsonl import read_json_objects
from rewardsmith.types import Score

__all__ = ["read_scores", "score_line", "scores_by_id", "write_scores"]


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
