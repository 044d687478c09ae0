"""Scored files (JSONL or Parquet) as tracker steps: one file per step, in the order given.

The lines are read as they are, not through ``Score``, so that fields a ``Score`` does not keep
(``timing``) reach the statistics.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardsmith.files.parquet import (
    is_parquet,
    read_records,
)

from ..errors import InputError
from ..files.jsonl import read_json_objects
from .base import Tracker, Usage
from .stats import StepStats

__all__ = ["LoggedStep", "file_stats", "log_scored_files"]


@dataclass
class LoggedStep:
    step: int
    source: str
    metrics: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "source": self.source, "metrics": dict(self.metrics)}


def _records(path: Path) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if is_parquet(path):
        for number, record in enumerate(read_records(path), start=1):
            yield f"row {number}", record
        return
    for number, record in read_json_objects(path):
        yield f"line {number}", record


def file_stats(path: str | os.PathLike[str], usage: Usage | None = None) -> dict[str, float]:
    """The step metrics of one scored file. A line that is not a scored rollout is an
    ``InputError`` naming the file and the line; a file without lines is one too."""
    source = Path(path)
    stats = StepStats()
    for where, record in _records(source):
        try:
            stats.add([record])
        except InputError as exc:
            raise InputError(f"{where}: {exc.reason}", source=str(source)) from None
    if stats.rollouts == 0:
        raise InputError("no scored rollouts in the file", source=str(source))
    return stats.metrics(usage)


def log_scored_files(paths: Sequence[str | os.PathLike[str]], tracker: Tracker, *,
                     first_step: int | None = None) -> list[LoggedStep]:
    """Log each file as one step, in order, from ``first_step`` (default: the step after the
    tracker's last). Every file is read and checked before the first step is logged, so a bad
    file leaves the tracker untouched."""
    if not paths:
        raise InputError("no scored files given")
    computed = [(str(path), file_stats(path)) for path in paths]
    logged: list[LoggedStep] = []
    for index, (source, metrics) in enumerate(computed):
        step = None if first_step is None else first_step + index
        at = tracker.log_metrics(metrics, step=step)
        logged.append(LoggedStep(at, source, metrics))
    return logged
