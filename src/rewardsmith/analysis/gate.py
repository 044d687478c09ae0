"""The promotion gate: does a new scored run beat (or at least not lose to) a baseline run of
the same prompts, with confidence?

Rollouts are paired (by id, or by position within their group: ``pairing``); for the reward and
for each component the mean paired difference ``new - baseline`` gets a confidence interval from
a paired bootstrap that resamples prompts (groups), not single rollouts (``bootstrap``). The
thresholds are then checked against the interval:

- ``min_delta``: the interval's lower bound of the reward's difference must be at least it;
- ``max_regression[name]``: the lower bound for ``name`` (``reward`` or a component) must be
  at least ``-X``: the run must show, with confidence, that it lost at most ``X``;
- with neither given for the reward, the reward must not have *significantly* dropped: the
  interval's upper bound must be at least 0;
- ``max_failure_increase``: the share of paired rollouts whose status is not ``ok`` may grow by
  at most this much (a plain difference of rates), so that a run cannot pass by making the
  reward fail on exactly the prompts it gets wrong.

A pair counts in a statistic only when both sides have a number for it: a masked or failed
reward (null) is not a zero; such pairs are counted and reported instead.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InputError
from ..types import Score, Status
from .bootstrap import Interval, cluster_bootstrap
from .pairing import PairBy, Pairing, examples, pair_scores
from .scored_input import read_scored

__all__ = ["Check", "Comparison", "GateResult", "gate", "gate_files", "REWARD"]

REWARD = "reward"  # the name of the total reward among the compared statistics
MIN_GROUPS = 2
# Sums of float differences carry rounding residue (0.3 + 0.1 - 0.3 != 0.1): a bound this
# close to its threshold (relative, at least absolute for small thresholds) meets it.
_TOLERANCE = 1e-9


def _meets(value: float, floor: float) -> bool:
    return value >= floor - _TOLERANCE * max(1.0, abs(floor))


@dataclass(frozen=True)
class Comparison:
    """One statistic (the reward or a component) over the pairs that have it on both sides."""

    name: str
    baseline_mean: float | None
    new_mean: float | None
    delta: float | None  # new_mean - baseline_mean: the mean paired difference
    low: float | None  # the confidence interval of delta (None: fewer than 2 groups)
    high: float | None
    pairs: int
    groups: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Check:
    """One threshold and whether the new run met it."""

    rule: str  # min-delta | max-regression | no-regression | max-failure-increase
    target: str  # "reward", a component, or "status"
    threshold: float
    value: float | None  # what was compared with the threshold (an interval bound, a rate)
    passed: bool
    message: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class GateResult:
    """The verdict and everything it rests on. ``exit_code`` is 0 when passed, else 1."""

    passed: bool
    checks: list[Check]
    comparisons: list[Comparison]  # the reward first, then components by name
    pairing: str  # "id" or "position"
    pairs: int
    groups: int
    unpaired_baseline: list[str]
    unpaired_new: list[str]
    statuses_baseline: dict[str, int]  # over the paired rollouts
    statuses_new: dict[str, int]
    confidence: float
    resamples: int
    seed: int
    notes: list[str] = field(default_factory=list)

    @property
    def reasons(self) -> list[str]:
        """Why the run failed: one message per failed check (empty when it passed)."""
        return [check.message for check in self.checks if not check.passed]

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def comparison(self, name: str) -> Comparison:
        for item in self.comparisons:
            if item.name == name:
                return item
        raise KeyError(name)

    def failure_rate(self, which: str) -> float:
        statuses = self.statuses_new if which == "new" else self.statuses_baseline
        total = sum(statuses.values())
        return (total - statuses.get(Status.OK.value, 0)) / total if total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "exit_code": self.exit_code,
            "reasons": self.reasons,
            "checks": [c.to_dict() for c in self.checks],
            "comparisons": [c.to_dict() for c in self.comparisons],
            "pairing": {
                "method": self.pairing,
                "pairs": self.pairs,
                "groups": self.groups,
                "unpaired_baseline": len(self.unpaired_baseline),
                "unpaired_new": len(self.unpaired_new),
                "unpaired_baseline_examples": examples(self.unpaired_baseline),
                "unpaired_new_examples": examples(self.unpaired_new),
            },
            "statuses": {"baseline": dict(self.statuses_baseline),
                         "new": dict(self.statuses_new)},
            "failure_rate": {"baseline": self.failure_rate("baseline"),
                             "new": self.failure_rate("new")},
            "confidence": self.confidence,
            "resamples": self.resamples,
            "seed": self.seed,
            "notes": list(self.notes),
        }


# ------------------------------------------------------------------ statistics


def _values(scores: Sequence[Score], name: str) -> np.ndarray:
    """One statistic of each score as floats, NaN where it is null or absent."""
    nan = float("nan")
    if name == REWARD:
        picked = [nan if s.reward is None else s.reward for s in scores]
    else:
        picked = [nan if (v := s.components.get(name)) is None else v for s in scores]
    return np.array(picked, dtype=np.float64)


def _compare(pairing: Pairing, names: Sequence[str], *, confidence: float, resamples: int,
             seed: int) -> list[Comparison]:
    groups: dict[str, int] = {}
    rows = np.array([groups.setdefault(a.group, len(groups)) for a, _ in pairing.pairs],
                    dtype=np.int64)
    baseline = [a for a, _ in pairing.pairs]
    new = [b for _, b in pairing.pairs]
    shape = (len(groups), len(names))
    diffs, counts = np.zeros(shape), np.zeros(shape)
    old_sums, new_sums = np.zeros(len(names)), np.zeros(len(names))
    for k, name in enumerate(names):
        old_values, new_values = _values(baseline, name), _values(new, name)
        # masked, failed or absent on one side: not a zero, not counted
        both = ~(np.isnan(old_values) | np.isnan(new_values))
        where = rows[both]
        diffs[:, k] = np.bincount(where, weights=new_values[both] - old_values[both],
                                  minlength=len(groups))
        counts[:, k] = np.bincount(where, minlength=len(groups))
        old_sums[k] = math.fsum(old_values[both])
        new_sums[k] = math.fsum(new_values[both])
    intervals = cluster_bootstrap(diffs, counts, confidence=confidence, resamples=resamples,
                                  seed=seed)
    return [_comparison(name, interval, old_sums[k], new_sums[k])
            for k, (name, interval) in enumerate(zip(names, intervals))]


def _tidy(value: float | None) -> float | None:
    """Rounded to 12 decimals: float residue (a difference of -2e-17 where the rewards are
    equal, 0.09999999999999999 for 0.1) is not shown as a figure."""
    return None if value is None else round(value, 12) + 0.0  # + 0.0: no "-0.0"


def _comparison(name: str, interval: Interval, old_sum: float, new_sum: float) -> Comparison:
    if interval.pairs == 0:
        return Comparison(name, None, None, None, None, None, 0, 0)
    return Comparison(name, _tidy(old_sum / interval.pairs), _tidy(new_sum / interval.pairs),
                      _tidy(interval.estimate), _tidy(interval.low), _tidy(interval.high),
                      interval.pairs, interval.clusters)


# ------------------------------------------------------------------ checks


def _too_few(item: Comparison) -> str:
    return (f"{item.name}: only {item.groups} paired prompt(s) have it on both sides; a "
            f"confidence interval needs at least {MIN_GROUPS}")


def _interval_text(item: Comparison, confidence: float) -> str:
    return (f"mean difference {item.delta:+.4g}, {confidence:.0%} interval "
            f"[{item.low:+.4g}, {item.high:+.4g}]")


def _lower_bound_check(rule: str, item: Comparison, floor: float, threshold: float,
                       confidence: float, wanted: str) -> Check:
    if item.low is None or item.delta is None:
        return Check(rule, item.name, threshold, None, False, _too_few(item))
    passed = _meets(item.low, floor)
    verdict = "meets" if passed else "fails"
    message = (f"{item.name}: {_interval_text(item, confidence)} {verdict} {wanted} "
               f"(lower bound {item.low:+.4g} {'>=' if passed else '<'} {floor:+.4g})")
    return Check(rule, item.name, threshold, item.low, passed, message)


def _checks(comparisons: Sequence[Comparison], *, min_delta: float | None,
            max_regression: Mapping[str, float], max_failure_increase: float | None,
            confidence: float, rates: tuple[float, float]) -> list[Check]:
    by_name = {c.name: c for c in comparisons}
    out = []
    reward = by_name[REWARD]
    if min_delta is not None:
        out.append(_lower_bound_check("min-delta", reward, min_delta, min_delta, confidence,
                                      f"--min-delta {min_delta:+.4g}"))
    for name, limit in max_regression.items():
        out.append(_lower_bound_check("max-regression", by_name[name], -limit, limit,
                                      confidence, f"--max-regression {name}={limit:.4g}"))
    if min_delta is None and REWARD not in max_regression:
        if reward.high is None or reward.delta is None:
            out.append(Check("no-regression", REWARD, 0.0, None, False, _too_few(reward)))
        else:
            passed = _meets(reward.high, 0.0)
            message = (f"reward: {_interval_text(reward, confidence)}"
                       + (": no significant drop" if passed else
                          ": significantly lower than the baseline (upper bound < 0)"))
            out.append(Check("no-regression", REWARD, 0.0, reward.high, passed, message))
    if max_failure_increase is not None:
        old, new = rates
        passed = _meets(max_failure_increase, new - old)
        message = (f"status: {new:.1%} of the new run's paired rollouts are not ok against "
                   f"{old:.1%} in the baseline ({new - old:+.1%}; "
                   f"--max-failure-increase {max_failure_increase:.1%})")
        out.append(Check("max-failure-increase", "status", max_failure_increase, new - old,
                         passed, message))
    return out


def _validate(min_delta: float | None, max_regression: Mapping[str, float], confidence: float,
              resamples: int, seed: int, max_failure_increase: float | None) -> None:
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be between 0 and 1 (e.g. 0.95), got {confidence}")
    if seed < 0:
        raise ConfigError(f"seed must be 0 or more, got {seed}")
    if resamples < 100:
        raise ConfigError(f"resamples must be at least 100 for a percentile interval, got "
                          f"{resamples}")
    for name, value in [("min delta", min_delta), *max_regression.items(),
                        ("max failure increase", max_failure_increase)]:
        if value is not None and not np.isfinite(value):
            raise ConfigError(f"{name}: {value} is not a finite number")
    for name, limit in max_regression.items():
        if limit < 0:
            raise ConfigError(f"max regression for {name!r} must be >= 0 (how much it may "
                              f"drop), got {limit}")
    if max_failure_increase is not None and not 0 <= max_failure_increase <= 1:
        raise ConfigError(f"max failure increase must be between 0 and 1, got "
                          f"{max_failure_increase}")


# ------------------------------------------------------------------ entry points


def gate(new: Sequence[Score], baseline: Sequence[Score], *, min_delta: float | None = None,
         max_regression: Mapping[str, float] | None = None, confidence: float = 0.95,
         resamples: int = 2000, seed: int = 0, pair_by: PairBy = "auto",
         max_failure_increase: float | None = 0.05) -> GateResult:
    """Judge ``new`` against ``baseline`` (two scored runs of the same prompts).

    ``ConfigError`` for bad thresholds or a component in ``max_regression`` that neither run
    has; ``InputError`` when the runs do not overlap or no pair has a reward on both sides.
    """
    regression = dict(max_regression or {})
    _validate(min_delta, regression, confidence, resamples, seed, max_failure_increase)
    pairing = pair_scores(baseline, new, by=pair_by)
    names = [REWARD, *sorted({n for a, b in pairing.pairs for n in (*a.components,
                                                                       *b.components)})]
    unknown = [n for n in regression if n not in names]
    if unknown:
        raise ConfigError(f"--max-regression names {', '.join(map(repr, unknown))}, which the "
                          f"runs do not have; known: {', '.join(names)}")
    comparisons = _compare(pairing, names, confidence=confidence, resamples=resamples,
                           seed=seed)
    if comparisons[0].pairs == 0:
        raise InputError(f"{len(pairing.pairs)} rollouts pair up, but none has a reward in both "
                         f"runs (all masked or failed on one side): nothing to compare")
    old_status = Counter(a.status.value for a, _ in pairing.pairs)
    new_status = Counter(b.status.value for _, b in pairing.pairs)
    result = GateResult(
        passed=False, checks=[], comparisons=comparisons, pairing=pairing.method,
        pairs=len(pairing.pairs), groups=len({a.group for a, _ in pairing.pairs}),
        unpaired_baseline=pairing.unpaired_baseline, unpaired_new=pairing.unpaired_new,
        statuses_baseline=dict(sorted(old_status.items())),
        statuses_new=dict(sorted(new_status.items())),
        confidence=confidence, resamples=resamples, seed=seed)
    result.checks = _checks(comparisons, min_delta=min_delta, max_regression=regression,
                            max_failure_increase=max_failure_increase, confidence=confidence,
                            rates=(result.failure_rate("baseline"), result.failure_rate("new")))
    result.passed = all(check.passed for check in result.checks)
    excluded = len(pairing.pairs) - comparisons[0].pairs
    if excluded:
        result.notes.append(f"{excluded} pair(s) left out of the reward's difference: the "
                            f"reward is null (masked or failed) on at least one side")
    if pairing.unpaired_baseline or pairing.unpaired_new:
        result.notes.append(f"unpaired rollouts (not compared): {len(pairing.unpaired_new)} in "
                            f"the new run, {len(pairing.unpaired_baseline)} in the baseline")
    return result


def gate_files(new: str | Path, baseline: str | Path, **options: Any) -> GateResult:
    """``gate`` over two scored files (JSONL, or Parquet by extension); bad lines are
    ``InputError`` naming the file and the line. ``options`` are ``gate``'s."""
    new_scores = [line.score for line in read_scored(new)]
    baseline_scores = [line.score for line in read_scored(baseline)]
    return gate(new_scores, baseline_scores, **options)
