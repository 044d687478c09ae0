"""The reward curve of a training run: per step, the mean reward and the mean of each component.

A step's figures are the ones a tracker logs for that step (``rewardsmith.tracking.stats``: a
trainer adapter logs each scoring call as one step): means over the values present, so a masked
or failed value is left out, never counted as a zero; the population of rollouts; how many had
no reward; the share of groups whose rewards are all equal. They are read from scored lines
that carry their ``step`` (one file for the whole run), from one scored file per step, in
training order, as ``rewardsmith drift`` reads them, or from a step log the ``jsonl`` tracker
wrote (the logged figures themselves; a component is named there as its metric key names it).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.scored_input import ScoredLine, read_scored
from ..errors import ConfigError, InputError
from ..files import read_json_objects, read_jsonl
from ..files.parquet import is_parquet
from ..tracking.stats import StepStats

__all__ = ["StepCurve", "StepRow", "carries_steps", "curve_for", "is_step_log", "step_curve"]


@dataclass(frozen=True)
class StepRow:
    """One training step's figures (``None``: no value to average)."""

    step: int
    rollouts: int
    without_reward: int  # masked, failed or timed out: left out of the means
    reward: float | None
    components: dict[str, float | None]
    zero_variance_groups: int
    ranked_groups: int  # groups with two or more rewards

    @property
    def zero_variance_share(self) -> float | None:
        return self.zero_variance_groups / self.ranked_groups if self.ranked_groups else None

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "rollouts": self.rollouts,
                "without_reward": self.without_reward, "reward": self.reward,
                "components": dict(self.components),
                "zero_variance_groups": self.zero_variance_groups,
                "ranked_groups": self.ranked_groups}


@dataclass(frozen=True)
class StepCurve:
    """The run's steps in order, and every component seen (in the order first seen)."""

    rows: list[StepRow]
    components: list[str]
    sources: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"sources": list(self.sources), "components": list(self.components),
                "steps": [row.to_dict() for row in self.rows]}


def _mean(values: array[float]) -> float | None:
    # numpy's mean, as the trackers' statistics take it, so the figures are the logged ones.
    return float(np.frombuffer(values, dtype=np.float64).mean()) if values else None


def _row(step: int, lines: Sequence[ScoredLine]) -> StepRow:
    stats = StepStats()
    stats.add(line.score for line in lines)
    ranked = [seen for seen in stats.groups.values() if seen[0] >= 2]
    return StepRow(
        step=step, rollouts=stats.rollouts, without_reward=stats.rollouts - len(stats.rewards),
        reward=_mean(stats.rewards),
        components={name: _mean(values) for name, values in stats.components.items()},
        zero_variance_groups=sum(1 for seen in ranked if seen[1] == seen[2]),
        ranked_groups=len(ranked))


def _first_line(path: str | Path) -> Any:
    if is_parquet(path):
        return None
    for line in read_jsonl(path):
        return line.value
    return None


def carries_steps(path: str | Path) -> bool:
    """Whether a scored JSONL file's first line has a ``step`` (Parquet files carry none), or
    the file is a step log."""
    first = _first_line(path)
    return isinstance(first, dict) and "step" in first


def is_step_log(path: str | Path) -> bool:
    """Whether a JSONL file is a step log (its first line a step with its ``metrics``)."""
    first = _first_line(path)
    return isinstance(first, dict) and "metrics" in first and "reward" not in first


def _count(metrics: dict[str, Any], key: str, where: str) -> float:
    value = metrics.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{where}: {key!r} must be a count, got {value!r}")
    return float(value)


def _mean_of(metrics: dict[str, Any], key: str, where: str) -> float | None:
    value = metrics.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ValueError(f"{where}: {key!r} must be a number, got {value!r}")
    return float(value)


