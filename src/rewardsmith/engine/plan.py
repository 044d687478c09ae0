"""Planning: rollouts into batches of whole groups, and the per-call limits of a batch."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from rewardsmith.rubric import Component

from ..types import Rollout
from .cells import Cell, as_tuple

__all__ = ["Batch", "CallPlan", "ColumnLimits", "batches_of", "column_plan",
           "contiguous_sizes", "missing_block", "plan_calls", "slices", "split"]


class Batch(NamedTuple):
    """Rollouts of whole groups, one after another, and the size of each group."""

    rollouts: list[Rollout]
    sizes: list[int]

    @classmethod
    def of(cls, groups: Iterable[Sequence[Rollout]]) -> Batch:
        listed = [list(group) for group in groups]
        return cls([r for group in listed for r in group], [len(group) for group in listed])


def contiguous_sizes(items: list[Rollout]) -> list[int] | None:
    """The size of each group when each group's rollouts sit together; None otherwise."""
    if not items:
        return []
    keys = list(map(operator.attrgetter("group"), items))
    # Where the group changes, found at C speed (no Python code runs per rollout).
    starts = [0, *itertools.compress(range(1, len(keys)), map(operator.ne, keys[1:], keys))]
    if len(starts) != len(set(keys)):
        return None  # some group comes back after another one
    return list(map(operator.sub, [*starts[1:], len(keys)], starts))


def split(items: list[Any], sizes: list[int]) -> list[list[Any]]:
    out = []
    start = 0
    for size in sizes:
        out.append(items[start : start + size])
        start += size
    return out


class ColumnLimits(Sequence[float]):
    """The time limit of call ``k * rows + row``: reward ``k``'s, without a list per call."""

    def __init__(self, limits: list[float], rows: int):
        self._limits = limits
        self._rows = rows

    def __len__(self) -> int:
        return len(self._limits) * self._rows

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._limits[index // self._rows]


def missing_block(columns: list[list[Cell]]) -> tuple[int, int] | None:
    """``(k0, k1)`` when columns k0..k1-1 are empty and every other one is full; else None."""
    empty = [column.count(None) == len(column) for column in columns]
    if not columns or not any(empty):
        return None
    first = empty.index(True)
    end = first + 1
    while end < len(empty) and empty[end]:
        end += 1
    if any(empty[end:]) or any(column.count(None) for column in columns[:first] + columns[end:]):
        return None
    return first, end


def batches_of(groups: Iterable[Sequence[Rollout]], batch_rollouts: int) -> Iterator[Batch]:
    """Whole groups, about ``batch_rollouts`` rollouts at a time (for groups that arrive one by
    one, whose total is not known)."""
    rollouts: list[Rollout] = []
    sizes: list[int] = []
    for group in groups:
        rollouts.extend(group)
        sizes.append(len(group))
        if len(rollouts) >= batch_rollouts:
            yield Batch(rollouts, sizes)
            rollouts, sizes = [], []
    if sizes:
        yield Batch(rollouts, sizes)


def slices(items: list[Rollout], sizes: list[int] | None, *, batch_rollouts: int,
           workers: int) -> Iterator[Batch]:
    """Batches of ``items`` (all in memory) that shrink towards the end, so that every worker
    finishes at about the same time: whole groups when ``sizes`` (each group's, in order) is
    given, any slice when no reward looks at a group as a whole."""

    def limit(remaining: int) -> int:
        # A share of what is left per worker (guided scheduling), never below a few groups,
        # and never so large that a small input leaves a worker idle (40 slow calls on 2
        # workers are 2 batches, not 1).
        share = remaining // (2 * max(1, workers))
        floor = min(batch_rollouts, 64, -(-remaining // max(1, workers)))
        return max(1, floor, min(batch_rollouts, share))

    if sizes is None:
        start = 0
        while start < len(items):
            end = min(len(items), start + limit(len(items) - start))
            yield Batch(items[start:end], [end - start])
            start = end
        return
    start = end = 0
    batch_sizes: list[int] = []
    for size in sizes:
        end += size
        batch_sizes.append(size)
        if end - start >= limit(len(items) - start):
            yield Batch(items[start:end], batch_sizes)
            start, batch_sizes = end, []
    if batch_sizes:
        yield Batch(items[start:end], batch_sizes)


class CallPlan(NamedTuple):
    """The calls of one batch for one program, with each call's limits.

    Items are numbered as the programs read them: ``k * rows + row`` is single reward ``k`` on
    a row; ``(k, tuples)`` is group reward ``k`` on a group (the last ``len(group_targets)``
    items, each filling the column named in its target over the rows in its span).
    """

    items: Sequence[Any]
    limits: Sequence[float]
    memory: Sequence[float]
    group_targets: list[tuple[str, list[int]]]


def plan_calls(batch: Batch, singles: Sequence[Component], groups: Sequence[Component],
               columns: list[list[Cell]], limit_of: Callable[[Component], float],
               memory_of: Callable[[Component], float]) -> CallPlan:
    """Every call still missing in ``columns`` (one per single reward), then one call per
    group reward and group."""
    rollouts = batch.rollouts
    size = len(rollouts)
    items: list[Any] = []
    limits: list[float] = []
    memory: list[float] = []
    for k, component in enumerate(singles):
        limit, held = limit_of(component), memory_of(component)
        missing = [k * size + row for row, cell in enumerate(columns[k]) if cell is None]
        items.extend(missing)
        limits.extend([limit] * len(missing))
        memory.extend([held] * len(missing))
    group_targets: list[tuple[str, list[int]]] = []
    start = 0
    for group_size in batch.sizes:
        span = list(range(start, start + group_size))
        start += group_size
        for k, component in enumerate(groups):
            items.append((k, [as_tuple(rollouts[i]) for i in span]))
            limits.append(limit_of(component))
            memory.append(memory_of(component))
            group_targets.append((component.name, span))
    return CallPlan(items, limits, memory, group_targets)


def column_plan(size: int, block: tuple[int, int], limits_of: list[float],
                memory_of: list[float]) -> CallPlan:
    """Every call of single rewards ``block[0]`` to ``block[1] - 1``, as a range that workers
    run one reward at a time, with limits computed from the position."""
    first, end = block
    return CallPlan(range(first * size, end * size), ColumnLimits(limits_of[first:end], size),
                    ColumnLimits(memory_of[first:end], size), [])
