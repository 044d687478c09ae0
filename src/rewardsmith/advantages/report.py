"""A check of what a trainer will do with a batch of rewards: ``rewardsmith advantages``.

Groups whose rewards are all equal teach nothing (worth dynamic sampling); when the trainer's
formula nonetheless gives them non-zero advantages, they are *broken*: the policy is pushed
by float residue. ``exit_code`` is 1 when any group is broken, so the check can gate a run.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from rewardsmith.rubric.quantize import (
    is_float32_exact_grid,
    suggest_step,
)

from ..errors import ConfigError
from .core import _reward_vector, encode_groups
from .trainers import emulate_array, get_trainer

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "AdvantageReport",
    "BrokenGroup",
    "HistogramBin",
    "RewardDistribution",
    "check_advantages",
    "check_trainers",
]

_NOISE = 1e-9  # relative spread below which unequal rewards are float noise, not signal
_DISTINCT_BINS = 12  # up to this many distinct rewards, the histogram counts each value
_BINS = 10


@dataclass(frozen=True)
class BrokenGroup:
    """An example group: equal rewards whose emulated advantages are not all 0."""

    group: str
    ids: list[str]
    rewards: list[float]
    advantages: list[float]


@dataclass(frozen=True)
class HistogramBin:
    low: float
    high: float
    count: int


@dataclass(frozen=True)
class RewardDistribution:
    """Unmasked rewards: range, mean, population std, distinct values, a small histogram."""

    count: int
    min: float | None
    max: float | None
    mean: float | None
    std: float | None
    distinct: int
    histogram: list[HistogramBin] = field(default_factory=list)


@dataclass(frozen=True)
class AdvantageReport:
    """What ``trainer`` computes in ``dtype`` for a batch, and whether it is sound."""

    trainer: str
    dtype: str
    rollouts: int
    masked: int
    groups: int
    singleton_groups: int
    zero_variance_groups: int  # two or more equal rewards: teach nothing
    noise_groups: int  # rewards that differ only by float noise
    broken_groups: int  # zero-variance groups with non-zero (or NaN) advantages
    broken_rollouts: int
    worst_magnitude: float  # largest |advantage| in a broken group (inf for NaN)
    example: BrokenGroup | None
    distribution: RewardDistribution
    on_exact_grid: bool
    grid_step: float | None
    suggested_step: float | None  # a quantize step, when rewards are not on an exact grid
    max_group_size: int

    @property
    def exit_code(self) -> int:
        """1 when broken groups exist (the trainer would learn from float residue), else 0."""
        return 1 if self.broken_groups else 0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (non-finite numbers become None)."""
        data = _finite(asdict(self))
        data["exit_code"] = self.exit_code
        return dict(data)

    def render(self, console: Console) -> None:
        """Print the report as rich tables."""
        _render(self, console)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _distribution(values: NDArray[np.float64]) -> RewardDistribution:
    if values.size == 0:
        return RewardDistribution(0, None, None, None, None, 0, [])
    distinct, counts = np.unique(values, return_counts=True)
    if distinct.size <= _DISTINCT_BINS:
        bins = [
            HistogramBin(float(v), float(v), int(c)) for v, c in zip(distinct, counts, strict=True)
        ]
    else:
        hist, edges = np.histogram(values, bins=_BINS)
        bins = [
            HistogramBin(float(edges[i]), float(edges[i + 1]), int(hist[i])) for i in range(_BINS)
        ]
    return RewardDistribution(
        count=int(values.size),
        min=float(values.min()),
        max=float(values.max()),
        mean=float(values.mean()),
        std=float(values.std()),
        distinct=int(distinct.size),
        histogram=bins,
    )


def check_advantages(
    rewards: Sequence[float | None],
    groups: Sequence[Hashable],
    *,
    trainer: str = "rewardsmith",
    dtype: str = "float32",
    scale: str | None = None,
    method: str | None = None,
    ids: Sequence[Any] | None = None,
) -> AdvantageReport:
    """Emulate ``trainer`` in ``dtype`` on these rewards and report zero-variance and broken groups."""
    return _Prepared.of(rewards, groups, ids).report(trainer, dtype, scale, method)


