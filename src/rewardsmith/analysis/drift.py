"""The drift watch: signs, step after step of training, that the reward is no longer teaching
what it should.

Feed it one step's scores at a time (``DriftWatch.observe``, from a training loop or a
trainer adapter) or several scored files in order (``drift_files``). It warns when

- one component holds most of the reward's within-group variance (``dominance``);
- the completions' mean length moved far from the first steps' (``length``);
- too many groups have rewards that are all equal, so they teach GRPO nothing
  (``zero_variance``);
- two named components (say a verifier and a judge) disagree more and more
  (``disagreement``): a judge that likes what the verifier rejects is a reward-hacking sign.

A warning is given when its condition starts to hold, and again only after it stopped holding
for a step (so a long run does not repeat the same line every step); each step's figures stay
in ``history``. Warnings are logged to the ``rewardsmith.drift`` logger and returned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.files.parquet import is_parquet

from ..errors import ConfigError, InputError
from ..files import read_jsonl
from ..types import Rollout, Score
from .drift_stats import Agreement, Shares, agreement, variance_shares, zero_variance
from .scored_input import read_scored

__all__ = ["DriftThresholds", "DriftWarning", "DriftWatch", "StepStats", "drift_files",
           "drift_warnings", "logger"]

logger = logging.getLogger("rewardsmith.drift")

# (kind, target, holds, value, threshold, message): records a warning when it starts to hold
_Emit = Callable[[str, str, bool, float, float, str], None]


@dataclass(frozen=True)
class DriftThresholds:
    """When each warning fires (see docs/drift.md for why these defaults)."""

    dominance: float = 0.8  # a component's share of the within-group reward variance
    length_change: float = 0.3  # |mean length / baseline mean length - 1|
    zero_variance: float = 0.5  # share of groups whose rewards are all equal
    disagreement_rise: float = 0.15  # rise of the disagreement rate over the baseline's
    agree_cutoff: float = 0.5  # a component "passes" a rollout when its value >= this
    baseline_steps: int = 1  # the first steps, averaged, that later steps are compared with
    trend_window: int = 3  # steps over which the disagreement must be rising

    def __post_init__(self) -> None:
        for name in ("dominance", "zero_variance"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ConfigError(f"drift threshold {name} must be in (0, 1], got {value}")
        for name in ("length_change", "disagreement_rise"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ConfigError(f"drift threshold {name} must be > 0, got {value}")
        if not np.isfinite(self.agree_cutoff):
            raise ConfigError(f"agree cutoff must be a finite number, got {self.agree_cutoff}")
        if self.baseline_steps < 1 or self.trend_window < 2:
            raise ConfigError("baseline steps must be >= 1 and trend window >= 2, got "
                              f"{self.baseline_steps} and {self.trend_window}")


@dataclass(frozen=True)
class DriftWarning:
    """One warning: its kind (dominance | length | zero_variance | disagreement), the step,
    what it is about (a component, a pair ``a~b``, or ``reward``/``length``), the figure and
    the threshold it crossed. ``str()`` is the message."""

    kind: str
    step: int
    target: str
    value: float
    threshold: float
    message: str

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StepStats:
    """The figures of one step."""

    step: int
    rollouts: int
    reward_mean: float | None
    groups: int  # with at least two rewards
    zero_variance_groups: int
    shares: dict[str, float] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    weights_fitted: bool = False
    weights_fit: float | None = None  # R² of the fitted weights
    mean_length: float | None = None
    length_source: str | None = None  # "metric <name>" or "characters"
    agreement: dict[str, dict[str, float | int | None]] = field(default_factory=dict)

    @property
    def zero_variance_fraction(self) -> float | None:
        return self.zero_variance_groups / self.groups if self.groups else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "zero_variance_fraction": self.zero_variance_fraction}


def _as_score(item: Score | Mapping[str, Any]) -> Score:
    if isinstance(item, Score):
        return item
    if isinstance(item, Mapping):
        try:
            return Score.from_dict(dict(item))
        except (KeyError, ValueError, TypeError) as exc:
            raise InputError(f"not a scored rollout: {exc}") from None
    raise InputError(f"expected a Score or a scored line (dict), got {type(item).__name__}")


def _slope(values: Sequence[float]) -> float:
    xs = np.arange(len(values), dtype=np.float64)
    return float(np.polyfit(xs, np.asarray(values, dtype=np.float64), 1)[0])


class DriftWatch:
    """A running watch over training steps.

    ``weights``: the rubric's component weights (else fitted per step). ``pairs``: pairs of
    component names whose disagreement to follow, e.g. ``[("correct", "judge")]``.
    ``length_metric``: the per-rollout metric holding the completion length, used before the
    rollouts' text."""

    def __init__(self, *, thresholds: DriftThresholds | None = None,
                 weights: Mapping[str, float] | None = None,
                 pairs: Iterable[tuple[str, str]] = (), length_metric: str = "length"):
        self.thresholds = thresholds or DriftThresholds()
        self.weights = dict(weights) if weights is not None else None
        self.pairs = [(str(a), str(b)) for a, b in pairs]
        for a, b in self.pairs:
            if a == b:
                raise ConfigError(f"a disagreement pair needs two components, got {a!r} twice")
        self.length_metric = length_metric
        self.history: list[StepStats] = []
        self.warnings: list[DriftWarning] = []
        self._active: set[tuple[str, str]] = set()

    # -- feeding

    def observe(self, step_results: Iterable[Score | Mapping[str, Any]], *,
                step: int | None = None, rollouts: Iterable[Rollout] | None = None,
                lengths: Mapping[str, float] | None = None) -> list[DriftWarning]:
        """Take one step's scores (``Score`` objects or scored-line dicts) and return the
        warnings that start at this step (also logged). Completion lengths come from each
        score's ``length_metric`` metric, else ``lengths`` (id -> length), else the text of
        ``rollouts`` (characters). ``step`` defaults to the previous step + 1 (first: 1)."""
        scores = [_as_score(item) for item in step_results]
        previous = self.history[-1].step if self.history else None
        if step is None:
            step = 1 if previous is None else previous + 1
        elif previous is not None and step <= previous:
            raise ConfigError(f"steps must increase: step {step} after step {previous}")
        if lengths is None and rollouts is not None:
            lengths = {r.id: float(len(r.text)) for r in rollouts}
        stats = self._measure(step, scores, lengths)
        self.history.append(stats)
        found = self._warnings(stats)
        for warning in found:
            logger.warning("%s", warning.message)
        self.warnings.extend(found)
        return found

    # -- measuring

    def _measure(self, step: int, scores: Sequence[Score],
                 lengths: Mapping[str, float] | None) -> StepStats:
        rewards = [s.reward for s in scores if s.reward is not None]
        groups, flat = zero_variance(scores)
        stats = StepStats(step, len(scores), float(np.mean(rewards)) if rewards else None,
                          groups, flat)
        names = list(dict.fromkeys(n for s in scores for n in s.components))
        if len(names) >= 2:
            shares: Shares | None = variance_shares(scores, names, self.weights)
            if shares is not None:
                stats.shares, stats.weights = shares.shares, shares.weights
                stats.weights_fitted = shares.fitted
                stats.weights_fit = shares.fit
        stats.mean_length, stats.length_source = self._length(scores, lengths)
        self._check_pairs(names)
        for a, b in self.pairs:
            found: Agreement | None = agreement(scores, a, b, self.thresholds.agree_cutoff)
            if found is not None:
                stats.agreement[f"{a}~{b}"] = {"disagreement": found.disagreement,
                                               "correlation": found.correlation,
                                               "rollouts": found.rollouts}
        return stats

    def _check_pairs(self, names: Sequence[str]) -> None:
        """A pair naming a component the scores do not have would watch nothing, silently."""
        if not names:
            return
        for a, b in self.pairs:
            missing = [name for name in (a, b) if name not in names]
            if missing:
                raise ConfigError(
                    f"pair {a},{b}: no component {' or '.join(map(repr, missing))} in the scores; "
                    f"their components are {', '.join(map(repr, names))} (a judge's components "
                    f"are named after its criteria)")

    def _length(self, scores: Sequence[Score], lengths: Mapping[str, float] | None
                ) -> tuple[float | None, str | None]:
        metric = [s.metrics[self.length_metric] for s in scores
                  if self.length_metric in s.metrics]
        if metric:
            return float(np.mean(metric)), f"metric {self.length_metric}"
        if lengths:
            known = [lengths[s.id] for s in scores if s.id in lengths]
            if known:
                return float(np.mean(known)), "characters"
        return None, None

    # -- warning

    def _baseline(self) -> list[StepStats]:
        return self.history[:self.thresholds.baseline_steps]

    def _in_baseline(self) -> bool:
        return len(self.history) <= self.thresholds.baseline_steps

    def _edge(self, key: tuple[str, str], holds: bool) -> bool:
        """Whether a condition that holds now did not hold at the previous step."""
        if not holds:
            self._active.discard(key)
            return False
        started = key not in self._active
        self._active.add(key)
        return started

    def _warnings(self, stats: StepStats) -> list[DriftWarning]:
        limits = self.thresholds
        out: list[DriftWarning] = []

        def maybe(kind: str, target: str, holds: bool, value: float, threshold: float,
                  message: str) -> None:
            if self._edge((kind, target), holds):
                out.append(DriftWarning(kind, stats.step, target, value, threshold,
                                        f"step {stats.step}: {message}"))

        for name, share in stats.shares.items():
            others = ", ".join(f"{n} {s:.0%}" for n, s in stats.shares.items() if n != name)
            maybe("dominance", name, share >= limits.dominance, share, limits.dominance,
                  f"component {name!r} holds {share:.0%} of the reward's within-group "
                  f"variance (threshold {limits.dominance:.0%}; {others}): the other "
                  f"components barely steer training")
        fraction = stats.zero_variance_fraction
        if fraction is not None:
            maybe("zero_variance", "reward", fraction >= limits.zero_variance, fraction,
                  limits.zero_variance,
                  f"{stats.zero_variance_groups} of {stats.groups} groups ({fraction:.0%}) have "
                  f"rewards that are all equal (threshold {limits.zero_variance:.0%}): they "
                  f"teach GRPO nothing")
        self._length_warning(stats, maybe)
        self._disagreement_warnings(stats, maybe)
        return out

    def _length_warning(self, stats: StepStats, maybe: _Emit) -> None:
        if stats.mean_length is None or self._in_baseline():
            return
        base = [s.mean_length for s in self._baseline()
                if s.mean_length is not None and s.length_source == stats.length_source]
        if not base or float(np.mean(base)) <= 0:
            return
        reference = float(np.mean(base))
        change = stats.mean_length / reference - 1
        limit = self.thresholds.length_change
        maybe("length", "length", abs(change) >= limit, change, limit,
              f"mean completion length {stats.mean_length:.4g} ({stats.length_source}) is "
              f"{change:+.0%} from the first steps' {reference:.4g} (threshold ±{limit:.0%})")

    def _disagreement_warnings(self, stats: StepStats, maybe: _Emit) -> None:
        if self._in_baseline():
            return
        limits = self.thresholds
        for pair, figures in stats.agreement.items():
            rate = float(figures["disagreement"] or 0.0)
            base = [float(s.agreement[pair]["disagreement"] or 0.0) for s in self._baseline()
                    if pair in s.agreement]
            recent = [float(s.agreement[pair]["disagreement"] or 0.0)
                      for s in self.history[-limits.trend_window:] if pair in s.agreement]
            if not base or len(recent) < 2:
                continue
            reference = float(np.mean(base))
            rise = rate - reference
            holds = rise >= limits.disagreement_rise and _slope(recent) > 0
            first, second = pair.split("~", 1)
            maybe("disagreement", pair, holds, rise, limits.disagreement_rise,
                  f"{first!r} and {second!r} disagree on {rate:.0%} of rollouts, up from "
                  f"{reference:.0%} (rise {rise:+.0%}, threshold {limits.disagreement_rise:.0%})"
                  f" and rising over the last {len(recent)} steps: a reward-hacking sign")

    # -- reading back

    def to_dict(self) -> dict[str, Any]:
        return {"thresholds": asdict(self.thresholds),
                "steps": [s.to_dict() for s in self.history],
                "warnings": [w.to_dict() for w in self.warnings]}


