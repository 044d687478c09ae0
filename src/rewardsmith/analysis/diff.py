"""How rewards and advantages move between two scored files (two rubrics, same rollouts).

Rollouts are matched by ``id``. The report gives, per component and for the total reward, the
mean and standard deviation in each file; how the order within each group changed (Spearman's
rank correlation per group, averaged); the groups that switch between zero and non-zero reward
variance (a group with zero variance teaches GRPO nothing); the rollouts that moved most; and,
when both files carry advantages, how those moved.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardsmith.files.parquet import (
    read_rollouts_any,
    read_scores_any,
)
from rewardsmith.files.scored import scores_by_id
from rewardsmith.judge.agreement import spearman  # one implementation, shared with judge-eval
from rewardsmith.store import Store
from rewardsmith.types import (
    Rollout,
    Score,
)

__all__ = [
    "AdvantageMovement",
    "ComponentDelta",
    "DiffReport",
    "Mover",
    "diff_files",
    "diff_scores",
    "first_line",
    "spearman",
]

REWARD = "reward"  # the row of the total reward among the components


@dataclass
class ComponentDelta:
    name: str
    old_mean: float | None
    old_std: float | None
    new_mean: float | None
    new_std: float | None
    old_count: int
    new_count: int

    @property
    def delta(self) -> float | None:
        if self.old_mean is None or self.new_mean is None:
            return None
        return self.new_mean - self.old_mean

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "delta": self.delta}


@dataclass
class Mover:
    id: str
    group: str
    old: float
    new: float
    old_advantage: float | None = None
    new_advantage: float | None = None
    first_line: str | None = None

    @property
    def delta(self) -> float:
        return self.new - self.old

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "delta": self.delta}


@dataclass
class AdvantageMovement:
    rollouts: int  # with an advantage in both files
    mean_abs_delta: float
    max_abs_delta: float
    sign_flips: int  # positive in one file, negative in the other
    became_zero: int
    became_nonzero: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class DiffReport:
    matched: int
    only_old: int
    only_new: int
    components: list[ComponentDelta]  # the total reward first
    rank_correlation: float | None  # mean within-group Spearman over groups that vary in both
    groups_ranked: int
    groups_constant: int  # groups skipped for ranking: equal rewards in one file or both
    became_constant: list[str]  # groups: non-zero variance before, zero after
    became_varied: list[str]  # groups: zero variance before, non-zero after
    status_changes: dict[str, int]  # "ok -> masked": count
    movers: list[Mover] = field(default_factory=list)
    advantages: AdvantageMovement | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "matched": self.matched,
            "only_old": self.only_old,
            "only_new": self.only_new,
            "components": [c.to_dict() for c in self.components],
            "rank_correlation": self.rank_correlation,
            "groups_ranked": self.groups_ranked,
            "groups_constant": self.groups_constant,
            "became_constant": list(self.became_constant),
            "became_varied": list(self.became_varied),
            "status_changes": dict(self.status_changes),
            "movers": [m.to_dict() for m in self.movers],
            "advantages": self.advantages.to_dict() if self.advantages else None,
        }


# ------------------------------------------------------------------ statistics


def _mean_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    mean = math.fsum(values) / len(values)
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))


def _zero_variance(scores: Sequence[Score]) -> dict[str, bool]:
    """Per group with at least two rewards: whether they are all equal."""
    rewards: dict[str, list[float]] = {}
    for score in scores:
        if score.reward is not None:
            rewards.setdefault(score.group, []).append(score.reward)
    return {g: max(v) == min(v) for g, v in rewards.items() if len(v) >= 2}


def first_line(rollout: Rollout, width: int = 80) -> str:
    """The completion's first non-empty line, cut to ``width`` characters."""
    for line in rollout.text.splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= width else line[:width - 1] + "…"
    return ""


# ------------------------------------------------------------------ the report