def _logged_row(data: dict[str, Any], where: str) -> StepRow:
    """One step log line as a row: the figures the tracker was sent."""
    step, metrics = data.get("step"), data.get("metrics")
    if isinstance(step, bool) or not isinstance(step, int):
        raise ValueError(f"{where}: 'step' must be an integer, got {step!r}")
    if not isinstance(metrics, dict):
        raise ValueError(f"{where}: 'metrics' must be an object of the step's figures")
    rollouts = int(_count(metrics, "rollouts", where))
    names = [key[len("components/"):-len("/count")] for key in metrics
             if key.startswith("components/") and key.endswith("/count")]
    zero = int(_count(metrics, "groups/zero_variance", where))
    return StepRow(
        step=step, rollouts=rollouts,
        without_reward=rollouts - int(_count(metrics, "reward/count", where)),
        reward=_mean_of(metrics, "reward/mean", where),
        components={name: _mean_of(metrics, f"components/{name}/mean", where)
                    for name in names},
        zero_variance_groups=zero,
        ranked_groups=zero + int(_count(metrics, "groups/mixed", where)))


def _read_step_log(path: str | Path) -> list[tuple[int, StepRow]]:
    rows = []
    for number, data in read_json_objects(path):
        try:
            row = _logged_row(data, "a step log line")
        except ValueError as exc:
            raise InputError(str(exc), source=str(path), line=number) from None
        rows.append((row.step, row))
    return rows


def _split(path: str | Path, position: int
           ) -> tuple[bool, list[tuple[int, list[ScoredLine] | StepRow]]]:
    """One file's steps, and whether its lines carried them: a step log's rows, or scored lines
    by their ``step``, else the whole file as step ``position``."""
    if is_step_log(path):
        return True, list(_read_step_log(path))
    lines = read_scored(path)
    if all(line.step is None for line in lines):
        return False, [(position, lines)]
    by_step: dict[int, list[ScoredLine]] = {}
    for line in lines:
        if line.step is None:
            raise InputError("some lines have a 'step' and this one does not: give every "
                             "line its step, or none", source=str(path), line=line.line)
        by_step.setdefault(line.step, []).append(line)
    return True, [(step, lines) for step, lines in sorted(by_step.items())]


def step_curve(paths: Sequence[str | Path]) -> StepCurve:
    """The curve of scored files in training order: each file one step (numbered 1, 2, ...
    in the order given), or files whose lines carry ``step`` (split by it; a later file's
    steps must come after an earlier one's), or step logs of the ``jsonl`` tracker.

    ``InputError`` (file and line named) for a bad scored line, a file where only some lines
    carry a step, files of which only some carry steps, and steps out of order across files.
    """
    if not paths:
        raise ConfigError("give at least one scored file of training steps")
    files = [(str(path), *_split(path, position)) for position, path in enumerate(paths, 1)]
    if len({carried for _, carried, _ in files}) > 1:
        raise InputError("some files carry 'step' on their lines and others do not: give "
                         "every file its steps, or none")
    rows: list[StepRow] = []
    previous = ""  # the file of the last row
    for source, _, steps in files:
        for step, lines in steps:
            if rows and step <= rows[-1].step:
                raise InputError(f"step {step} comes after step {rows[-1].step} (in "
                                 f"{previous!r}): steps must increase, file after file",
                                 source=source)
            rows.append(lines if isinstance(lines, StepRow) else _row(step, lines))
            previous = source
    components = list(dict.fromkeys(name for row in rows for name in row.components))
    return StepCurve(rows, components, [source for source, _, _ in files])


def curve_for(scored: str | Path, steps: Sequence[str | Path] | StepCurve | None = None
              ) -> StepCurve | None:
    """The curve to show beside a scored file: of ``steps`` (scored files of successive
    steps) when given, else of ``scored`` itself when its lines carry ``step``, else none."""
    if isinstance(steps, StepCurve):
        return steps
    if steps:
        return step_curve(steps)
    return step_curve([scored]) if carries_steps(scored) else None