def check_trainers(
    rewards: Sequence[float | None],
    groups: Sequence[Hashable],
    trainers: Sequence[str],
    *,
    dtype: str = "float32",
    ids: Sequence[Any] | None = None,
) -> dict[str, AdvantageReport]:
    """``check_advantages`` under each of ``trainers`` (their own scale and method), with the
    work that does not depend on the trainer (groups, order, grid, distribution) done once."""
    prepared = _Prepared.of(rewards, groups, ids)
    return {trainer: prepared.report(trainer, dtype, None, None) for trainer in trainers}


@dataclass
class _Prepared:
    """A batch of rewards as the checks read it, whatever the trainer."""

    values: NDArray[np.float64]
    valid: NDArray[np.bool_]
    codes: NDArray[np.intp]
    labels: list[Hashable]
    ids: Sequence[Any] | None
    order: NDArray[np.intp]  # unmasked positions, grouped
    starts: NDArray[np.intp]  # where each group starts in ``order``
    sizes: NDArray[np.intp]
    zero_variance: NDArray[np.bool_]
    noise: NDArray[np.bool_]
    grid: tuple[bool, float | None, float | None]  # on the grid, its step, a suggested step
    distribution: RewardDistribution

    @classmethod
    def of(cls, rewards: Sequence[float | None], groups: Sequence[Hashable],
           ids: Sequence[Any] | None) -> _Prepared:
        if len(groups) != len(rewards):
            raise ConfigError(f"got {len(rewards)} rewards but {len(groups)} group labels")
        values, valid = _reward_vector(rewards, ids)
        codes, labels = encode_groups(groups)
        positions = np.flatnonzero(valid)
        order = positions[np.argsort(codes[positions], kind="stable")]
        sorted_codes = codes[order]
        starts = (np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
                  if order.size else order)
        sizes = np.diff(np.r_[starts, order.size])
        r = values[order]
        low = np.minimum.reduceat(r, starts) if order.size else r
        high = np.maximum.reduceat(r, starts) if order.size else r
        equal = low == high
        scale_of = np.maximum(1.0, np.maximum(np.abs(low), np.abs(high)))
        kept = values[positions]
        largest_group = max(int(sizes.max()) if sizes.size else 0, 1)
        on_grid, step = is_float32_exact_grid(kept, group_size=largest_group)
        suggested = None if on_grid else suggest_step(kept, group_size=largest_group)
        return cls(values, valid, codes, labels, ids, order, starts, sizes,
                   zero_variance=equal & (sizes >= 2),
                   noise=~equal & ((high - low) <= _NOISE * scale_of),
                   grid=(on_grid, step, suggested), distribution=_distribution(kept))

    def report(self, trainer: str, dtype: str, scale: str | None,
               method: str | None) -> AdvantageReport:
        spec = get_trainer(trainer)
        values, codes, ids = self.values, self.codes, self.ids
        order, starts, sizes = self.order, self.starts, self.sizes
        emulated = emulate_array(values, codes, trainer=spec.name, valid=self.valid,
                                 dtype=dtype, scale=scale, method=method, ids=ids)
        adv = emulated[order]
        magnitude = np.where(np.isnan(adv), np.inf, np.abs(adv))
        worst_in_group = np.maximum.reduceat(magnitude, starts) if order.size else magnitude
        broken = self.zero_variance & (worst_in_group > 0)
        example = None
        worst = 0.0
        if broken.any():
            pick = int(np.flatnonzero(broken)[np.argmax(worst_in_group[broken])])
            worst = float(worst_in_group[pick])
            members = order[starts[pick] : starts[pick] + sizes[pick]]
            example = BrokenGroup(
                group=str(self.labels[int(codes[members[0]])]),
                ids=[str(ids[m]) if ids is not None else f"#{m}" for m in members.tolist()],
                rewards=values[members].tolist(),
                advantages=emulated[members].tolist(),
            )
        on_grid, step, suggested = self.grid
        return AdvantageReport(
            trainer=spec.name,
            dtype=dtype,
            rollouts=int(values.size),
            masked=int(values.size - order.size),
            groups=len(self.labels),
            singleton_groups=int((sizes == 1).sum()),
            zero_variance_groups=int(self.zero_variance.sum()),
            noise_groups=int(self.noise.sum()),
            broken_groups=int(broken.sum()),
            broken_rollouts=int(sizes[broken].sum()),
            worst_magnitude=worst,
            example=example,
            distribution=self.distribution,
            on_exact_grid=on_grid,
            grid_step=step,
            suggested_step=suggested,
            max_group_size=int(sizes.max()) if sizes.size else 0,
        )


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def _step(step: float) -> str:
    mantissa, exponent = math.frexp(step)
    return f"2**{exponent - 1} ({step!r})" if mantissa == 0.5 else repr(step)


