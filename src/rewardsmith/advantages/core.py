"""Group advantages that are exactly 0.0 when a group's rewards are all equal.

A group whose rewards are all equal teaches nothing, so every advantage in it must be 0. The
textbook formula gets there only when the group mean is exact; in floating point it often is
not (in float32 the mean of 16 x 0.3 can be one ulp off 0.3), and dividing that residue by a
standard deviation near 0 turns it into a real push on the policy.

Here the zero is by construction, not by luck:

* statistics are computed in float64 on the differences from one member of the group, and
  the mean is refined once with the sum of the centered values (cheap, and as good as float64
  allows);
* equal groups are found exactly (every reward compared with that member) and their
  advantages are set to exactly 0.0 before the cast to the output dtype, so the zero
  survives float32 and float16 alike;
* a singleton group (one unmasked rollout) gets 0.0: with nothing to compare it to, its reward
  is its own mean. (verl gives it its raw reward instead, which pushes a lone answer by the
  reward's absolute size.)

Rewards that differ only by float noise (``0.1 + 0.2`` against ``0.3``) are *not* equal and
are left alone: their advantages are tiny with the default ``eps`` but become +-1 with
``eps=0``. Round such totals onto a grid with :func:`rewardsmith.advantages.quantize`.

Masked rollouts (reward ``None``) are left out of their group's statistics and get no
advantage. NaN or infinite rewards are refused with an :class:`AdvantageError` naming the
rollout.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import AdvantageError, ConfigError
from ..types import Score

__all__ = [
    "CONVENTIONS",
    "DTYPES",
    "METHODS",
    "SCALES",
    "Convention",
    "advantages_array",
    "apply_advantages",
    "compute_advantages",
    "encode_groups",
    "get_convention",
]

METHODS = ("grpo", "dr_grpo", "rloo")
SCALES = ("group", "batch", "none", "loo")
DTYPES = ("float16", "float32", "float64")

# The natural scale of each method when none is given.
_DEFAULT_SCALE = {"grpo": "group", "dr_grpo": "none", "rloo": "none"}


@dataclass(frozen=True)
class Convention:
    """A trainer's advantage formula, reduced to its constants (computed exactly here)."""

    method: str
    scale: str
    eps: float
    ddof: int


# Trainer name -> its formula's constants, so ``trainer="verl"`` in a training loop gives the
# same numbers as verl would, minus the float residues. The emulations live in trainers.py.
CONVENTIONS: dict[str, Convention] = {
    "rewardsmith": Convention("grpo", "group", 1e-6, 1),
    "verl": Convention("grpo", "group", 1e-6, 1),
    "trl": Convention("grpo", "group", 1e-4, 1),
    "slime": Convention("grpo", "group", 1e-6, 1),
    "miles": Convention("grpo", "group", 1e-6, 1),
    "openrlhf": Convention("grpo", "group", 1e-9, 1),
    "nemo": Convention("rloo", "loo", 1e-6, 0),
}


def get_convention(trainer: str) -> Convention:
    """The constants of ``trainer``'s formula; ConfigError listing the known names otherwise."""
    key = trainer.strip().lower()
    if key not in CONVENTIONS:
        raise ConfigError(
            f"unknown trainer {trainer!r}: expected one of {', '.join(sorted(CONVENTIONS))}"
        )
    return CONVENTIONS[key]


