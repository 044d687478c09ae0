"""The numbers a tracker logs for one scoring step, computed here once for every tracker.

A step's results are ``Score`` objects or scored JSONL lines (mappings with ``id``, ``group``,
``reward``, ``status``, ``components`` and, when the run recorded it, ``timing``: component name
-> seconds). The keys (documented in docs/tracking.md):

- ``rollouts``;
- ``reward/{mean,std,min,max,count}`` and ``components/<name>/{mean,std,min,max,count}`` over
  the values present (a masked or failed value is not a zero; ``std`` is the population one);
- ``status/{ok,error,timeout,masked}``: rollouts per status;
- ``groups/{count,zero_variance,mixed}``, ``groups/zero_variance_fraction``: groups with at
  least two rewards that are all equal (they teach GRPO nothing), of those with two or more;
- ``latency/<name>/{mean,p50,p99,max}`` in seconds, only for components that carry timings;
- ``<kind>/<client>/<counter>`` from the run's judge usage (``judge/<name>/cost``, ...) and
  ``cost/total``, only when usage is given.

A statistic with nothing to describe is left out rather than logged as NaN: trackers plot a
missing point as a gap, while a NaN breaks some of their charts.
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ..errors import InputError
from ..types import Score, Status

__all__ = ["ScoredResult", "StepStats", "key_part", "score_stats", "usage_metrics"]

ScoredResult = Score | Mapping[str, Any]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
_STATUSES = tuple(status.value for status in Status)


def key_part(name: str) -> str:
    """A component or judge name as one segment of a metric key: letters, digits, ``_``,
    ``.`` and ``-`` kept, anything else (spaces, ``/``, ``:``) made ``_``, so every tracker
    accepts the key and a name never adds a level to the key's path."""
    return _UNSAFE.sub("_", name) or "_"


@dataclass
class _Row:
    group: str
    reward: float | None
    status: str
    components: Mapping[str, float | None]
    timing: Mapping[str, float | None]


def _number(value: Any, what: str, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: {what} must be a number or null, not "
                         f"{type(value).__name__}")
    number = float(value)
    if not math.isfinite(number):
        raise InputError(f"{where}: {what} is {value!r}, not a finite number")
    return number


def _timing(value: Any, where: str) -> dict[str, float | None]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"{where}: 'timing' must be an object of component -> seconds, not "
                         f"{type(value).__name__}")
    out: dict[str, float | None] = {}
    for name, seconds in value.items():
        number = _number(seconds, f"timing of {name!r}", where)
        if number is not None and number < 0:
            raise InputError(f"{where}: timing of {name!r} is {number}, below zero")
        out[str(name)] = number
    return out


# The field of ``Score`` that holds per-component timing, when the engine records it there.
_SCORE_TIMING = next((f.name for f in fields(Score) if f.name in ("timing", "timings")), None)


def _row(result: ScoredResult, position: int) -> _Row:
    if isinstance(result, Score):
        where = f"result {position} (id {result.id!r})"
        timing = getattr(result, _SCORE_TIMING) if _SCORE_TIMING is not None else None
        return _Row(result.group, result.reward, result.status.value, result.components,
                    _timing(timing, where))
    if not isinstance(result, Mapping):
        raise InputError(f"result {position}: expected a Score or a scored line (a mapping), "
                         f"not {type(result).__name__}")
    where = f"result {position}" + (f" (id {result['id']!r})" if "id" in result else "")
    if "group" not in result:
        raise InputError(f"{where}: missing 'group' (statistics per group need it)")
    status = result.get("status", Status.OK.value)
    if status not in _STATUSES:
        raise InputError(f"{where}: status {status!r} is not one of {', '.join(_STATUSES)}")
    components = result.get("components") or {}
    if not isinstance(components, Mapping):
        raise InputError(f"{where}: 'components' must be an object, not "
                         f"{type(components).__name__}")
    return _Row(
        group=str(result["group"]),
        reward=_number(result.get("reward"), "'reward'", where),
        status=str(status),
        components={str(name): _number(value, f"component {name!r}", where)
                    for name, value in components.items()},
        timing=_timing(result.get("timing"), where),
    )


def _describe(prefix: str, values: array[float], out: dict[str, float]) -> None:
    out[f"{prefix}/count"] = float(len(values))
    if not values:
        return
    data = np.frombuffer(values, dtype=np.float64)
    out[f"{prefix}/mean"] = float(data.mean())
    out[f"{prefix}/std"] = float(data.std())
    out[f"{prefix}/min"] = float(data.min())
    out[f"{prefix}/max"] = float(data.max())


