"""What a scoring run did, in numbers: per component, per status, per group."""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardsmith.types import (
    Score,
    Status,
)

__all__ = ["ComponentStats", "RunSummary", "SummaryBuilder", "POSITION_BIAS_WARN",
           "position_bias_warnings", "money"]

_BLOCK = 8192  # rollouts whose values wait before they join the running statistics
_SLOWEST = 10  # the slowest calls a timed run names
# A pairwise judge whose verdicts follow the order shown at least this often (0.5 is a coin's
# rate; 1.0 is a judge that always picks the same position) is not comparing the responses.
POSITION_BIAS_WARN = 0.5
_BIAS = ".position_bias"


def position_bias_warnings(means: dict[str, float]) -> list[str]:
    """A warning for each pairwise-judged component whose mean position bias is too high."""
    return [f"pairwise judge {name!r}: position bias {bias:.2f} (its verdicts followed the "
            f"order the pair was shown in, not the responses; 1.0 always picks one position): "
            f"its grades are not comparisons; check it with `rewardsmith judge-eval`"
            for name, bias in means.items() if bias >= POSITION_BIAS_WARN]


def money(value: float) -> str:
    """A cost in dollars with its significant digits: $0.00042, not $0.0000."""
    if value == 0:
        return "$0"
    if abs(value) >= 0.01:
        return f"${value:,.4f}"
    return f"${value:.2g}"


@dataclass
class _Running:
    """Running count, mean, variance, minimum and maximum, fed a block of values at a time:
    each block's own statistics (numpy, float64) are merged into the running ones with Chan's
    formula, which stays accurate however many blocks come."""

    count: int = 0
    mean: float = 0.0
    m2: float = 0.0
    minimum: float = math.inf
    maximum: float = -math.inf

    def add_block(self, values: Sequence[float]) -> None:
        if not values:
            return
        import numpy as np  # on the first block, not at start-up

        block = np.asarray(values, dtype=np.float64)
        count = int(block.size)
        mean = float(block.mean())
        m2 = float(np.square(block - mean).sum())
        total = self.count + count
        delta = mean - self.mean
        self.m2 += m2 + delta * delta * self.count * count / total
        self.mean += delta * count / total
        self.count = total
        self.minimum = min(self.minimum, float(block.min()))
        self.maximum = max(self.maximum, float(block.max()))

    @property
    def std(self) -> float:
        return math.sqrt(self.m2 / self.count) if self.count > 1 else 0.0


@dataclass
class ComponentStats:
    name: str
    count: int
    mean: float | None
    std: float | None
    minimum: float | None
    maximum: float | None
    errors: int
    timeouts: int
    masked: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class RunSummary:
    """The numbers behind ``rewardsmith score``'s summary table (also ``to_dict()`` for JSON)."""

    rubric_name: str
    rubric_id: str
    rollouts: int
    groups: int
    statuses: dict[str, int]
    reward: ComponentStats
    components: list[ComponentStats]
    zero_variance_groups: int
    mixed_groups: int
    bad_lines: list[str] = field(default_factory=list)
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return self.statuses.get(Status.ERROR.value, 0) + self.statuses.get(Status.TIMEOUT.value, 0)

    @property
    def error_rate(self) -> float:
        return self.failed / self.rollouts if self.rollouts else 0.0

    @property
    def rollouts_per_second(self) -> float:
        return self.rollouts / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "rubric": {"name": self.rubric_name, "id": self.rubric_id},
            "rollouts": self.rollouts,
            "groups": self.groups,
            "statuses": dict(self.statuses),
            "reward": self.reward.to_dict(),
            "components": [c.to_dict() for c in self.components],
            "zero_variance_groups": self.zero_variance_groups,
            "mixed_groups": self.mixed_groups,
            "error_rate": self.error_rate,
            "bad_lines": list(self.bad_lines),
            "seconds": round(self.seconds, 4),
            "rollouts_per_second": round(self.rollouts_per_second, 1),
            **self.extra,
            **({"usage": _usage_json(self.extra["usage"])} if self.extra.get("usage") else {}),
        }


def _usage_json(usage: dict[str, Any]) -> dict[str, Any]:
    """Judge usage for JSON: counts as integers (calls, tokens, retries...), the cost as it is."""
    def count(key: str, value: Any) -> Any:
        if key != "cost" and isinstance(value, float) and value.is_integer():
            return int(value)
        return value

    return {name: {k: count(k, v) for k, v in figures.items()} if isinstance(figures, dict)
            else figures for name, figures in usage.items()}