def _steps_of(path: str | Path) -> list[tuple[int | None, list[Score]]]:
    lines = read_scored(path)
    steps = {line.step for line in lines}
    if steps == {None}:
        return [(None, [line.score for line in lines])]
    if None in steps:
        missing = next(line.line for line in lines if line.step is None)
        raise InputError("some lines have a 'step' and this one does not: give every line "
                         "its step, or none", source=str(path), line=missing)
    by_step: dict[int, list[Score]] = {}
    for line in lines:
        assert line.step is not None
        by_step.setdefault(line.step, []).append(line.score)
    return [(step, by_step[step]) for step in sorted(by_step)]


def drift_files(paths: Sequence[str | Path], *, rollouts: Sequence[str | Path] | None = None,
                thresholds: DriftThresholds | None = None,
                weights: Mapping[str, float] | None = None,
                pairs: Iterable[tuple[str, str]] = (), length_metric: str = "length"
                ) -> DriftWatch:
    """Run the watch over scored files in training order: one file per step, or files whose
    lines carry a ``step`` (split by it). Files without ``step`` are numbered 1, 2, ... in the
    order given. ``rollouts``: one rollouts file per scored file, for the lengths."""
    from rewardsmith.files.parquet import read_rollouts_any

    if not paths:
        raise ConfigError("give at least one scored file")
    if rollouts is not None and len(rollouts) != len(paths):
        raise ConfigError(f"give one rollouts file per scored file ({len(paths)}), got "
                          f"{len(rollouts)}")
    parts = [(index, step, scores) for index, path in enumerate(paths)
             for step, scores in _steps_of(path)]
    numbered = [step is not None for _, step, _ in parts]
    if any(numbered) and not all(numbered):
        raise InputError("some files carry 'step' on their lines and others do not: give "
                         "every file its steps, or none")
    watch = DriftWatch(thresholds=thresholds, weights=weights, pairs=pairs,
                       length_metric=length_metric)
    for position, (index, step, scores) in enumerate(parts, start=1):
        texts = read_rollouts_any(rollouts[index]) if rollouts is not None else None
        try:
            watch.observe(scores, step=position if step is None else step, rollouts=texts)
        except ConfigError as exc:
            raise InputError(f"{exc} (in {str(paths[index])!r})") from None
    return watch


def _carries_steps(path: str | Path) -> bool:
    """Whether a scored JSONL file's first line has a ``step`` (Parquet files carry none)."""
    if is_parquet(path):
        return False
    for line in read_jsonl(path):
        return isinstance(line.value, dict) and "step" in line.value
    return False


def drift_warnings(scored: str | Path, steps: Sequence[str | Path] | None = None,
                   **options: Any) -> list[DriftWarning]:
    """The drift warnings to show beside a scored file: over ``steps`` (scored files of
    successive steps) when given, else over ``scored`` itself when its lines carry ``step``,
    else none. ``options`` are ``drift_files``'."""
    if steps:
        return drift_files(steps, **options).warnings
    if _carries_steps(scored):
        return drift_files([scored], **options).warnings
    return []
