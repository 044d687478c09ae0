"""Component results: found by component identity and rollout content key, kept once (the
first result stored for a key stays), in the tables or, while a run is deferred, in blocks."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rewardsmith._system.gcpause import gc_paused
from rewardsmith.store._blocks import (
    block_keys,
    cells_of_block,
    pack_results,
    split_times,
)
from rewardsmith.store._deferred import DeferredRun
from rewardsmith.store._pending import PendingBlocks
from rewardsmith.store._schema import (
    _CHUNK,
    _CODE_OF,
    _INSERT_RESULT,
    _PENDING_IN_MEMORY,
    _REUSABLE,
    Members,
    StoredCell,
    _as_result,
    _cell,
)
from rewardsmith.types import (
    ComponentResult,
)

__all__ = ["StoredResults"]


class StoredResults(PendingBlocks):
    """The store as the engine's ``ResultCache``: ``lookup`` and ``record``."""

    def lookup(self, component_id: str, keys: Sequence[str]) -> dict[str, ComponentResult]:
        """Stored results of ``component_id`` for whichever of ``keys`` have one."""
        return {key: _as_result(cell) for key, cell in self.lookup_cells(component_id, keys).items()}

    def lookup_cells(self, component_id: str, keys: Sequence[str]) -> dict[str, StoredCell]:
        """Like ``lookup``, with ok results without metrics as bare floats (for bulk work)."""
        found: dict[str, StoredCell] = {}
        deferred = self.deferred
        if deferred is not None and deferred.nothing_stored:
            return found
        unique = list(dict.fromkeys(keys))
        with self._guard("lookup"):
            component = self._component(component_id, create=False)
            if component is None:
                return found
            # The rollouts of a run begun here have known, mostly consecutive numbers: their
            # results are read by number, in one range when they are dense (no key lookups).
            cached = self._item_ids
            numbered = {cached[key]: key for key in unique if key in cached}
            if numbered:
                self._lookup_numbered(component, numbered, found)
                if len(numbered) < len(unique):
                    unique = [key for key in unique if key not in cached]
                else:
                    unique = []
            for start in range(0, len(unique), _CHUNK):
                chunk = unique[start:start + _CHUNK]
                rows = self._db.execute(
                    # CROSS JOIN keeps this order: find the keys, then probe their results
                    # (left to itself, SQLite may scan every result of the component).
                    "SELECT i.key, r.value, r.status, r.error, r.metrics FROM store_items i "
                    "CROSS JOIN store_results r ON r.component = ? AND r.item = i.id "
                    f"WHERE i.key IN ({','.join('?' * len(chunk))})", (component, *chunk))
                for key, value, code, error, metrics in rows:
                    found[key] = _cell(value, code, error, metrics)
            pending = self._pending_cells(component)
            if pending:
                for key in unique:
                    if key not in found:
                        cell = pending.get(key)
                        if cell is not None:
                            found[key] = cell
        return found

    def _pending_cells(self, component: int) -> dict[str, StoredCell]:
        """Results of ``component`` held in pending blocks (not this store's own deferred
        run's), by key, read once per component; the first recorded for a key wins, as in
        the indexed table."""
        if self._pending_index is None:
            self._pending_index = {}
            if self._has_pending():
                cells = self._db.execute("SELECT coalesce(sum(length(vals)), 0) / 8 FROM "
                                         "store_pending_results").fetchone()[0]
                if cells > _PENDING_IN_MEMORY and not self.read_only:
                    self._settle()  # too many to hold: spread them into the tables once
            else:
                self._pending_index = {}
                self._no_pending = True
        if self._no_pending:
            return {}
        known = self._pending_index.get(component)
        if known is None:
            known = self._pending_index[component] = {}
            rows = self._db.execute(
                "SELECT p.run, p.keys, p.vals, p.extra FROM store_pending_results p "
                "LEFT JOIN store_runs r ON r.id = p.run WHERE p.component = ? AND p.run != ? "
                "ORDER BY r.created, p.run, p.seq", (component, self._deferred_id())
            ).fetchall()
            run_keys: dict[str, list[str] | None] = {}
            with gc_paused():
                for run, keys_text, vals, extra in rows:
                    if keys_text.startswith("@") and run not in run_keys:
                        run_keys[run] = self._keys_of_run(self._db, run)
                    keys = block_keys(keys_text, run_keys.get(run))
                    if keys is None:
                        continue  # its run's rollouts are not recorded (yet): no key known
                    block = cells_of_block(keys, vals, extra)
                    if known:
                        for key, cell in block.items():
                            known.setdefault(key, cell)
                    else:
                        known.update(block)
        return known

    def _lookup_numbered(self, component: int, numbered: Mapping[int, str],
                         found: dict[str, StoredCell]) -> None:
        low, high = min(numbered), max(numbered)
        select = "SELECT item, value, status, error, metrics FROM store_results WHERE component = ?"
        if high - low < 4 * len(numbered) + 1024:
            batches: Iterator[Any] = iter([self._db.execute(
                f"{select} AND item BETWEEN ? AND ?", (component, low, high))])
        else:
            items = list(numbered)
            batches = (self._db.execute(
                f"{select} AND item IN ({','.join('?' * len(chunk))})", (component, *chunk))
                for chunk in (items[i:i + _CHUNK] for i in range(0, len(items), _CHUNK)))
        for rows in batches:
            for item, value, code, error, metrics in rows:
                key = numbered.get(item)
                if key is not None:
                    found[key] = _cell(value, code, error, metrics)

    def record_cells(self, component_id: str, keys: Sequence[str],
                     cells: Sequence[StoredCell], *, items: Sequence[int] | None = None,
                     seconds: Sequence[float] | None = None) -> None:
        """Like ``record``, from parallel lists of keys and cells (a bare float is an ok
        result without metrics): the bulk path, with no object made per result. ``items``,
        the keys' item numbers when the caller knows them, saves looking them up;
        ``seconds``, each call's time, is kept beside the result. While a run is deferred
        (``begin_run(defer=True)``) the batch is kept as one pending block."""
        now = time.time()
        cells, seconds = split_times(cells, seconds)
        with self._lock:
            deferred = self.deferred
            if deferred is not None:
                self._record_block(deferred, component_id, keys, cells, seconds)
                return
        rows: list[tuple[int, float | None, int, str | None, str | None]] = []
        for position, cell in enumerate(cells):
            if type(cell) is float:
                rows.append((position, cell, 0, None, None))
            elif isinstance(cell, ComponentResult) and cell.status in _REUSABLE:
                rows.append((position, cell.value, _CODE_OF[cell.status], cell.error,
                             json.dumps(cell.metrics) if cell.metrics else None))
        if not rows:
            return
        with self._guard("record"), self._write():
            component = self._component(component_id, create=True)
            if items is None:
                known = self._items([keys[row[0]] for row in rows])
                numbers = [known[keys[row[0]]] for row in rows]
            else:
                numbers = [items[row[0]] for row in rows]
            self._db.executemany(
                _INSERT_RESULT,
                [(component, number, value, code, error, metrics, now,
                  None if seconds is None else seconds[row[0]])
                 for number, row in zip(numbers, rows)
                 for _, value, code, error, metrics in (row,)])

    def _record_block(self, deferred: DeferredRun, component_id: str,
                      keys: Sequence[str] | Sequence[int], cells: Sequence[StoredCell],
                      seconds: Sequence[float] | None) -> None:
        """A batch of the deferred run's results as one pending block (by content key, or by
        position in that run)."""
        packed = pack_results(keys, cells, seconds)
        if packed is None:
            return
        with self._lock:
            self._pending_seq += 1
            self._queued.append((deferred.run_id, component_id, self._pending_seq, packed,
                                 time.time()))
            self._write_queued(wait=False)

    def record_block_for(self, deferred: DeferredRun, component_id: str,
                         positions: Sequence[int], cells: Sequence[StoredCell]) -> bool:
        """Keep results of ``deferred``'s rollouts by their positions in it, while it is the
        run deferred here; False (nothing kept) once it is not."""
        with self._lock:
            if self.deferred is not deferred:
                return False
            self._record_block(deferred, component_id, positions, *split_times(cells, None))
            return True

    def record(self, component_id: str, results: Mapping[str, ComponentResult]) -> None:
        """Keep ``ok`` and ``masked`` results (one transaction); others are not reused.

        The first result stored for a key stays: a component's identity and a rollout's
        content fix its value, and a judge's verdict, once paid for, is the one kept."""
        self._record(component_id, results, None)

    def _record(self, component_id: str, by_key: Mapping[str, ComponentResult] | None,
                by_item: Mapping[int, ComponentResult] | None) -> None:
        now = time.time()
        keyed = {k: r for k, r in (by_key or {}).items() if r.status in _REUSABLE}
        numbered = {i: r for i, r in (by_item or {}).items() if r.status in _REUSABLE}
        if not keyed and not numbered:
            return
        with self._guard("record"), self._write():
            component = self._component(component_id, create=True)
            if keyed:
                items = self._items(list(keyed))
                numbered.update((items[k], r) for k, r in keyed.items())
            self._db.executemany(
                _INSERT_RESULT,
                [(component, item, r.value, _CODE_OF[r.status], r.error,
                  json.dumps(r.metrics) if r.metrics else None, now, None)
                 for item, r in numbered.items()])

    def column(self, component_id: str, members: Members) -> list[StoredCell | None]:
        """A component's stored results for a run's rollouts, by position (None: not stored):
        the bulk path of a rescore, with no Python work per missing result."""
        column: list[StoredCell | None] = [None] * len(members)
        if len(members.items) != len(members.keys):  # a run still in pending blocks
            found = self.lookup_cells(component_id, members.keys)
            return [found.get(key) for key in members.keys]
        with self._guard("lookup"):
            component = self._component(component_id, create=False)
            if component is None or not members.items:
                return column
            stored = self._db.execute("SELECT count(*) FROM store_results WHERE component = ?",
                                      (component,)).fetchone()[0]
            if stored <= 4 * len(members):
                # Reading the component's results in order beats one index probe per rollout.
                rows = self._db.execute(
                    "SELECT item, value, status, error, metrics FROM store_results "
                    "WHERE component = ?", (component,))
                by_item = {item: value if code == 0 and error is None and metrics is None
                           and value is not None else _cell(value, code, error, metrics)
                           for item, value, code, error, metrics in rows}
                return list(map(by_item.get, members.items))
            rows = self._db.execute(
                "SELECT m.position, r.value, r.status, r.error, r.metrics FROM store_members m "
                "CROSS JOIN store_results r ON r.component = ? AND r.item = m.item "
                "WHERE m.run = ?",
                (component, members.run))
            for position, value, code, error, metrics in rows:
                column[position] = _cell(value, code, error, metrics)
        return column
