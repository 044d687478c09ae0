"""``ScoreColumns``: scores as columns (the rewards, each component's values) in input order,
with a ``Score`` object per rollout only when asked for.

A training loop reads one number per rollout; building a ``Score`` (and its dicts) for each
costs more than a fast reward's own call. So the engine keeps a batch whose components all
returned plain numbers as columns, and builds objects only for ``scores()``. A batch with a
failure, metrics or a rubric that needs per-rollout logic (gates, a formula) is combined into
``Score`` objects at once, and its columns are read from them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import NamedTuple, cast

from rewardsmith.types import (
    Rollout,
    Score,
    Status,
)

__all__ = ["ScoreColumns"]


class _Block(NamedTuple):
    """One batch's part: plain values and the weights of their sum, or scores already built
    (or both, once built)."""

    rollouts: Sequence[Rollout]
    components: list[list[float]] | None  # in the order of ``names``
    weights: tuple[float, ...]
    scores: list[Score] | None


class ScoreColumns:
    """Scores in input order, as columns.

    ``rewards`` holds each rollout's total (None where masked), ``components`` each component's
    values by name (None where it failed or abstained), ``ids``, ``groups`` and ``statuses``
    one entry per rollout. ``scores()`` gives the same results as ``Score`` objects (what
    ``Engine.score`` returns), built on first call. ``rewards``, ``components`` and
    ``scores()`` are made once and then shared: copy one before changing it.
    """

    __slots__ = ("names", "_blocks", "_rewards", "_components", "_scores", "_length")

    def __init__(self, names: Sequence[str], blocks: Sequence[_Block] = ()):
        self.names: tuple[str, ...] = tuple(names)
        self._blocks = list(blocks)
        self._length = sum(len(block.rollouts) for block in self._blocks)
        self._rewards: list[float | None] | None = None
        self._components: dict[str, list[float | None]] | None = None
        self._scores: list[Score] | None = None

    # ------------------------------------------------------------ making

    @classmethod
    def of_weighted_sums(cls, names: Sequence[str], weights: Sequence[float],
                         rollouts: Sequence[Rollout], components: list[list[float]]
                         ) -> ScoreColumns:
        """Plain results: every rollout ok, ``components`` one column of finite floats per
        name, and each reward their sum with ``weights``."""
        if not names or len(components) != len(names) or len(weights) != len(names) or any(
                len(column) != len(rollouts) for column in components):
            raise ValueError("every column needs one value per rollout, and one column and "
                             "one weight per name (at least one)")
        return cls(names, [_Block(rollouts, components, tuple(weights), None)])

    @classmethod
    def of_scores(cls, names: Sequence[str], rollouts: Sequence[Rollout],
                  scores: list[Score]) -> ScoreColumns:
        """Results already combined into ``Score`` objects (one per rollout, in order)."""
        if len(scores) != len(rollouts):
            raise ValueError(f"{len(scores)} scores for {len(rollouts)} rollouts")
        return cls(names, [_Block(rollouts, None, (), scores)])

    @classmethod
    def joined(cls, names: Sequence[str], parts: Sequence[ScoreColumns]) -> ScoreColumns:
        """Parts one after another (no column is built to join them; scores a part built
        already are kept)."""
        blocks = []
        for part in parts:
            if part._scores is not None and len(part._blocks) == 1:
                blocks.append(part._blocks[0]._replace(scores=part._scores))
            else:
                blocks.extend(part._blocks)
        return cls(names, blocks)

    def reordered(self, order: Sequence[int]) -> ScoreColumns:
        """The rollout at ``order[i]`` becomes the ``i``-th (``order`` is a permutation)."""
        rollouts = self._all_rollouts()
        picked = [rollouts[i] for i in order]
        weights = {block.weights for block in self._blocks if block.scores is None}
        if len(weights) == 1 and all(block.scores is None for block in self._blocks):
            columns = [self.components[name] for name in self.names]
            return ScoreColumns.of_weighted_sums(
                self.names, weights.pop(), picked,
                [[cast(float, column[i]) for i in order] for column in columns])
        scores = self.scores()
        return ScoreColumns.of_scores(self.names, picked, [scores[i] for i in order])

    # ------------------------------------------------------------ reading

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        return f"ScoreColumns({self._length} rollouts, components {list(self.names)})"

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self._all_rollouts()]

    @property
    def groups(self) -> list[str]:
        return [r.group for r in self._all_rollouts()]

    @property
    def rewards(self) -> list[float | None]:
        """Each rollout's total reward (None where masked)."""
        if self._rewards is None:
            self._rewards = list(itertools.chain.from_iterable(
                _weighted_sums(block.weights, block.components) if block.components is not None
                else [s.reward for s in block.scores or ()] for block in self._blocks))
        return self._rewards

    @property
    def components(self) -> dict[str, list[float | None]]:
        """Each component's values by name (None where it failed or abstained)."""
        if self._components is None:
            parts: list[Sequence[Sequence[float | None]]] = []
            for block in self._blocks:
                if block.components is not None:
                    parts.append(block.components)
                else:
                    scores = block.scores or []
                    parts.append([[s.components.get(name) for s in scores]
                                  for name in self.names])
            self._components = {
                name: list(itertools.chain.from_iterable(part[k] for part in parts))
                for k, name in enumerate(self.names)}
        return self._components

    @property
    def statuses(self) -> list[Status]:
        out: list[Status] = []
        for block in self._blocks:
            if block.scores is None:
                out.extend([Status.OK] * len(block.rollouts))
            else:
                out.extend(s.status for s in block.scores)
        return out

    def scores(self) -> list[Score]:
        """One ``Score`` per rollout, in order (built once, then the same list)."""
        if self._scores is None:
            self._scores = list(itertools.chain.from_iterable(
                block.scores if block.scores is not None else self._build(block)
                for block in self._blocks))
        return self._scores

    def _build(self, block: _Block) -> list[Score]:
        ok = Status.OK
        rollouts, columns, weights = block.rollouts, block.components, block.weights
        assert columns is not None
        if len(columns) == 2:  # the common shape, spelled out: it runs once per rollout
            (n1, n2), (w1, w2), (c1, c2) = self.names, weights, columns
            return [Score(r.id, r.group, w1 * a + w2 * b, ok, {n1: a, n2: b}, {}, {}, None)
                    for r, a, b in zip(rollouts, c1, c2)]
        names = self.names
        return [Score(r.id, r.group, total, ok, dict(zip(names, row)), {}, {}, None)
                for r, total, row in zip(rollouts, _weighted_sums(weights, columns),
                                         zip(*columns))]

    def _all_rollouts(self) -> list[Rollout]:
        return list(itertools.chain.from_iterable(block.rollouts for block in self._blocks))


def _weighted_sums(weights: tuple[float, ...], columns: list[list[float]]) -> list[float]:
    """Each row's weighted sum, equal to the last bit to ``Rubric.combine``'s ``math.fsum``
    on plain values (a sum of two floats is correctly rounded either way)."""
    if len(columns) == 2:
        (w1, w2), (c1, c2) = weights, columns
        return [w1 * a + w2 * b for a, b in zip(c1, c2)]
    if len(columns) == 1:
        w1 = weights[0]
        return [w1 * a for a in columns[0]]
    fsum = math.fsum
    return [fsum([w * v for w, v in zip(weights, row)]) for row in zip(*columns)]
