"""The arithmetic of comparing judges: which rollouts share a call, which pairs are asked,
how verdicts become per-rollout scores, and how samples combine. Pure functions, no I/O.

- **Chunks** (``mode: group``): a group of at most ``chunk`` rollouts is one call. A larger
  group is split into calls of ``chunk`` rollouts that all hold the group's first rollout (the
  anchor); each later chunk's grades are shifted so its anchor gets the grade the first chunk
  gave it, then clipped to the criterion's range.
- **Pairs** (``mode: pairwise``): every pair for groups up to ``all_up_to`` rollouts; beyond,
  a circulant design: rollout ``i`` meets ``i+1 .. i+k/2`` (mod n), so each meets exactly
  ``k`` others, the comparison graph is connected, and the pair count is ``n*k/2``.
- **Scores from pairs**: each pair is asked in both orders; ``v(i, j)`` is 1 when the first
  shown wins, 0 when the second does, 0.5 for a tie. ``p(i beats j) = (v(i,j) + 1 - v(j,i))/2``.
  ``win_rate``: the mean of ``p(i beats j)`` over i's pairs. ``bradley_terry``: strengths by
  Hunter's MM iterations with half a win and half a loss against a reference of strength 1
  (keeps an undefeated rollout finite), scaled so their geometric mean is 1; the score is
  ``s / (s + 1)``, the chance of beating a typical rollout of the group. Both lie in [0, 1]
  and are mapped onto the criterion's range.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

__all__ = ["plan_chunks", "align_chunks", "plan_pairs", "pair_scores", "position_flip",
           "combine_samples"]

_BT_ITERATIONS = 200
_BT_PRIOR = 0.5  # wins (and losses) against the reference rollout


def plan_chunks(size: int, chunk: int) -> list[list[int]]:
    """Member indices of each call; chunks after the first start with the anchor (index 0)."""
    if size <= chunk:
        return [list(range(size))]
    chunks = [list(range(chunk))]
    start = chunk
    while start < size:
        chunks.append([0, *range(start, min(size, start + chunk - 1))])
        start += chunk - 1
    return chunks


def align_chunks(chunks: Sequence[Sequence[int]], grades: Sequence[Sequence[float | None]],
                 low: float, high: float) -> list[float | None]:
    """One grade per member from each chunk's grades (None: not graded); later chunks are
    shifted by the anchor's difference, and lose their grades when the anchor has none."""
    size = 1 + max(i for chunk in chunks for i in chunk)
    out: list[float | None] = [None] * size
    reference = grades[0][0] if len(chunks) > 1 else None
    for number, (members, values) in enumerate(zip(chunks, grades, strict=True)):
        shift = 0.0
        if number > 0:
            anchor = values[0]
            if reference is None or anchor is None:
                continue
            shift = reference - anchor
        for position, member in enumerate(members):
            value = values[position]
            if number > 0 and position == 0:
                continue  # the anchor keeps the first chunk's grade
            if value is not None:
                out[member] = min(high, max(low, value + shift))
    return out


def plan_pairs(size: int, all_up_to: int, per_rollout: int) -> list[tuple[int, int]]:
    """The unordered pairs to ask (each is asked in both orders)."""
    if size < 2:
        return []
    if size <= all_up_to or per_rollout >= size - 1:
        return [(i, j) for i in range(size) for j in range(i + 1, size)]
    seen: set[tuple[int, int]] = set()
    pairs: list[tuple[int, int]] = []
    for step in range(1, per_rollout // 2 + 1):
        for i in range(size):
            pair = (min(i, (i + step) % size), max(i, (i + step) % size))
            if pair not in seen:
                seen.add(pair)
                pairs.append(pair)
    return pairs


def position_flip(first: float, second: float) -> float:
    """How far two orders of one pair disagree: 0 consistent, 1 the verdict followed the
    position (``first`` is v(i, j), ``second`` is v(j, i))."""
    return abs(first + second - 1.0)


def pair_scores(size: int, wins: dict[tuple[int, int], float], method: str) -> list[float | None]:
    """Per-member score in [0, 1] from ``wins[(i, j)] = p(i beats j)`` over i < j pairs;
    None for a member in no pair."""
    met: list[list[tuple[int, float]]] = [[] for _ in range(size)]
    for (i, j), p in wins.items():
        met[i].append((j, p))
        met[j].append((i, 1.0 - p))
    if method == "win_rate":
        return [statistics.fmean(p for _, p in games) if games else None for games in met]
    return _bradley_terry(met)


def _bradley_terry(met: list[list[tuple[int, float]]]) -> list[float | None]:
    strength = [1.0] * len(met)
    for _ in range(_BT_ITERATIONS):
        updated = []
        for i, games in enumerate(met):
            if not games:
                updated.append(1.0)
                continue
            won = sum(p for _, p in games) + _BT_PRIOR
            denominator = (sum(1.0 / (strength[i] + strength[j]) for j, _ in games)
                           + 2 * _BT_PRIOR / (strength[i] + 1.0))
            updated.append(won / denominator)
        scale = math.exp(statistics.fmean(math.log(s) for s in updated))
        change = max(abs(a / scale - b) for a, b in zip(updated, strength, strict=True))
        strength = [s / scale for s in updated]
        if change < 1e-10:
            break
    return [s / (s + 1.0) if games else None for s, games in zip(strength, met, strict=True)]


def combine_samples(values: Sequence[float], *, binary: bool) -> tuple[float, float]:
    """The combined grade of several samples and their spread (population std; 0 for one).

    Binary criteria take the majority (grades >= 0.5 pass); a tie fails."""
    spread = statistics.pstdev(values) if len(values) > 1 else 0.0
    if binary:
        passed = sum(v >= 0.5 for v in values)
        return (1.0 if passed * 2 > len(values) else 0.0), spread
    return statistics.fmean(values), spread