def _render(report: AdvantageReport, console: Console) -> None:
    from rich.table import Table

    summary = Table(title=f"Advantages under {report.trainer} ({report.dtype})", show_header=False)
    summary.add_column("what")
    summary.add_column("value", justify="right")
    summary.add_row("rollouts", str(report.rollouts))
    summary.add_row("masked (no advantage)", str(report.masked))
    summary.add_row("groups", str(report.groups))
    summary.add_row("largest group", str(report.max_group_size))
    summary.add_row("singleton groups (advantage 0)", str(report.singleton_groups))
    summary.add_row("zero-variance groups (teach nothing)", str(report.zero_variance_groups))
    summary.add_row("groups differing only by float noise", str(report.noise_groups))
    style = "bold red" if report.broken_groups else "green"
    summary.add_row("broken groups", f"[{style}]{report.broken_groups}[/{style}]")
    if report.broken_groups:
        summary.add_row("rollouts in broken groups", str(report.broken_rollouts))
        summary.add_row("worst |advantage| there", _num(report.worst_magnitude))
    grid = f"yes, step {_step(report.grid_step)}" if report.grid_step is not None else "yes"
    summary.add_row("rewards on a float32-exact grid", grid if report.on_exact_grid else "no")
    console.print(summary)

    dist = report.distribution
    rewards = Table(title=f"Rewards ({dist.count} unmasked, {dist.distinct} distinct)")
    for name in ("min", "max", "mean", "std"):
        rewards.add_column(name, justify="right")
    rewards.add_row(_num(dist.min), _num(dist.max), _num(dist.mean), _num(dist.std))
    console.print(rewards)
    if dist.histogram:
        hist = Table(show_header=True)
        hist.add_column("reward")
        hist.add_column("count", justify="right")
        hist.add_column("")
        top = max(b.count for b in dist.histogram) or 1
        for b in dist.histogram:
            label = _num(b.low) if b.low == b.high else f"{_num(b.low)} .. {_num(b.high)}"
            hist.add_row(label, str(b.count), "#" * round(30 * b.count / top))
        console.print(hist)

    if report.example is not None:
        ex = report.example
        shown = min(len(ex.rewards), 8)
        table = Table(title=f"Example broken group {ex.group!r} ({len(ex.rewards)} rollouts)")
        table.add_column("id")
        table.add_column("reward", justify="right")
        table.add_column(f"{report.trainer} advantage", justify="right")
        for i in range(shown):
            table.add_row(ex.ids[i], repr(ex.rewards[i]), repr(ex.advantages[i]))
        console.print(table)
        step = report.suggested_step
        fix = f"quantize totals to {_step(step)}" if step else "quantize the totals"
        console.print(
            f"[bold red]{report.broken_groups} group(s) of equal rewards get non-zero advantages "
            f"under {report.trainer}.[/bold red] Fix: {fix} (rubric `quantize:`), or compute "
            "advantages with rewardsmith."
        )
    elif report.suggested_step is not None and report.zero_variance_groups:
        console.print(
            f"Rewards are not on a float32-exact grid; quantizing to {_step(report.suggested_step)} "
            "keeps equal groups at exactly 0 under every trainer."
        )
