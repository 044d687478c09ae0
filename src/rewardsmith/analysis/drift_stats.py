"""What the drift watch measures at one training step: the figures its warnings compare.

- ``variance_shares``: each component's weighted share of the reward's within-group variance.
  GRPO learns from how rewards differ *within* a group, so deviations from the group mean are
  used, not the spread across prompts. With ``R - mean_g(R) = sum_k w_k (c_k - mean_g(c_k))``
  the variance splits exactly as ``sum_k w_k cov(c_k, R) / var(R)``; each term is a share. The
  weights are the rubric's when given, else fitted by least squares on the deviations (exact
  for a weighted-sum rubric; for a formula, the best linear stand-in, its fit reported).
- ``zero_variance``: the share of groups (at least two rewards) whose rewards are all equal.
- ``mean_length``: the completions' mean length.
- ``disagreement``: for two components, how often one passes (value >= cutoff) while the
  other does not, and their Pearson correlation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..types import Score

__all__ = ["Agreement", "Shares", "agreement", "variance_shares", "zero_variance"]


@dataclass(frozen=True)
class Shares:
    """Variance shares (component -> share; they sum to the fit, 1 for an exact weighted sum)
    and the weights used. ``fitted``: weights estimated; ``fit``: R² of that estimate."""

    shares: dict[str, float]
    weights: dict[str, float]
    fitted: bool
    fit: float
    rollouts: int


@dataclass(frozen=True)
class Agreement:
    disagreement: float  # share of rollouts where exactly one of the two passes
    correlation: float | None  # Pearson; None when one side is constant
    rollouts: int


def _deviations(scores: Sequence[Score], names: Sequence[str]
                ) -> tuple[np.ndarray, np.ndarray] | None:
    """Within-group deviations of the reward and of each component, over rollouts where all
    are numbers and groups with at least two such rollouts."""
    rows: dict[str, list[list[float]]] = {}
    for score in scores:
        values = [score.reward, *(score.components.get(n) for n in names)]
        if all(v is not None for v in values):
            rows.setdefault(score.group, []).append([float(v) for v in values])  # type: ignore[arg-type]
    blocks = []
    for members in rows.values():
        if len(members) >= 2:
            block = np.asarray(members, dtype=np.float64)
            blocks.append(block - block.mean(axis=0))
    if not blocks:
        return None
    stacked = np.concatenate(blocks)
    return stacked[:, 0], stacked[:, 1:]


def variance_shares(scores: Sequence[Score], names: Sequence[str],
                    weights: Mapping[str, float] | None = None) -> Shares | None:
    """Each component's share of the reward's within-group variance; None when the reward
    does not vary within any group (nothing to split)."""
    found = _deviations(scores, names)
    if found is None:
        return None
    reward, components = found
    total = float(reward @ reward)
    if total <= 1e-12 * max(1, len(reward)):
        return None
    if weights is not None and all(n in weights for n in names):
        w = np.array([float(weights[n]) for n in names])
        fitted = False
    else:
        w = np.linalg.lstsq(components, reward, rcond=None)[0]
        fitted = True
    residual = reward - components @ w
    fit = 1.0 - float(residual @ residual) / total
    covariances = components.T @ reward
    shares = {n: float(w[k] * covariances[k] / total) for k, n in enumerate(names)}
    return Shares(shares, {n: float(w[k]) for k, n in enumerate(names)}, fitted, fit,
                  len(reward))


def zero_variance(scores: Sequence[Score]) -> tuple[int, int]:
    """(groups with at least two rewards, those of them whose rewards are all equal)."""
    rewards: dict[str, list[float]] = {}
    for score in scores:
        if score.reward is not None:
            rewards.setdefault(score.group, []).append(score.reward)
    sized = [values for values in rewards.values() if len(values) >= 2]
    return len(sized), sum(1 for values in sized if max(values) == min(values))


def agreement(scores: Sequence[Score], first: str, second: str,
              cutoff: float) -> Agreement | None:
    """How two components agree on the rollouts where both are numbers (None: no such)."""
    pairs = [(s.components.get(first), s.components.get(second)) for s in scores]
    both = np.array([(a, b) for a, b in pairs if a is not None and b is not None],
                    dtype=np.float64).reshape(-1, 2)
    if len(both) == 0:
        return None
    passed = both >= cutoff
    rate = float(np.mean(passed[:, 0] != passed[:, 1]))
    correlation = None
    if len(both) >= 2 and np.ptp(both[:, 0]) > 0 and np.ptp(both[:, 1]) > 0:
        correlation = float(np.corrcoef(both[:, 0], both[:, 1])[0, 1])
    return Agreement(rate, correlation, len(both))