def _latency(prefix: str, values: array[float], out: dict[str, float]) -> None:
    data = np.frombuffer(values, dtype=np.float64)
    p50, p99 = np.percentile(data, [50, 99])
    out[f"{prefix}/mean"] = float(data.mean())
    out[f"{prefix}/p50"] = float(p50)
    out[f"{prefix}/p99"] = float(p99)
    out[f"{prefix}/max"] = float(data.max())


def usage_metrics(usage: Mapping[str, Mapping[str, float]] | None) -> dict[str, float]:
    """Judge usage (``{"judge:<name>": {"calls": ..., "cost": ...}}``, as a scoring run's
    summary holds it) as metric keys ``judge/<name>/<counter>``, plus ``cost/total``."""
    out: dict[str, float] = {}
    if not usage:
        return out
    total = 0.0
    for client, counters in usage.items():
        kind, _, name = str(client).partition(":")
        prefix = f"{key_part(kind)}/{key_part(name)}" if name else key_part(kind)
        for counter, value in counters.items():
            number = _number(value, f"usage counter {counter!r}", f"usage of {client!r}")
            if number is None:
                continue
            out[f"{prefix}/{key_part(str(counter))}"] = number
            if counter == "cost":
                total += number
    out["cost/total"] = total
    return out


@dataclass
class StepStats:
    """Collects one step's results a batch at a time (a group at a time from a scoring job,
    or the whole batch at once) and gives the metrics with :meth:`metrics`.

    Values are kept as float64 arrays (8 bytes each), so the statistics are exact and the
    latency percentiles are true percentiles, not sketches.
    """

    rollouts: int = 0
    statuses: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_STATUSES, 0))
    rewards: array[float] = field(default_factory=lambda: array("d"))
    components: dict[str, array[float]] = field(default_factory=dict)
    timings: dict[str, array[float]] = field(default_factory=dict)
    # Per group: rewards seen, smallest, largest (a group may arrive over several batches).
    groups: dict[str, list[float]] = field(default_factory=dict)

    def add(self, results: Iterable[ScoredResult]) -> None:
        # One loop with local names: a scoring run feeds every rollout through here.
        statuses, groups, components = self.statuses, self.groups, self.components
        rewards = self.rewards
        values: Mapping[str, float | None]
        timing: Mapping[str, float | None] | None
        for result in results:
            if type(result) is Score and _SCORE_TIMING is None:
                group, reward, status = result.group, result.reward, result.status.value
                values, timing = result.components, None
            else:
                row = _row(result, self.rollouts)
                group, reward, status = row.group, row.reward, row.status
                values, timing = row.components, row.timing
            self.rollouts += 1
            statuses[status] += 1
            seen = groups.get(group)
            if seen is None:
                seen = groups[group] = [0.0, math.inf, -math.inf]
            if reward is not None:
                rewards.append(reward)
                seen[0] += 1
                if reward < seen[1]:
                    seen[1] = reward
                if reward > seen[2]:
                    seen[2] = reward
            for name, value in values.items():
                column = components.get(name)
                if column is None:
                    column = components[name] = array("d")
                if value is not None:
                    column.append(value)
            if timing:
                for name, seconds in timing.items():
                    if seconds is not None:
                        self.timings.setdefault(name, array("d")).append(seconds)

    def metrics(self, usage: Mapping[str, Mapping[str, float]] | None = None
                ) -> dict[str, float]:
        out: dict[str, float] = {"rollouts": float(self.rollouts)}
        _describe("reward", self.rewards, out)
        for name, values in self.components.items():
            _describe(f"components/{key_part(name)}", values, out)
        for status, count in self.statuses.items():
            out[f"status/{status}"] = float(count)
        ranked = [seen for seen in self.groups.values() if seen[0] >= 2]
        zero = sum(1 for seen in ranked if seen[1] == seen[2])
        out["groups/count"] = float(len(self.groups))
        out["groups/zero_variance"] = float(zero)
        out["groups/mixed"] = float(len(ranked) - zero)
        if ranked:
            out["groups/zero_variance_fraction"] = zero / len(ranked)
        for name, seconds in self.timings.items():
            _latency(f"latency/{key_part(name)}", seconds, out)
        out.update(usage_metrics(usage))
        return out


def score_stats(results: Iterable[ScoredResult],
                usage: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, float]:
    """The metrics of one scoring step (see the module docstring for the keys). Pure: the
    same results give the same numbers; nothing is logged."""
    stats = StepStats()
    stats.add(results)
    return stats.metrics(usage)