def _check_choice(kind: str, value: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ConfigError(f"unknown {kind} {value!r}: expected one of {', '.join(choices)}")
    return value


def _resolve(method: str, scale: str | None, eps: float, ddof: int, dtype: str) -> str:
    """Validate the options; return the effective scale."""
    _check_choice("method", method, METHODS)
    _check_choice("dtype", dtype, DTYPES)
    effective = _DEFAULT_SCALE[method] if scale is None else scale
    _check_choice("scale", effective, SCALES)
    if method == "dr_grpo" and effective != "none":
        raise ConfigError(
            f"method 'dr_grpo' is r - mean without scaling; scale={effective!r} makes it grpo"
        )
    if isinstance(eps, bool) or not (
        isinstance(eps, (int, float, np.floating)) and math.isfinite(eps) and eps >= 0
    ):
        raise ConfigError(f"eps must be a finite number >= 0, got {eps!r}")
    if ddof not in (0, 1):
        raise ConfigError(f"ddof must be 0 (population std) or 1 (unbiased std), got {ddof!r}")
    return effective


def encode_groups(groups: Sequence[Hashable]) -> tuple[NDArray[np.intp], list[Hashable]]:
    """Map group labels to codes 0..G-1 in order of first appearance; return codes and labels."""
    labels = list(dict.fromkeys(groups))
    index = {label: code for code, label in enumerate(labels)}
    codes = np.fromiter(map(index.__getitem__, groups), dtype=np.intp, count=len(groups))
    return codes, labels


def _rollout_name(position: int, ids: Sequence[Any] | None) -> str:
    return repr(ids[position]) if ids is not None else f"#{position}"


def _refuse_non_finite(
    values: NDArray[np.float64], valid: NDArray[np.bool_], ids: Sequence[Any] | None
) -> None:
    bad = np.flatnonzero(valid & ~np.isfinite(values))
    if bad.size:
        first = int(bad[0])
        more = f" (and {bad.size - 1} more)" if bad.size > 1 else ""
        raise AdvantageError(
            f"rollout {_rollout_name(first, ids)} has reward {values[first]!r}{more}: "
            "advantages need finite rewards; mask the rollout (reward None) or fix the reward"
        )


def _others_equal(
    values: NDArray[np.float64], codes: NDArray[np.intp], groups: int
) -> NDArray[np.bool_]:
    """For each rollout: are the *other* members of its group all equal (found exactly)?"""
    order = np.lexsort((values, codes))
    v, c = values[order], codes[order]
    starts = np.ones(v.size, dtype=bool)
    starts[1:] = (c[1:] != c[:-1]) | (v[1:] != v[:-1])
    run = np.cumsum(starts) - 1
    multiplicity = np.bincount(run)[run]
    distinct = np.bincount(c[starts], minlength=groups)[c]
    sorted_answer = (distinct == 1) | ((distinct == 2) & (multiplicity == 1))
    answer: NDArray[np.bool_] = np.empty_like(sorted_answer)
    answer[order] = sorted_answer
    return answer


def _core(
    r: NDArray[np.float64],
    codes: NDArray[np.intp],
    groups: int,
    method: str,
    scale: str,
    eps: float,
    ddof: int,
) -> NDArray[np.float64]:
    """Advantages of unmasked rollouts ``r`` (float64, finite) with group codes ``codes``."""
    counts = np.bincount(codes, minlength=groups)
    safe = np.maximum(counts, 1).astype(np.float64)
    # Work relative to a member of the group: differences between near rewards are exact
    # (Sterbenz), so the mean of the differences is accurate to the spread, not to the
    # rewards' magnitude. Any member works as the representative, whichever write wins.
    representative = np.empty(groups, dtype=np.float64)
    representative[codes] = r
    shifted = r - representative[codes]
    mean = np.bincount(codes, weights=shifted, minlength=groups) / safe
    centered = shifted - mean[codes]
    # One refinement: the centered values sum to the rounding error of the first mean.
    mean += np.bincount(codes, weights=centered, minlength=groups) / safe
    centered = shifted - mean[codes]

    # Exact equality: a group is equal when every member equals its representative.
    differs = np.bincount(codes, weights=shifted != 0.0, minlength=groups) > 0
    equal_member = ~differs[codes]
    centered[equal_member] = 0.0

    size = counts[codes].astype(np.float64)
    if method == "rloo":
        # r_i - mean(others) = n / (n - 1) * (r_i - mean); singletons are equal groups (0).
        advantage = centered * (size / np.maximum(size - 1.0, 1.0))
    else:
        advantage = centered

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if scale == "group":
            squares = np.bincount(codes, weights=centered * centered, minlength=groups)
            std = np.sqrt(squares / np.maximum(counts - ddof, 1))
            advantage = advantage / (std[codes] + eps)
        elif scale == "batch":
            std_all = float(np.std(r, ddof=ddof)) if r.size > ddof else 0.0
            advantage = advantage / (std_all + eps)
        elif scale == "loo":
            # Population std of the other members (NeMo RL's rule), and no division at all
            # when the others are all equal, decided exactly rather than by a float test.
            squares = np.bincount(codes, weights=centered * centered, minlength=groups)
            others = np.maximum(size - 1.0, 1.0)
            var = (squares[codes] - centered**2) / others - (centered / others) ** 2
            std = np.sqrt(np.maximum(var, 0.0))
            divide = ~_others_equal(r, codes, groups)
            advantage = np.where(divide, advantage / (std + eps), advantage)
    advantage[equal_member] = 0.0
    return advantage


def advantages_array(
    rewards: ArrayLike,
    codes: ArrayLike,
    *,
    valid: ArrayLike | None = None,
    method: str = "grpo",
    scale: str | None = None,
    eps: float = 1e-6,
    ddof: int = 1,
    dtype: str = "float64",
    ids: Sequence[Any] | None = None,
) -> NDArray[np.floating]:
    """Vectorized advantages: NaN where ``valid`` is False, exactly 0.0 for equal groups.

    ``codes`` are integer group labels (any integers; :func:`encode_groups` makes them from
    hashable labels). ``scale`` defaults to the method's own: ``group`` for grpo, ``none``
    for dr_grpo and rloo; ``loo`` divides by the population std of the other group members,
    only where they are not all equal. The result has dtype ``dtype``.
    """
    scale = _resolve(method, scale, eps, ddof, dtype)
    r = np.asarray(rewards, dtype=np.float64).reshape(-1)
    group_codes = np.asarray(codes).reshape(-1)
    if group_codes.size != r.size:
        raise ConfigError(f"got {r.size} rewards but {group_codes.size} group labels")
    if not np.issubdtype(group_codes.dtype, np.integer):
        raise ConfigError("codes must be integers; use encode_groups() for other labels")
    mask = (
        np.ones(r.size, dtype=bool) if valid is None else np.asarray(valid, dtype=bool).reshape(-1)
    )
    if mask.size != r.size:
        raise ConfigError(f"got {r.size} rewards but {mask.size} valid flags")
    if ids is not None and len(ids) != r.size:
        raise ConfigError(f"got {r.size} rewards but {len(ids)} ids")
    _refuse_non_finite(r, mask, ids)

    out = np.full(r.size, np.nan, dtype=np.float64)
    if mask.any():
        kept = group_codes[mask].astype(np.intp, copy=False)
        low, high = int(kept.min()), int(kept.max())
        if low >= 0 and high < 4 * kept.size + 16:
            groups = high + 1  # already small: empty codes cost nothing in bincount
        else:
            labels, inverse = np.unique(kept, return_inverse=True)
            kept, groups = inverse.reshape(-1).astype(np.intp), labels.size
        out[mask] = _core(r[mask], kept, groups, method, scale, eps, ddof)
    with np.errstate(over="ignore"):
        result = out.astype(dtype)  # checked just below
    overflow = mask & ~np.isfinite(result)
    if overflow.any():
        first = int(np.flatnonzero(overflow)[0])
        raise AdvantageError(
            f"the advantage of rollout {_rollout_name(first, ids)} overflows {dtype}: "
            "rewards are too large for this dtype; rescale them"
        )
    return result


def _reward_vector(
    rewards: Sequence[float | None], ids: Sequence[Any] | None
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Rewards as float64 and the unmasked flags; None is masked, anything else a number."""
    try:
        # numpy reads None as NaN: the few NaN positions are told apart below.
        values = np.array(rewards, dtype=np.float64).reshape(-1)
        if values.size != len(rewards):
            raise ValueError("not a flat sequence of rewards")
    except (TypeError, ValueError):
        for position, reward in enumerate(rewards):
            if reward is None:
                continue
            if isinstance(reward, bool) or not isinstance(reward, (int, float, np.number)):
                raise AdvantageError(
                    f"rollout {_rollout_name(position, ids)} has reward {reward!r}, "
                    "which is not a number"
                ) from None
        raise
    valid = np.ones(values.size, dtype=bool)
    for position in np.flatnonzero(np.isnan(values)).tolist():
        valid[position] = rewards[position] is not None
    return values, valid


def compute_advantages(
    rewards: Sequence[float | None],
    groups: Sequence[Hashable],
    *,
    method: str | None = None,
    scale: str | None = None,
    eps: float | None = None,
    ddof: int | None = None,
    dtype: str = "float64",
    ids: Sequence[Any] | None = None,
    trainer: str | None = None,
) -> list[float | None]:
    """Advantages of ``rewards`` (None = masked) grouped by ``groups``; None where masked.

    ``trainer`` (``verl``, ``trl``, ``slime``, ``miles``, ``openrlhf``, ``nemo`` or
    ``rewardsmith``) picks that trainer's method, scale, eps and std; explicit arguments
    override it. Defaults otherwise: grpo, the method's own scale, eps 1e-6, unbiased std.
    Equal groups get exactly 0.0 whatever ``dtype``; ``ids`` name rollouts in errors.
    """
    base = get_convention(trainer) if trainer is not None else CONVENTIONS["rewardsmith"]
    chosen = method if method is not None else base.method
    if scale is None and (trainer is not None and method in (None, base.method)):
        scale = base.scale
    if len(groups) != len(rewards):
        raise ConfigError(f"got {len(rewards)} rewards but {len(groups)} group labels")
    values, valid = _reward_vector(rewards, ids)
    codes, _ = encode_groups(groups)
    result = advantages_array(
        values,
        codes,
        valid=valid,
        method=chosen,
        scale=scale,
        eps=base.eps if eps is None else eps,
        ddof=base.ddof if ddof is None else ddof,
        dtype=dtype,
        ids=ids,
    )
    # Python floats hold float32/float16 values exactly, so nothing is lost here.
    out: list[float | None] = result.tolist()
    for position in np.flatnonzero(~valid).tolist():
        out[position] = None
    return out


def apply_advantages(
    scores: Sequence[Score],
    *,
    method: str | None = None,
    scale: str | None = None,
    eps: float | None = None,
    ddof: int | None = None,
    dtype: str = "float64",
    trainer: str | None = None,
) -> None:
    """Fill ``Score.advantage`` in place (None for masked scores), grouped by ``Score.group``."""
    advantages = compute_advantages(
        [s.reward for s in scores],
        [s.group for s in scores],
        method=method,
        scale=scale,
        eps=eps,
        ddof=ddof,
        dtype=dtype,
        ids=[s.id for s in scores],
        trainer=trainer,
    )
    for score, advantage in zip(scores, advantages, strict=True):
        score.advantage = advantage
