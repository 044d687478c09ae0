"""A run being recorded: the object the engine's result cache and the run recorder hold.

A score run's rollouts are written beside the scoring, and its results are kept as pending
blocks until it ends (fast to write; see ``_blocks``). What that needs to know (which run,
whether the store held any result to look up, where each rollout sits in the run, the thread
that writes the rollouts) is one ``DeferredRun``, held by the ``Store`` that records it. The
callers hold a ``RecordingRun``: the run's handle, which answers look-ups and keeps results
for it, and finishes or ends it.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ..types import ComponentResult, Rollout

if TYPE_CHECKING:
    from ._model import Store, StoredCell

__all__ = ["DeferredRun", "RecordingRun"]


@dataclass(eq=False)
class DeferredRun:
    """The run whose results a store keeps as pending blocks until it ends."""

    run_id: str
    # The store held no result when the run began: nothing can be found by a look-up.
    nothing_stored: bool = False
    # A run recorded in the background: id() of each rollout -> its position in the run, and
    # the rollouts in order (its results are kept by position: no content key needed).
    positions: dict[int, int] = field(default_factory=dict)
    rollouts: Sequence[Rollout] = ()
    writer: threading.Thread | None = None  # writes the rollouts beside the scoring
    scored: threading.Event = field(default_factory=threading.Event)  # the writer may start
    error: BaseException | None = None  # what stopped the writer, raised where next used


class RecordingRun:
    """A run of a store while it is recorded: the engine's ``ResultCache`` for that run, and
    what a ``RunRecorder`` keeps results through. ``deferred`` is None for a run whose
    results go straight into the indexed tables."""

    def __init__(self, store: Store, run_id: str, deferred: DeferredRun | None = None):
        self.store = store
        self.run_id = run_id
        self._deferred = deferred

    # The ResultCache protocol: the store answers for every run, this one included.
    def lookup(self, component_id: str, keys: Sequence[str]) -> dict[str, ComponentResult]:
        return self.store.lookup(component_id, keys)

    def lookup_cells(self, component_id: str, keys: Sequence[str]) -> dict[str, StoredCell]:
        return self.store.lookup_cells(component_id, keys)

    def record(self, component_id: str, results: Mapping[str, ComponentResult]) -> None:
        self.store.record(component_id, results)

    def record_cells(self, component_id: str, keys: Sequence[str],
                     cells: Sequence[StoredCell], **kwargs: Any) -> None:
        self.store.record_cells(component_id, keys, cells, **kwargs)

    def holds_nothing(self) -> bool:
        """True while the run is recorded in the background into a store that held no other
        result: nothing can be found, so callers skip look-ups (and content keys) and keep
        results by rollout (``record_rollout_cells``)."""
        deferred = self._deferred
        return (deferred is not None and deferred.nothing_stored and bool(deferred.positions)
                and self.store.deferred is deferred)

    def record_rollout_cells(self, component_id: str, rollouts: Sequence[Rollout],
                             cells: Sequence[StoredCell]) -> None:
        """Like ``record_cells``, by rollout: this run's own rollouts are kept by their
        positions in it (readers find the keys in its rollouts); others by content key."""
        deferred = self._deferred
        if deferred is not None and deferred.positions:
            found = positions_in_run(rollouts, deferred.positions, deferred.rollouts)
            if found is not None and self.store.record_block_for(deferred, component_id,
                                                                 found, cells):
                return
        self.store.record_cells(component_id, [r.content_key() for r in rollouts], cells)

    def scoring_done(self) -> None:
        """Every rollout is scored: the run's rollouts may be written now, if their writer
        was waiting for that."""
        if self._deferred is not None:
            self._deferred.scored.set()

    def finish(self, summary: Mapping[str, Any] | None = None) -> None:
        """Mark the run done with its summary (see ``Store.finish_run``)."""
        self.store.finish_run(self.run_id, summary)

    def end(self, status: str) -> None:
        """Mark the run ``interrupted`` or ``failed`` (see ``Store.end_run``)."""
        self.store.end_run(self.run_id, status)


def positions_in_run(rollouts: Sequence[Rollout], positions: Mapping[int, int],
                     run: Sequence[Rollout]) -> Sequence[int] | None:
    """The positions of ``rollouts`` in ``run`` (``positions``: id() -> position), or None
    when one is not in it. A batch is usually a stretch of the run: found from its first
    rollout and checked by identity, instead of one look-up per rollout in a dict too large
    for the processor's cache."""
    if rollouts:
        first = positions.get(id(rollouts[0]))
        if first is not None:
            stretch = run[first:first + len(rollouts)]
            if len(stretch) == len(rollouts) and all(map(operator.is_, rollouts, stretch)):
                return range(first, first + len(rollouts))
    found = list(map(positions.get, map(id, rollouts)))
    return None if None in found else cast("list[int]", found)
