"""How a scored file moved against another scored file of the same rollouts (paired by id):
rewards and each component, statuses, zero-variance groups, each trainer's advantages, and
the rollouts that moved most. Deltas are this file minus the other (the baseline)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .analysis import BINS, GroupIndex, zero_variance_flags
from .scored import STATUSES, Floats, ScoredColumns

__all__ = ["AdvantageMove", "Comparison", "ComponentMove", "Mover", "compare"]

REWARD = "reward"


@dataclass(frozen=True)
class ComponentMove:
    name: str
    paired: int  # rollouts with a value in both files
    baseline_mean: float | None
    mean: float | None
    changed: int  # paired rollouts whose value differs
    mean_abs_delta: float | None

    @property
    def delta(self) -> float | None:
        if self.baseline_mean is None or self.mean is None:
            return None
        return self.mean - self.baseline_mean


@dataclass(frozen=True)
class AdvantageMove:
    trainer: str
    paired: int
    mean_abs_delta: float | None
    max_abs_delta: float | None
    sign_flips: int
    became_zero: int
    became_nonzero: int


@dataclass(frozen=True)
class Mover:
    row: int  # in this file
    other_row: int
    baseline: float
    reward: float

    @property
    def delta(self) -> float:
        return self.reward - self.baseline


@dataclass(frozen=True)
class Comparison:
    other: str
    paired: int
    only_here: int
    only_other: int
    components: list[ComponentMove]  # the reward first
    status_changes: dict[str, int]  # "ok -> masked": count
    became_zero_variance: int  # groups
    became_varied: int
    advantages: list[AdvantageMove]
    movers: list[Mover]
    delta_counts: list[int]  # histogram of reward deltas over paired rollouts
    delta_edges: list[float]


def _pairs(here: ScoredColumns, other: ScoredColumns) -> tuple[NDArray[np.intp],
                                                                NDArray[np.intp]]:
    position = {rollout_id: row for row, rollout_id in enumerate(other.ids)}
    mine, theirs = [], []
    for row, rollout_id in enumerate(here.ids):
        match = position.get(rollout_id)
        if match is not None:
            mine.append(row)
            theirs.append(match)
    return np.asarray(mine, dtype=np.intp), np.asarray(theirs, dtype=np.intp)


def _move(name: str, new: Floats, old: Floats) -> ComponentMove:
    both = np.isfinite(new) & np.isfinite(old)
    new_values, old_values = new[np.isfinite(new)], old[np.isfinite(old)]
    deltas = new[both] - old[both]
    return ComponentMove(
        name=name,
        paired=int(both.sum()),
        baseline_mean=float(old_values.mean()) if old_values.size else None,
        mean=float(new_values.mean()) if new_values.size else None,
        changed=int((deltas != 0).sum()),
        mean_abs_delta=float(np.abs(deltas).mean()) if deltas.size else None,
    )


def _advantage_move(trainer: str, new: Floats, old: Floats) -> AdvantageMove:
    both = np.isfinite(new) & np.isfinite(old)
    a, b = old[both], new[both]
    deltas = np.abs(b - a)
    return AdvantageMove(
        trainer=trainer,
        paired=int(both.sum()),
        mean_abs_delta=float(deltas.mean()) if deltas.size else None,
        max_abs_delta=float(deltas.max()) if deltas.size else None,
        sign_flips=int((a * b < 0).sum()),
        became_zero=int(((a != 0) & (b == 0)).sum()),
        became_nonzero=int(((a == 0) & (b != 0)).sum()),
    )


def _group_flags(scored: ScoredColumns, index: GroupIndex) -> dict[str, bool]:
    flags, counted = zero_variance_flags(scored.reward, index)
    return {label: bool(flags[g]) for g, label in enumerate(index.labels) if counted[g] >= 2}


def compare(here: ScoredColumns, other: ScoredColumns, *, here_groups: GroupIndex,
            other_groups: GroupIndex, here_advantages: dict[str, Floats],
            other_advantages: dict[str, Floats], top: int) -> Comparison:
    """Pair the two files by rollout id and measure what moved."""
    mine, theirs = _pairs(here, other)
    names = list(dict.fromkeys([*here.components, *other.components]))
    empty = np.full(len(here), np.nan), np.full(len(other), np.nan)
    moves = [_move(REWARD, here.reward[mine], other.reward[theirs])]
    for name in names:
        new = here.components.get(name, empty[0])[mine]
        old = other.components.get(name, empty[1])[theirs]
        moves.append(_move(name, new, old))
    changes = Counter(f"{STATUSES[a]} -> {STATUSES[b]}"
                      for a, b in zip(other.status[theirs].tolist(), here.status[mine].tolist())
                      if a != b)
    new_flags, old_flags = _group_flags(here, here_groups), _group_flags(other, other_groups)
    shared = [g for g in new_flags if g in old_flags]
    advantages = [_advantage_move(name, here_advantages[name][mine],
                                  other_advantages[name][theirs])
                  for name in here_advantages if name in other_advantages]

    new_reward, old_reward = here.reward[mine], other.reward[theirs]
    both = np.isfinite(new_reward) & np.isfinite(old_reward)
    deltas = new_reward - old_reward
    moved = np.flatnonzero(both & (deltas != 0))
    movers = []
    if moved.size:
        count = min(top, moved.size)
        size = np.abs(deltas[moved])
        best = moved[np.argpartition(-size, count - 1)[:count]] if count else moved[:0]
        best = best[np.lexsort((mine[best], -np.abs(deltas[best])))]
        movers = [Mover(int(mine[i]), int(theirs[i]), float(old_reward[i]),
                        float(new_reward[i])) for i in best.tolist()]
    delta_counts: list[int] = []
    delta_edges: list[float] = []
    if moved.size:
        values = deltas[moved]
        low, high = float(values.min()), float(values.max())
        if low == high:
            low, high = low - 0.5, high + 0.5
        counts, edges = np.histogram(values, bins=np.linspace(low, high, BINS + 1))
        delta_counts, delta_edges = counts.tolist(), edges.tolist()
    return Comparison(
        other=other.source,
        paired=int(mine.size),
        only_here=len(here) - int(mine.size),
        only_other=len(other) - int(mine.size),
        components=moves,
        status_changes=dict(sorted(changes.items())),
        became_zero_variance=sum(1 for g in shared if new_flags[g] and not old_flags[g]),
        became_varied=sum(1 for g in shared if old_flags[g] and not new_flags[g]),
        advantages=advantages,
        movers=movers,
        delta_counts=delta_counts,
        delta_edges=delta_edges,
    )