class SummaryBuilder:
    """Collects statistics group by group, as scores stream out of the engine."""

    def __init__(self, component_names: Sequence[str], *, rubric_name: str = "",
                 rubric_id: str = ""):
        self.rubric_name = rubric_name
        self.rubric_id = rubric_id
        self.names = list(component_names)
        self.rollouts = 0
        self.groups = 0
        self.statuses: Counter[str] = Counter()
        self.reward = _Running()
        self.values = {name: _Running() for name in self.names}
        self.failures: dict[str, Counter[str]] = {name: Counter() for name in self.names}
        self.zero_variance = 0
        self.mixed = 0
        # Values wait here and go into the running statistics a block at a time.
        self._pending: dict[str, list[float]] = {name: [] for name in self.names}
        self._pending_rewards: list[float] = []
        self._waiting = 0  # rollouts since the last flush
        # Call times, when the run records them: per component, and the slowest calls.
        self._times: dict[str, list[float]] = {}
        self._slowest: list[tuple[float, str, str]] = []  # (seconds, rollout id, component)
        self._bias: dict[str, list[float]] = {}  # pairwise judges' position bias per rollout

    def add_group(self, scores: Iterable[Score]) -> None:
        group = list(scores)
        self.groups += 1
        self.rollouts += len(group)
        ok = Status.OK
        if all(score.status is ok for score in group):
            self.statuses["ok"] += len(group)
        else:
            self.statuses.update(score.status.value for score in group)
        rewards = [score.reward for score in group if score.reward is not None]
        self._pending_rewards.extend(rewards)
        for name in self.names:
            values = [score.components.get(name) for score in group]
            present = [value for value in values if value is not None]
            self._pending[name].extend(present)
            if len(present) == len(values):
                continue
            failures = self.failures[name]
            for score, value in zip(group, values):
                if value is not None:
                    continue
                if name in score.errors:
                    failures["timeouts" if "timed out" in score.errors[name] else "errors"] += 1
                else:
                    failures["masked"] += 1
        if group and group[0].timing is not None:
            self._add_times(group)
        for score in group:
            if score.metrics:
                for key, value in score.metrics.items():
                    if key.endswith(_BIAS) and math.isfinite(value):
                        self._bias.setdefault(key[: -len(_BIAS)], []).append(value)
        if len(rewards) >= 2:
            if max(rewards) == min(rewards):
                self.zero_variance += 1
            else:
                self.mixed += 1
        self._waiting += len(group)
        if self._waiting >= _BLOCK:
            self._flush()

    def _add_times(self, group: list[Score]) -> None:
        for score in group:
            for name, seconds in (score.timing or {}).items():
                self._times.setdefault(name, []).append(seconds)
                if len(self._slowest) < _SLOWEST or seconds > self._slowest[0][0]:
                    heapq.heappush(self._slowest, (seconds, score.id, name))
                    if len(self._slowest) > _SLOWEST:
                        heapq.heappop(self._slowest)

    def _timing(self) -> dict[str, Any]:
        """Per component: calls timed and their p50, p99, max and mean seconds; the slowest
        calls of the run (empty when the run recorded no timing)."""
        if not self._times:
            return {}
        per: dict[str, dict[str, float]] = {}
        for name in [n for n in self.names if n in self._times]:
            times = sorted(self._times[name])
            per[name] = {"calls": len(times), "mean": math.fsum(times) / len(times),
                         "p50": _quantile(times, 0.5), "p99": _quantile(times, 0.99),
                         "max": times[-1], "total": math.fsum(times)}
        slowest = [{"id": rollout_id, "component": name, "seconds": seconds}
                   for seconds, rollout_id, name in sorted(self._slowest, reverse=True)]
        return {"timing": per, "slowest": slowest}

    def _flush(self) -> None:
        self._waiting = 0
        self.reward.add_block(self._pending_rewards)
        self._pending_rewards = []
        for name, pending in self._pending.items():
            self.values[name].add_block(pending)
            self._pending[name] = []

    def build(self, *, seconds: float = 0.0, bad_lines: Sequence[str] = ()) -> RunSummary:
        self._flush()
        return RunSummary(
            rubric_name=self.rubric_name,
            rubric_id=self.rubric_id,
            rollouts=self.rollouts,
            groups=self.groups,
            statuses={s.value: self.statuses.get(s.value, 0) for s in Status},
            reward=_stats("reward", self.reward, Counter(
                errors=self.statuses.get("error", 0), timeouts=self.statuses.get("timeout", 0),
                masked=self.statuses.get("masked", 0))),
            components=[_stats(n, self.values[n], self.failures[n]) for n in self.names],
            zero_variance_groups=self.zero_variance,
            mixed_groups=self.mixed,
            bad_lines=list(bad_lines),
            seconds=seconds,
            extra={**self._timing(), **self._position_bias()},
        )

    def _position_bias(self) -> dict[str, Any]:
        """Per pairwise-judged component, the mean position bias of its rollouts."""
        if not self._bias:
            return {}
        return {"position_bias": {name: math.fsum(v) / len(v) for name, v in self._bias.items()}}


def _quantile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted values (nearest rank)."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _stats(name: str, running: _Running, failures: Counter[str]) -> ComponentStats:
    empty = running.count == 0
    return ComponentStats(
        name=name,
        count=running.count,
        mean=None if empty else running.mean,
        std=None if empty else running.std,
        minimum=None if empty else running.minimum,
        maximum=None if empty else running.maximum,
        errors=failures.get("errors", 0),
        timeouts=failures.get("timeouts", 0),
        masked=failures.get("masked", 0),
    )
