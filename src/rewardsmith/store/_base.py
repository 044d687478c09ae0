"""The store's connection to its file: opening it, its lock, transactions, the numbers it
gives components and rollouts, and the writes it queues while a run records in the background.
``Store`` is built on this in layers: ``_pending`` (blocks not yet in the tables),
``_results`` (look-ups and records), ``_model`` (runs and rollouts)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from rewardsmith.errors import StoreError
from rewardsmith.store._blocks import (
    PackedResults,
    storable_json,
)
from rewardsmith.store._deferred import DeferredRun
from rewardsmith.store._schema import (
    _CHUNK,
    _MIGRATIONS,
    _SCHEMA,
    DEFAULT_STORE_PATH,
    SCHEMA_VERSION,
    StoredCell,
    StoreFileChanged,
    _file_identity,
)
from rewardsmith.store.sqlite_setup import (
    connect,
    ensure_schema,
    is_busy_error,
    is_read_only_error,
    read_only_reason,
)
from rewardsmith.store.status_codes import (
    STATUS_ENCODING_VERSION,
)

__all__ = ["StoreConnection"]


class StoreConnection:
    """One SQLite connection to a store's file, with its lock and numbering caches."""

    def __init__(self, path: str | Path = DEFAULT_STORE_PATH, *, timeout: float = 60.0,
                 read_only: bool | None = None):
        """``read_only``: True opens for reading only (the file must exist); None (default)
        opens read-only when the file cannot be written, read-write otherwise."""
        self.path = str(path)
        self._lock = threading.RLock()
        self._component_ids: dict[str, int] = {}  # identity -> number (numbers never change)
        self._item_ids: dict[str, int] = {}  # key -> number, for the runs begun here
        self._open_runs: set[str] = set()  # begun here, not finished yet
        # The run whose results go into pending blocks until it ends (one at a time).
        self.deferred: DeferredRun | None = None
        self._pending_seq = 0
        # Results in pending blocks, by component number and key: read once, when a look-up
        # first needs them (see _pending_cells).
        self._pending_index: dict[int, dict[str, StoredCell]] | None = None
        self._no_pending = False
        # Result blocks of the deferred run not written yet (see _write_queued).
        self._queued: list[tuple[str, str, int, PackedResults, float]] = []
        self._busy_ms = int(timeout * 1000)
        reason = read_only_reason(self.path)
        if read_only is None:
            read_only = reason is not None and Path(self.path).exists()
        self.read_only = read_only
        self._read_only_reason = reason or "opened for reading"
        if not read_only and reason is not None:
            raise StoreError(f"cannot create store {self.path!r}: it is read-only ({reason})")
        self._db = connect(self.path, what="store", timeout=timeout, read_only=read_only)
        try:
            self._setup()
        except BaseException:
            self._db.close()
            raise
        self._file = _file_identity(self.path)  # to notice the file deleted or replaced

    def check_file(self) -> None:
        """Raise ``StoreFileChanged`` when the store's file was deleted or replaced since it
        was opened: what was written through this store is then not in the file at its path."""
        now = _file_identity(self.path)
        if self._file is None or now == self._file:
            return
        what = "deleted" if now is None else "replaced by another file"
        raise StoreFileChanged(
            f"the store {self.path!r} was {what} while this run used it: the results recorded "
            f"in it are not in the file there now (the run's output is complete; score again "
            f"into a store to record it)")

    def _setup(self) -> None:
        with self._guard("open"):
            self.schema = ensure_schema(self._db, what="store", path=self.path, prefix="store",
                                        script=_SCHEMA, version=SCHEMA_VERSION,
                                        migrations=_MIGRATIONS, read_only=self.read_only)
            row = self._db.execute(
                "SELECT value FROM store_meta WHERE key = 'status_encoding'").fetchone()
            if row is None and not self.read_only:
                with self._write():
                    self._db.execute("INSERT OR IGNORE INTO store_meta VALUES "
                                     "('status_encoding', ?)", (str(STATUS_ENCODING_VERSION),))
            elif row is not None and row[0] != str(STATUS_ENCODING_VERSION):
                raise StoreError(f"store {self.path!r} encodes statuses with version {row[0]}; "
                                 f"this rewardsmith knows version {STATUS_ENCODING_VERSION}: "
                                 f"upgrade rewardsmith")

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        with self._lock:
            try:
                yield
            except sqlite3.DatabaseError as exc:
                message = str(exc)
                if "not a database" in message or "malformed" in message:
                    raise StoreError(f"{self.path!r} is not a readable rewardsmith store "
                                     f"({message})") from exc
                if is_read_only_error(exc):
                    raise StoreError(f"store {self.path!r} is read-only "
                                     f"({read_only_reason(self.path) or 'the file system refused a write'}): "
                                     f"{what} needs to write it") from exc
                raise StoreError(f"store {self.path!r}: {what} failed: {message}") from exc

    @contextmanager
    def _write(self) -> Iterator[None]:
        # IMMEDIATE takes the write lock up front, so a busy file makes us wait (busy_timeout)
        # instead of failing when a read transaction would later need to become a write.
        if self.read_only:
            raise StoreError(f"store {self.path!r} is read-only ({self._read_only_reason}): "
                             f"this needs to write it")
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            self._component_ids.clear()  # numbers given in this transaction are void
            self._item_ids.clear()
            raise
        self._db.execute("COMMIT")

    def close(self) -> None:
        try:
            self._wait_begun()
        except StoreError:
            pass  # the caller is closing: what failed is reported by whatever used the run
        with self._lock:
            self._db.close()

    def _component(self, identity: str, *, create: bool) -> int | None:
        number = self._component_ids.get(identity)
        if number is None:
            if create:
                self._db.execute("INSERT OR IGNORE INTO store_components (identity) VALUES (?)",
                                 (identity,))
            row = self._db.execute("SELECT id FROM store_components WHERE identity = ?",
                                   (identity,)).fetchone()
            if row is None:
                return None
            number = self._component_ids[identity] = int(row[0])
        return number

    def _items(self, keys: Sequence[str], data: Sequence[str] | None = None) -> dict[str, int]:
        """Item numbers for ``keys``, numbering new ones in order (inside a write)."""
        if data is not None:  # content also fills in items first seen by key alone
            last = self._db.execute("SELECT coalesce(max(id), 0) FROM store_items").fetchone()[0]
            self._db.executemany(
                "INSERT INTO store_items (key, data) VALUES (?, ?) ON CONFLICT (key) "
                "DO UPDATE SET data = excluded.data WHERE data IS NULL",
                zip(keys, map(storable_json, data), strict=True))
            unique = list(dict.fromkeys(keys))
            added = self._db.execute("SELECT count(*) FROM store_items WHERE id > ?",
                                     (last,)).fetchone()[0]
            if added == len(unique):
                # Every key was new: SQLite numbered them one after another, in order, after
                # the largest number before (this transaction holds the write lock).
                return {key: last + 1 + rank for rank, key in enumerate(unique)}
            return self._known_items(keys)
        cached = self._item_ids
        if all(map(cached.__contains__, keys)):  # the rollouts of a run begun here
            return cached
        known = self._known_items(keys)
        new = [key for key in dict.fromkeys(keys) if key not in known]
        if new:
            self._db.executemany("INSERT OR IGNORE INTO store_items (key) VALUES (?)",
                                 ((key,) for key in new))
            known.update(self._known_items(new))
        return known

    def _known_items(self, keys: Sequence[str]) -> dict[str, int]:
        unique = list(dict.fromkeys(keys))
        found: dict[str, int] = {}
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start:start + _CHUNK]
            found.update(self._db.execute(
                f"SELECT key, id FROM store_items WHERE key IN ({','.join('?' * len(chunk))})",
                chunk))
        return found

    def _deferred_id(self) -> str:
        return self.deferred.run_id if self.deferred is not None else ""

    def _write_queued(self, *, wait: bool) -> None:
        """Write the queued result blocks in one transaction. Without ``wait``, only when the
        file's write lock is free now: while a helper process writes a run's rollouts (one
        long transaction), the blocks wait here instead of the scoring waiting on the lock."""
        with self._lock:
            if not self._queued:
                return
            with self._guard("record"):
                if not wait:
                    self._db.execute("PRAGMA busy_timeout = 0")
                try:
                    try:
                        self._db.execute("BEGIN IMMEDIATE")
                    except sqlite3.OperationalError as exc:
                        if not wait and is_busy_error(exc):
                            return  # busy: tried again with the next batch
                        raise
                finally:
                    if not wait:
                        self._db.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
                try:
                    for run, component_id, seq, packed, recorded in self._queued:
                        component = self._component(component_id, create=True)
                        self._db.execute(
                            "INSERT INTO store_pending_results VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            (run, component, seq, *packed, recorded))
                except BaseException:
                    self._db.execute("ROLLBACK")
                    self._component_ids.clear()
                    raise
                self._db.execute("COMMIT")
                self._queued.clear()

    def _wait_begun(self) -> None:
        """Wait for a run being recorded in the background (and write the result blocks
        queued meanwhile); raise what stopped it."""
        deferred = self.deferred
        error = None
        if deferred is not None and deferred.writer is not None:
            deferred.scored.set()  # needed now
            deferred.writer.join()
            deferred.writer = None
            error, deferred.error = deferred.error, None
        self._write_queued(wait=True)
        if error is not None:
            if isinstance(error, StoreError):
                raise error
            raise StoreError(f"store {self.path!r}: recording the run failed: {error}") from error
