"""The result cache: component results kept between runs (see ``rewardsmith.store``), filled
into a batch's columns before anything runs, and recorded after."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, cast, runtime_checkable

from rewardsmith.rubric import Component

from ..types import ComponentResult, Rollout, Status
from .cells import Cell, as_result

__all__ = ["CellCache", "HoldingCache", "ResultCache", "look_up", "record"]

# Content keys (None: not made, see ``HoldingCache``); per component, the cells computed.
Cached = tuple[list[str] | None, dict[str, list[int]]]


class ResultCache(Protocol):
    """Where component results are kept between runs (see ``rewardsmith.store``)."""

    def lookup(self, component_id: str, keys: Sequence[str]) -> dict[str, ComponentResult]: ...

    def record(self, component_id: str, results: Mapping[str, ComponentResult]) -> None: ...


@runtime_checkable
class CellCache(Protocol):
    """A cache that also reads and writes cells: plain ok results as bare floats, with no
    object made per result (the store offers this)."""

    def lookup_cells(self, component_id: str, keys: Sequence[str]
                     ) -> Mapping[str, float | ComponentResult]: ...

    def record_cells(self, component_id: str, keys: Sequence[str],
                     cells: Sequence[Cell]) -> None: ...


@runtime_checkable
class HoldingCache(Protocol):
    """A cache that can say it holds nothing yet (a fresh store recording a run in the
    background): then no content key is made for a look-up, and results are handed over by
    rollout (the store names them by their position in the run it records)."""

    def holds_nothing(self) -> bool: ...

    def record_rollout_cells(self, component_id: str, rollouts: Sequence[Rollout],
                             cells: Sequence[Cell]) -> None: ...


def look_up(cache: ResultCache, components: Sequence[Component], rollouts: list[Rollout],
            results: dict[str, list[Cell]],
            content_key: Callable[[Rollout], str] | None) -> Cached:
    """Fill cells from the cache; return the keys and, per component, the cells to compute."""
    if isinstance(cache, HoldingCache) and cache.holds_nothing():
        every = list(range(len(rollouts)))
        return None, {c.name: every for c in components if not c.group}
    keys = ([r.content_key() for r in rollouts] if content_key is None
            else [content_key(r) for r in rollouts])
    cells = cache if isinstance(cache, CellCache) else None
    missing: dict[str, list[int]] = {}
    for component in components:
        if component.group:
            continue  # a group reward's value depends on the whole group: never reused alone
        found: Mapping[str, float | ComponentResult] = (
            cells.lookup_cells(component.identity(), keys) if cells is not None
            else cache.lookup(component.identity(), keys))
        column = results[component.name]
        if found:
            for index, key in enumerate(keys):
                hit = found.get(key)
                if hit is None:
                    continue
                if type(hit) is not float:
                    result = cast(ComponentResult, hit)
                    # A plain ok result becomes a bare float, as if just computed, so the
                    # batch keeps the fast path.
                    plain = (result.status is Status.OK and not result.metrics
                             and type(result.value) is float)
                    hit = cast(float, result.value) if plain else result
                column[index] = hit
            missing[component.name] = [i for i, cell in enumerate(column) if cell is None]
        else:
            missing[component.name] = list(range(len(rollouts)))
    return keys, missing


def record(cache: ResultCache, components: Sequence[Component], cached: Cached,
           results: dict[str, list[Cell]], rollouts: Sequence[Rollout]) -> None:
    """Store the results computed in this batch (not those that came from the cache)."""
    keys, missing = cached
    if keys is None:  # no keys made (see HoldingCache): handed over by rollout
        holder = cast(HoldingCache, cache)
        for component in components:
            column = results[component.name]
            if component.name not in missing:
                continue  # a group reward: its values are the group's, never reused alone
            if None not in column:  # every cell computed: the batch as it is
                holder.record_rollout_cells(component.identity(), rollouts, column)
                continue
            computed = [i for i in missing[component.name] if column[i] is not None]
            if computed:
                holder.record_rollout_cells(component.identity(),
                                            [rollouts[i] for i in computed],
                                            [column[i] for i in computed])
        return
    cells = cache if isinstance(cache, CellCache) else None
    for component in components:
        indices = missing.get(component.name)
        if not indices:
            continue
        column = results[component.name]
        if cells is not None:  # the store keeps what it may reuse
            wanted = [(keys[i], column[i]) for i in indices if column[i] is not None]
            if wanted:
                cells.record_cells(component.identity(), [k for k, _ in wanted],
                                   [c for _, c in wanted])
            continue
        fresh = {}
        for index in indices:
            cell = column[index]
            if cell is None:
                continue
            if type(cell) is float or cast(ComponentResult, cell).status in (
                    Status.OK, Status.MASKED):
                fresh[keys[index]] = as_result(cell)
        if fresh:
            cache.record(component.identity(), fresh)
