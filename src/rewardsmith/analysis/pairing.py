"""Pairing the rollouts of two scored runs of the same prompts: by rollout id, or by the
rollout's position within its group (the k-th rollout of group g in one file with the k-th of
group g in the other, in file order)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from rewardsmith.files.scored import scores_by_id

from ..errors import ConfigError, InputError
from ..types import Score

__all__ = ["PAIR_BY", "PairBy", "Pairing", "examples", "pair_scores"]

PairBy = Literal["auto", "id", "position"]
PAIR_BY: tuple[PairBy, ...] = ("auto", "id", "position")
_EXAMPLES = 5


@dataclass
class Pairing:
    """Which rollouts were paired, and which were left without a partner."""

    method: Literal["id", "position"]
    pairs: list[tuple[Score, Score]]  # (baseline, new), both in the same group
    unpaired_baseline: list[str] = field(default_factory=list)  # ids
    unpaired_new: list[str] = field(default_factory=list)


def _group_mismatch(baseline: dict[str, Score], new: dict[str, Score]) -> str | None:
    for rollout_id, score in new.items():
        other = baseline.get(rollout_id)
        if other is not None and other.group != score.group:
            return (f"rollout {rollout_id!r} is in group {other.group!r} in the baseline and "
                    f"{score.group!r} in the new run")
    return None


def _pair_by_id(baseline: dict[str, Score], new: dict[str, Score]) -> Pairing:
    pairs = [(baseline[i], score) for i, score in new.items() if i in baseline]
    return Pairing("id", pairs, [i for i in baseline if i not in new],
                   [i for i in new if i not in baseline])


def _groups(scores: Sequence[Score]) -> dict[str, list[Score]]:
    out: dict[str, list[Score]] = {}
    for score in scores:
        out.setdefault(score.group, []).append(score)
    return out


def _pair_by_position(baseline: Sequence[Score], new: Sequence[Score]) -> Pairing:
    old_groups, new_groups = _groups(baseline), _groups(new)
    pairing = Pairing("position", [])
    for group, members in new_groups.items():
        others = old_groups.get(group, [])
        pairing.pairs.extend(zip(others, members))
        pairing.unpaired_new.extend(s.id for s in members[len(others):])
    for group, members in old_groups.items():
        paired = len(new_groups.get(group, []))
        pairing.unpaired_baseline.extend(s.id for s in members[paired:])
    return pairing


def pair_scores(baseline: Sequence[Score], new: Sequence[Score], *,
                by: PairBy = "auto") -> Pairing:
    """Pair two runs. ``auto`` pairs by id when the runs share ids and every shared id is in
    the same group in both; otherwise by position within the group. ``InputError`` when
    nothing pairs, or when ``id`` is asked for and a shared id changed group."""
    if by not in PAIR_BY:
        raise ConfigError(f"pair by must be one of {', '.join(PAIR_BY)}, got {by!r}")
    pairing: Pairing | None = None
    if by in ("auto", "id"):
        old_ids, new_ids = scores_by_id(baseline, "baseline"), scores_by_id(new, "new")
        mismatch = _group_mismatch(old_ids, new_ids)
        if by == "id" and mismatch is not None:
            raise InputError(f"cannot pair by id: {mismatch}")
        if mismatch is None and (by == "id" or not old_ids.keys().isdisjoint(new_ids)):
            pairing = _pair_by_id(old_ids, new_ids)
    if pairing is None:
        pairing = _pair_by_position(baseline, new)
    if not pairing.pairs:
        how = "no rollout id" if pairing.method == "id" else "no group"
        raise InputError(f"the runs do not overlap: {how} appears in both (pairing by "
                         f"{pairing.method}); a gate compares two runs of the same prompts")
    return pairing


def examples(ids: Sequence[str]) -> list[str]:
    """The first few ids of a list, for messages and reports."""
    return list(ids[:_EXAMPLES])