def diff_scores(old: Sequence[Score], new: Sequence[Score], *, top: int = 10,
                rollouts: Callable[[Sequence[str]], Mapping[str, Rollout]] | None = None
                ) -> DiffReport:
    """Compare two lists of scores of the same rollouts. ``rollouts(ids)`` may supply the
    rollouts of the top movers, to show their completions' first lines."""
    old_by_id, new_by_id = scores_by_id(old, "old"), scores_by_id(new, "new")
    matched = [(old_by_id[i], new_by_id[i]) for i in old_by_id if i in new_by_id]
    names = list(dict.fromkeys([n for s in old for n in s.components]
                               + [n for s in new for n in s.components]))
    rows = []
    for name in [REWARD, *names]:
        def values(scores: Sequence[Score], name: str = name) -> list[float]:
            picked = (s.reward if name == REWARD else s.components.get(name) for s in scores)
            return [v for v in picked if v is not None]

        old_values, new_values = values(old), values(new)
        rows.append(ComponentDelta(name, *_mean_std(old_values), *_mean_std(new_values),
                                   len(old_values), len(new_values)))

    by_group: dict[str, list[tuple[float, float]]] = {}
    for a, b in matched:
        if a.reward is not None and b.reward is not None:
            by_group.setdefault(b.group, []).append((a.reward, b.reward))
    correlations = []
    constant = 0
    for pairs in by_group.values():
        if len(pairs) < 2:
            continue
        rho = spearman([p[0] for p in pairs], [p[1] for p in pairs])
        if rho is None:
            constant += 1
        else:
            correlations.append(rho)

    old_zero, new_zero = _zero_variance(old), _zero_variance(new)
    shared = [g for g in new_zero if g in old_zero]
    statuses = Counter(f"{a.status.value} -> {b.status.value}" for a, b in matched
                       if a.status != b.status)

    movers = [Mover(b.id, b.group, a.reward, b.reward, a.advantage, b.advantage)
              for a, b in matched
              if a.reward is not None and b.reward is not None and a.reward != b.reward]
    movers.sort(key=lambda m: (-abs(m.delta), m.id))
    del movers[max(0, top):]
    if movers and rollouts is not None:
        found = rollouts([m.id for m in movers])
        for mover in movers:
            if mover.id in found:
                mover.first_line = first_line(found[mover.id])

    return DiffReport(
        matched=len(matched),
        only_old=len(old_by_id) - len(matched),
        only_new=len(new_by_id) - len(matched),
        components=rows,
        rank_correlation=math.fsum(correlations) / len(correlations) if correlations else None,
        groups_ranked=len(correlations),
        groups_constant=constant,
        became_constant=[g for g in shared if new_zero[g] and not old_zero[g]],
        became_varied=[g for g in shared if old_zero[g] and not new_zero[g]],
        status_changes=dict(sorted(statuses.items())),
        movers=movers,
        advantages=_advantage_movement(matched),
    )


def _advantage_movement(matched: Sequence[tuple[Score, Score]]) -> AdvantageMovement | None:
    pairs = [(a.advantage, b.advantage) for a, b in matched
             if a.advantage is not None and b.advantage is not None]
    if not pairs:
        return None
    deltas = [abs(y - x) for x, y in pairs]
    return AdvantageMovement(
        rollouts=len(pairs),
        mean_abs_delta=math.fsum(deltas) / len(deltas),
        max_abs_delta=max(deltas),
        sign_flips=sum(1 for x, y in pairs if x * y < 0),
        became_zero=sum(1 for x, y in pairs if x != 0 and y == 0),
        became_nonzero=sum(1 for x, y in pairs if x == 0 and y != 0),
    )


def diff_files(old: str | Path, new: str | Path, *, top: int = 10,
               rollouts: str | Path | None = None, store: str | Path | None = None,
               run: str | None = None) -> DiffReport:
    """Compare two scored files (JSONL or Parquet). Completions of the top movers come from a
    rollouts file, or from a store's run (``run``; default: the latest)."""
    old_scores, new_scores = read_scores_any(old), read_scores_any(new)
    source: Callable[[Sequence[str]], Mapping[str, Rollout]] | None = None
    if rollouts is not None:
        path = rollouts

        def source(ids: Sequence[str]) -> Mapping[str, Rollout]:
            wanted = set(ids)
            return {r.id: r for r in read_rollouts_any(path) if r.id in wanted}
    elif store is not None:
        location = store

        def source(ids: Sequence[str]) -> Mapping[str, Rollout]:
            with Store(location, read_only=True) as opened:
                return opened.rollouts_by_id(opened.get_run(run).id, ids)
    return diff_scores(old_scores, new_scores, top=top, rollouts=source)
