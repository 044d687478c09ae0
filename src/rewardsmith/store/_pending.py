"""Pending blocks: a run's rollouts and results as written in bulk, read as they are, and
settled into the indexed tables when there are too many of them (see ``_blocks``)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from rewardsmith._system.gcpause import gc_paused
from rewardsmith.store._base import StoreConnection
from rewardsmith.store._blocks import (
    NO_KEYS,
    block_keys,
    columns_of_block,
    keys_of_columns,
    unpack_results,
)
from rewardsmith.store._schema import (
    _INSERT_RESULT,
    _MIGRATIONS,
    _SCHEMA,
    SCHEMA_VERSION,
)
from rewardsmith.store.sqlite_setup import (
    connect,
    ensure_schema,
    read_only_reason,
)

__all__ = ["PendingBlocks"]


class PendingBlocks(StoreConnection):
    """What a store knows of its pending blocks, and how it settles them."""

    def _holds_no_results(self, *, besides: str) -> bool:
        """No result stored, in the tables or pending, other than run ``besides``'s."""
        return bool(self._db.execute(
            "SELECT NOT EXISTS (SELECT 1 FROM store_results) AND NOT EXISTS "
            "(SELECT 1 FROM store_pending_results WHERE run != ?)", (besides,)).fetchone()[0])

    def _has_pending(self, run: str | None = None) -> bool:
        if self.schema < 3 and self.read_only:
            return False  # an older file opened read-only: it has no pending tables
        where, args = ("WHERE run = ?", (run,)) if run is not None else ("", ())
        query = (f"SELECT EXISTS (SELECT 1 FROM store_pending_rollouts {where}) OR "
                 f"EXISTS (SELECT 1 FROM store_pending_results {where})")
        with self._guard("reading the store"):
            return bool(self._db.execute(query, args * 2).fetchone()[0])

    def _pending_rollouts(self, run: str, *, wait: bool = True
                          ) -> list[tuple[int, str, str, str, str | bytes]]:
        """The pending blocks of ``run``'s rollouts, in order (empty when it has none)."""
        if wait:
            self._wait_begun()
        if self.schema < 3 and self.read_only:
            return []
        with self._guard("reading the run"):
            return self._db.execute(
                "SELECT start, ids, groups, keys, contents FROM store_pending_rollouts "
                "WHERE run = ? ORDER BY start", (run,)).fetchall()

    def _settle(self) -> None:
        """Spread every pending block (except those of the run being deferred here) into the
        indexed tables, oldest run first: for a store whose pending results are too many to
        read into memory. A store opened read-only settles through a second, writable
        connection when the file allows it (settling changes no result)."""
        if not self._has_pending():
            return
        if not self.read_only:
            self._settle_with(self._db)
            return
        if read_only_reason(self.path) is not None:
            return  # the file cannot be written: read the blocks as they are
        writable = connect(self.path, what="store", timeout=60.0)
        saved, self._db = self._db, writable
        try:
            ensure_schema(writable, what="store", path=self.path, prefix="store",
                          script=_SCHEMA, version=SCHEMA_VERSION, migrations=_MIGRATIONS)
            self.read_only = False
            self._settle_with(writable)
        finally:
            self.read_only = True
            self._db = saved
            writable.close()
            self._item_ids.clear()

    def _settle_with(self, db: sqlite3.Connection) -> None:
        skip = self._deferred_id()
        with self._guard("settling recorded runs"), self._write(), gc_paused():
            rollout_blocks = db.execute(
                "SELECT p.run, p.start, p.ids, p.groups, p.keys, p.contents "
                "FROM store_pending_rollouts p LEFT JOIN store_runs r ON r.id = p.run "
                "WHERE p.run != ? ORDER BY r.created, p.run, p.start", (skip,)).fetchall()
            for run, start, ids, groups, keys, contents in rollout_blocks:
                # JSON read back encodes to the text it was read from (or, for a block kept
                # as fields, to the text the rollout itself makes): the same content key.
                content_list, key_list = keys_of_columns(columns_of_block(contents),
                                                         keys=None if keys == NO_KEYS else keys)
                items = self._items(key_list, content_list)
                db.executemany(
                    "INSERT OR IGNORE INTO store_members VALUES (?, ?, ?, ?, ?)",
                    ((run, start + offset, rollout_id, group, items[key])
                     for offset, (rollout_id, group, key) in enumerate(
                         zip(json.loads(ids), json.loads(groups), key_list, strict=True))))
                db.execute("DELETE FROM store_pending_rollouts WHERE run = ? AND start = ?",
                           (run, start))
            result_blocks = db.execute(
                "SELECT p.run, p.component, p.seq, p.keys, p.vals, p.extra, p.seconds, "
                "p.recorded FROM store_pending_results p LEFT JOIN store_runs r ON r.id = p.run "
                "WHERE p.run != ? ORDER BY r.created, p.run, p.seq", (skip,)).fetchall()
            run_keys: dict[str, list[str] | None] = {}
            for run, component, seq, keys_text, vals, extra, seconds, recorded in result_blocks:
                if keys_text.startswith("@") and run not in run_keys:
                    run_keys[run] = self._keys_of_run(db, run)
                keys = block_keys(keys_text, run_keys.get(run))
                if keys is None:
                    continue  # its run's rollouts are not recorded yet: it stays pending
                rows = unpack_results(keys, vals, extra, seconds)
                numbers = self._items([row[0] for row in rows])
                db.executemany(_INSERT_RESULT, [
                    (component, numbers[key], value, code, error, metrics, recorded, took)
                    for key, value, code, error, metrics, took in rows])
                db.execute("DELETE FROM store_pending_results WHERE run = ? AND component = ? "
                           "AND seq = ?", (run, component, seq))

    def _keys_of_run(self, db: sqlite3.Connection, run: str) -> list[str] | None:
        """The content keys of ``run``'s rollouts in order, from its pending blocks or its
        settled members; None when they are not recorded (yet)."""
        blocks = db.execute("SELECT start, keys FROM store_pending_rollouts WHERE run = ? "
                            "ORDER BY start", (run,)).fetchall()
        if blocks:
            keys: list[str] = []
            made: list[tuple[int, list[str]]] = []
            for start, text in blocks:
                if start != len(keys):
                    return None
                if text == NO_KEYS:  # kept as fields: the keys are made from them, once
                    contents = db.execute("SELECT contents FROM store_pending_rollouts WHERE "
                                          "run = ? AND start = ?", (run, start)).fetchone()[0]
                    with gc_paused():
                        made.append((start, keys_of_columns(columns_of_block(contents))[1]))
                    keys.extend(made[-1][1])
                else:
                    keys.extend(json.loads(text))
            if made and db is self._db:
                self._keep_keys(run, made)
            return keys
        rows = db.execute("SELECT m.position, i.key FROM store_members m JOIN store_items i "
                          "ON i.id = m.item WHERE m.run = ? ORDER BY m.position",
                          (run,)).fetchall()
        if not rows or rows[-1][0] != len(rows) - 1:
            return None
        return [key for _, key in rows]

    def _keep_keys(self, run: str, made: Sequence[tuple[int, list[str]]]) -> None:
        """Keep the content keys made for blocks of ``run`` kept as fields, so that no later
        reader makes them again: when this store can write, at once. It only saves later work:
        a file busy with another writer, or one that refuses the write, is left as it is (the
        keys are made again next time), and the read that made them goes on."""
        with self._lock:
            if self.read_only or self._db.in_transaction:
                return
            self._db.execute("PRAGMA busy_timeout = 0")
            try:
                with self._write():
                    self._db.executemany(
                        "UPDATE store_pending_rollouts SET keys = ? WHERE run = ? AND start = ? "
                        "AND keys = ?",
                        [(json.dumps(keys), run, start, NO_KEYS) for start, keys in made])
            except sqlite3.Error:
                pass
            finally:
                self._db.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
