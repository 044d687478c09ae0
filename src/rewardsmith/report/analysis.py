"""The numbers behind the report, computed on columns: distributions, groups, advantages as
each trainer computes them, latency.

Everything here is binned or reduced with numpy, so its size does not grow with the run: a
histogram has at most ``BINS`` bars however many rollouts there are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from ..advantages import TRAINERS, emulate_array, encode_groups
from .scored import STATUSES, Floats, ScoredColumns

__all__ = [
    "BINS",
    "AdvantageStats",
    "ComponentLatency",
    "Distribution",
    "GroupIndex",
    "GroupStats",
    "Latency",
    "SizeRow",
    "SlowRollout",
    "advantage_stats",
    "distribution",
    "emulated_advantages",
    "group_index",
    "group_stats",
    "latency",
    "nearest_rank",
    "status_counts",
    "zero_variance_flags",
]

BINS = 40  # bars of a histogram of a continuous value
DISTINCT = 20  # up to this many distinct values, each value gets its own bar
TRAINER_DTYPE = "float32"  # trainers compute advantages in float32


@dataclass(frozen=True)
class Distribution:
    """One series (the reward, a component, an advantage): summary and histogram.

    ``discrete``: the histogram has one bar per distinct value (``edges`` then holds the
    values, one per bar); otherwise ``edges`` are the ``len(counts) + 1`` bin edges.
    """

    name: str
    count: int
    missing: int
    mean: float | None
    std: float | None
    minimum: float | None
    median: float | None
    maximum: float | None
    counts: list[int] = field(default_factory=list)
    edges: list[float] = field(default_factory=list)
    discrete: bool = False


def nearest_rank(values: Floats, quantile: float) -> float:
    """The ``quantile`` of ``values`` by nearest rank: a value that really occurred."""
    return float(np.percentile(values, 100 * quantile, method="inverted_cdf"))


def distribution(name: str, column: Floats, *, edges: Floats | None = None) -> Distribution:
    """Summary and histogram of the finite values of ``column`` (NaN counts as missing).
    ``edges``: bin edges to use (to share bins between series); else chosen here."""
    values = column[np.isfinite(column)]
    missing = int(column.size - values.size)
    if values.size == 0:
        return Distribution(name, 0, missing, None, None, None, None, None)
    summary = (float(values.mean()), float(values.std()), float(values.min()),
               nearest_rank(values, 0.5), float(values.max()))
    if edges is None:
        distinct, counts = np.unique(values, return_counts=True)
        if distinct.size <= DISTINCT:
            return Distribution(name, int(values.size), missing, *summary,
                                counts=counts.tolist(), edges=distinct.tolist(), discrete=True)
        low, high = summary[2], summary[4]
        edges = np.linspace(low, high, BINS + 1)
    counts, used = np.histogram(values, bins=edges)
    return Distribution(name, int(values.size), missing, *summary, counts=counts.tolist(),
                        edges=used.tolist())


def status_counts(scored: ScoredColumns) -> dict[str, int]:
    """Rollouts per status, every status named (0 when absent)."""
    counts = np.bincount(scored.status, minlength=len(STATUSES))
    return {name: int(counts[i]) for i, name in enumerate(STATUSES)}


# ------------------------------------------------------------------ groups


@dataclass(frozen=True)
class GroupIndex:
    """Rows sorted by group: ``order`` (row numbers), each group's ``starts`` in it, its
    ``sizes`` (all rollouts) and ``codes`` (row -> group number, groups in first-seen order)."""

    codes: NDArray[np.intp]
    labels: list[str]
    order: NDArray[np.intp]
    starts: NDArray[np.intp]
    sizes: NDArray[np.intp]


def group_index(groups: list[str]) -> GroupIndex:
    codes, labels = encode_groups(groups)
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes, minlength=len(labels)).astype(np.intp)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.intp)
    return GroupIndex(codes, [str(label) for label in labels], order, starts, sizes)


def zero_variance_flags(reward: Floats, index: GroupIndex) -> tuple[NDArray[np.bool_],
                                                                     NDArray[np.intp]]:
    """Per group: whether its unmasked rewards (two or more) are all equal; and how many
    unmasked rewards it has."""
    ordered = reward[index.order]
    present = np.isfinite(ordered)
    if ordered.size == 0:
        empty = np.zeros(0, dtype=np.intp)
        return empty.astype(bool), empty
    counted = np.add.reduceat(present.astype(np.intp), index.starts)
    low = np.minimum.reduceat(np.where(present, ordered, np.inf), index.starts)
    high = np.maximum.reduceat(np.where(present, ordered, -np.inf), index.starts)
    return (counted >= 2) & (low == high), counted


@dataclass(frozen=True)
class SizeRow:
    """Groups of one size (rollouts in the group, masked ones included) and their rewards."""

    size: int
    groups: int
    rollouts: int
    zero_variance: int
    rewards: int
    mean: float | None
    std: float | None
    minimum: float | None
    q1: float | None
    median: float | None
    q3: float | None
    maximum: float | None


@dataclass(frozen=True)
class GroupStats:
    groups: int
    singletons: int  # one unmasked reward: nothing to compare it with
    zero_variance: int  # two or more unmasked rewards, all equal: teaches nothing
    zero_variance_rollouts: int
    varied: int
    examples: list[tuple[str, int, float]]  # zero-variance groups: label, rewards, value
    by_size: list[SizeRow]


def group_stats(reward: Floats, index: GroupIndex, *, examples: int = 10) -> GroupStats:
    flags, counted = zero_variance_flags(reward, index)
    picked = np.flatnonzero(flags)[:examples]
    shown = []
    for group in picked.tolist():
        rows = index.order[index.starts[group]:index.starts[group] + index.sizes[group]]
        values = reward[rows]
        shown.append((index.labels[group], int(counted[group]),
                      float(values[np.isfinite(values)][0])))
    size_of_row = index.sizes[index.codes]
    rows_out = []
    for size in np.unique(index.sizes).tolist():
        in_size = index.sizes == size
        values = reward[size_of_row == size]
        values = values[np.isfinite(values)]
        if values.size:
            q = [nearest_rank(values, p) for p in (0.0, 0.25, 0.5, 0.75, 1.0)]
            mean, std = float(values.mean()), float(values.std())
        else:
            q = [math.nan] * 5
            mean = std = math.nan
        rows_out.append(SizeRow(
            size=int(size), groups=int(in_size.sum()), rollouts=int(size * in_size.sum()),
            zero_variance=int((flags & in_size).sum()), rewards=int(values.size),
            mean=_or_none(mean), std=_or_none(std), minimum=_or_none(q[0]), q1=_or_none(q[1]),
            median=_or_none(q[2]), q3=_or_none(q[3]), maximum=_or_none(q[4])))
    return GroupStats(
        groups=len(index.labels),
        singletons=int((counted == 1).sum()),
        zero_variance=int(flags.sum()),
        zero_variance_rollouts=int(counted[flags].sum()),
        varied=int(((counted >= 2) & ~flags).sum()),
        examples=shown,
        by_size=rows_out,
    )


def _or_none(value: float) -> float | None:
    return None if math.isnan(value) else value


# ------------------------------------------------------------------ advantages


def emulated_advantages(reward: Floats, index: GroupIndex) -> dict[str, Floats]:
    """Each emulated trainer's advantages for these rewards (NaN where masked), in float32
    as trainers run; ``rewardsmith`` is the exact computation."""
    valid = np.isfinite(reward)
    values = np.where(valid, reward, 0.0)
    return {name: emulate_array(values, index.codes, trainer=name, valid=valid,
                                dtype=TRAINER_DTYPE)
            for name in TRAINERS}


@dataclass(frozen=True)
class AdvantageStats:
    """One trainer's advantages: how they are spread, and the zero-variance groups that get
    a non-zero (or NaN) advantage anyway (``broken``: the policy is pushed by float residue)."""

    trainer: str
    formula: str
    distribution: Distribution
    mean_abs: float | None
    nonzero: int
    non_finite: int
    broken_groups: int
    broken_rollouts: int
    worst: float | None  # largest |advantage| in a broken group (inf for NaN)


def advantage_stats(reward: Floats, index: GroupIndex, advantages: dict[str, Floats]
                    ) -> list[AdvantageStats]:
    """Per trainer, with one set of bins for all so their histograms line up."""
    flags, _ = zero_variance_flags(reward, index)
    valid = np.isfinite(reward)
    finite = [a[np.isfinite(a)] for a in advantages.values()]
    everything = np.concatenate(finite) if finite else np.zeros(0)
    edges = None
    if everything.size:
        low, high = float(everything.min()), float(everything.max())
        if low == high:
            low, high = low - 0.5, high + 0.5
        edges = np.linspace(low, high, BINS + 1)
    out = []
    for name, values in advantages.items():
        present = values[valid]
        magnitude = np.where(np.isnan(values), np.inf, np.abs(values))
        magnitude = np.where(valid, magnitude, 0.0)[index.order]
        worst_in_group = (np.maximum.reduceat(magnitude, index.starts)
                          if magnitude.size else magnitude)
        broken = flags & (worst_in_group > 0)
        finite_values = present[np.isfinite(present)]
        out.append(AdvantageStats(
            trainer=name,
            formula=TRAINERS[name].formula,
            distribution=distribution(name, values, edges=edges),
            mean_abs=float(np.abs(finite_values).mean()) if finite_values.size else None,
            nonzero=int((finite_values != 0).sum()),
            non_finite=int(present.size - finite_values.size),
            broken_groups=int(broken.sum()),
            broken_rollouts=int(index.sizes[broken].sum()),
            worst=float(worst_in_group[broken].max()) if broken.any() else None,
        ))
    return out


# ------------------------------------------------------------------ latency


@dataclass(frozen=True)
class ComponentLatency:
    name: str
    count: int  # rollouts with a time for this component
    p50: float
    p99: float
    maximum: float
    mean: float
    total: float


@dataclass(frozen=True)
class SlowRollout:
    row: int
    total: float
    slowest: str  # the component that took longest on it
    times: dict[str, float]


@dataclass(frozen=True)
class Latency:
    components: list[ComponentLatency]
    slowest: list[SlowRollout]
    timed_rollouts: int


def latency(scored: ScoredColumns, *, top: int) -> Latency | None:
    """p50, p99 (nearest rank) and max seconds per component, and the ``top`` rollouts whose
    components took longest together. None when the file has no timing."""
    if not scored.has_timing:
        return None
    rows = []
    for name, column in scored.timing.items():
        values = column[np.isfinite(column)]
        if values.size:
            rows.append(ComponentLatency(name, int(values.size), nearest_rank(values, 0.5),
                                         nearest_rank(values, 0.99), float(values.max()),
                                         float(values.mean()), float(values.sum())))
    rows.sort(key=lambda r: -r.total)
    matrix = np.vstack([scored.timing[r.name] for r in rows])
    timed = np.isfinite(matrix).any(axis=0)
    totals = np.where(timed, np.nansum(matrix, axis=0), -1.0)
    count = min(top, int(timed.sum()))
    picked = np.argpartition(-totals, count - 1)[:count] if count else np.zeros(0, np.intp)
    picked = picked[np.lexsort((picked, -totals[picked]))]
    slow = []
    for row in picked.tolist():
        times = {r.name: float(scored.timing[r.name][row]) for r in rows
                 if math.isfinite(scored.timing[r.name][row])}
        slow.append(SlowRollout(row, float(totals[row]), max(times, key=times.__getitem__),
                                times))
    return Latency(rows, slow, int(timed.sum()))
