"""The result cache: component results kept between runs (see ``rewardsmith.store``), filled
into a batch's columns before anything runs, and recorded after."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, cast, runtime_checkable

from rewardsmith.files.digests import FileDigests
from rewardsmith.rubric import Component

from ..types import ComponentResult, Rollout, Status
from .cells import Cell, as_result

__all__ = ["CellCache", "HoldingCache", "ResultCache", "look_up", "record"]

# Per component, the keys its results go under (None for all: none made, see ``HoldingCache``;
# a component that reads files keeps its own even then), and the cells it must compute.
Cached = tuple[dict[str, list[str]] | None, dict[str, list[int]]]


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
    every = list(range(len(rollouts)))
    if isinstance(cache, HoldingCache) and cache.holds_nothing():
        reading = [c for c in components if not c.group and c.reads is not None]
        keyed = None
        if reading:  # kept by key, not by rollout: the key holds the files' digest
            plain = _content_keys(rollouts, content_key)
            digests = FileDigests()
            keyed = {c.name: c.result_keys(rollouts, plain, digests) for c in reading}
        return keyed, {c.name: every for c in components if not c.group}
    plain = _content_keys(rollouts, content_key)
    digests = FileDigests()
    keys: dict[str, list[str]] = {}
    cells = cache if isinstance(cache, CellCache) else None
    missing: dict[str, list[int]] = {}
    for component in components:
        if component.group:
            continue  # a group reward's value depends on the whole group: never reused alone
        own = plain if component.reads is None else \
            component.result_keys(rollouts, plain, digests)
        keys[component.name] = own
        found: Mapping[str, float | ComponentResult] = (
            cells.lookup_cells(component.identity(), own) if cells is not None
            else cache.lookup(component.identity(), own))
        column = results[component.name]
        if found:
            for index, key in enumerate(own):
                hit = found.get(key)
                if hit is None:
                    continue
                if type(hit) is not float:
                    result = cast(ComponentResult, hit)
                    # A plain ok result becomes a bare float, as if just computed, so the
                    # batch keeps the fast path.
                    plain_ok = (result.status is Status.OK and not result.metrics
                                and type(result.value) is float)
                    hit = cast(float, result.value) if plain_ok else result
                column[index] = hit
            missing[component.name] = [i for i, cell in enumerate(column) if cell is None]
        else:
            missing[component.name] = every
    return keys, missing


def _content_keys(rollouts: Sequence[Rollout],
                  content_key: Callable[[Rollout], str] | None) -> list[str]:
    return ([r.content_key() for r in rollouts] if content_key is None
            else [content_key(r) for r in rollouts])


def record(cache: ResultCache, components: Sequence[Component], cached: Cached,
           results: dict[str, list[Cell]], rollouts: Sequence[Rollout]) -> None:
    """Store the results computed in this batch (not those that came from the cache)."""
    keyed, missing = cached
    if isinstance(cache, HoldingCache) and (keyed is None or any(
            c.name not in keyed for c in components if c.name in missing)):
        # No keys made (see HoldingCache): handed over by rollout, but for components that
        # read files, whose keys were made.
        holder = cast(HoldingCache, cache)
        for component in components:
            column = results[component.name]
            if component.name not in missing:
                continue  # a group reward: its values are the group's, never reused alone
            if keyed is not None and component.name in keyed:
                _record_keyed(cache, component, keyed[component.name],
                              missing[component.name], column)
                continue
            if None not in column:  # every cell computed: the batch as it is
                holder.record_rollout_cells(component.identity(), rollouts, column)
                continue
            computed = [i for i in missing[component.name] if column[i] is not None]
            if computed:
                holder.record_rollout_cells(component.identity(),
                                            [rollouts[i] for i in computed],
                                            [column[i] for i in computed])
        return
    assert keyed is not None
    for component in components:
        indices = missing.get(component.name)
        if indices and component.name in keyed:
            _record_keyed(cache, component, keyed[component.name], indices,
                          results[component.name])


def _record_keyed(cache: ResultCache, component: Component, keys: Sequence[str],
                  indices: Sequence[int], column: Sequence[Cell]) -> None:
    if isinstance(cache, CellCache):  # the store keeps what it may reuse
        wanted = [(keys[i], column[i]) for i in indices if column[i] is not None]
        if wanted:
            cache.record_cells(component.identity(), [k for k, _ in wanted],
                               [c for _, c in wanted])
        return
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
