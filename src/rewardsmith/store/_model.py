"""The result store: rollouts, runs and component results, keyed by content, in one SQLite file.

A component's result for a rollout depends only on the component's identity (code, params,
timeout) and the rollout's content, so it is stored under that pair and reused by any later run
that asks the same question: a restart after ``kill -9``, a second run, or a rescore with a new
rubric. The file is SQLite in WAL mode: several processes may read and write it at once, every
write is one transaction (a crash loses at most the batch in flight, never the file), and the
judge's call ledger may live in the same file under its own ``judge_`` tables.

A run is ``running`` until it is ``done``; one stopped by Ctrl-C or SIGTERM is marked
``interrupted``, one that failed ``failed``. Each run records who runs it (pid, host, boot id,
process start time), so a ``running`` run whose process is gone (``kill -9``, a crash, a
reboot) reads as ``killed``. A store that cannot be written (file mode, read-only folder) is
opened read-only: reading works, and a write fails with a message that says "read-only".

Tables (all ``store_``):

- ``store_items``: content key -> a small integer, and the rollout's content when known
- ``store_components``: component identity -> a small integer
- ``store_results``: (component, item) -> value, status, error, metrics
- ``store_runs``: one row per score, rescore or import run, with its rubric and summary
- ``store_members``: which items a run holds, in the order of its input file, with id and group

Results are keyed by integers, not by the 32-character keys: a run's rollouts get consecutive
numbers, so its results are appended instead of scattered over the file (a batch's commit then
writes a few pages, not one page per result).

A score run records in bulk (``begin_run(defer=True)``): its rollouts and results go into
``store_pending_*`` blocks, which readers read as they are and the store settles into the tables
above when there are too many of them (see ``rewardsmith.store._blocks``). A run recorded beside
the scoring into a store that held no results keeps its rollouts' fields and no content keys
(``rewardsmith.store._background``): the first reader that needs the keys makes them, and keeps
them when it can write the file.
"""

from __future__ import annotations

import bisect
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from rewardsmith._system.gcpause import gc_paused
from rewardsmith._system.process_identity import ProcessIdentity
from rewardsmith.errors import StoreError
from rewardsmith.store import _background as store_background
from rewardsmith.store._blocks import (
    NO_KEYS,
    PENDING_SCHEMA,
    ROLLOUT_CHUNK,
    PackedResults,
    block_keys,
    cells_of_block,
    columns_of_block,
    field_block_row,
    keys_of_columns,
    pack_results,
    rollout_columns,
    split_times,
    storable_json,
    unpack_results,
    write_rollout_blocks,
    write_rollout_rows,
)
from rewardsmith.store._deferred import DeferredRun, RecordingRun
from rewardsmith.store.sqlite_setup import (
    connect,
    ensure_schema,
    is_busy_error,
    is_read_only_error,
    read_only_reason,
)
from rewardsmith.store.status_codes import (
    STATUS_CODES,
    STATUS_ENCODING_VERSION,
    code_of,
)
from rewardsmith.types import (
    ComponentResult,
    Rollout,
    Status,
    content_hash,
    key_of_content,
)

__all__ = [
    "ContentCache",
    "DEFAULT_STORE_PATH",
    "Members",
    "RunInfo",
    "Store",
    "StoredCell",
    "StoreFileChanged",
    "group_result_keys",
]

DEFAULT_STORE_PATH = "rewardsmith.db"
SCHEMA_VERSION = 6
_CHUNK = 900  # keys per IN (...) query: well under SQLite's variable limit
# Pending results read into memory for look-ups (about 150 bytes each); past this many the
# store settles them into its tables instead.
_PENDING_IN_MEMORY = 2_000_000
_ITEM_CACHE = 2_000_000  # item numbers kept in memory (about 100 bytes each)
_STATUS_CODES = STATUS_CODES
_CODE_OF = {status: code_of(status) for status in STATUS_CODES}
_REUSABLE = (Status.OK, Status.MASKED)  # failures are retried next time, never replayed

# A stored result as the fast path wants it: a bare float is an ok result without metrics.
StoredCell = float | ComponentResult
# id() of a rollout -> its content JSON and content key, shared while a run is recorded.
ContentCache = dict[int, tuple[str, str]]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS store_items (
    id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, data TEXT
);
CREATE TABLE IF NOT EXISTS store_components (
    id INTEGER PRIMARY KEY, identity TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS store_runs (
    id TEXT PRIMARY KEY, kind TEXT NOT NULL, created REAL NOT NULL, finished REAL,
    status TEXT NOT NULL, rubric_name TEXT NOT NULL, rubric_id TEXT NOT NULL,
    source TEXT NOT NULL, parent TEXT, members TEXT NOT NULL, size INTEGER NOT NULL,
    components TEXT NOT NULL, summary TEXT, pid INTEGER, host TEXT, boot_id TEXT,
    process_start TEXT
);
CREATE TABLE IF NOT EXISTS store_members (
    run TEXT NOT NULL, position INTEGER NOT NULL, id TEXT NOT NULL, grp TEXT NOT NULL,
    item INTEGER NOT NULL, PRIMARY KEY (run, position)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS store_results (
    component INTEGER NOT NULL, item INTEGER NOT NULL, value REAL, status INTEGER NOT NULL,
    error TEXT, metrics TEXT, recorded REAL NOT NULL, seconds REAL,
    PRIMARY KEY (component, item)
) WITHOUT ROWID;
""" + PENDING_SCHEMA
# Schema 1 -> 2: who runs each run, so a dead run can be told from a running one.
# Schema 2 -> 3: each result's call time (seconds), when recorded; pending blocks (new tables).
# Schema 3 -> 4: pending result blocks may name their rollouts by position in their run.
# Schema 4 -> 5: pending rollout contents compressed (older text blocks still read).
# Schema 5 -> 6: pending rollout blocks may hold their rollouts' fields and no keys yet.
_MIGRATIONS = {1: [f"ALTER TABLE store_runs ADD COLUMN {column}" for column in (
    "pid INTEGER", "host TEXT", "boot_id TEXT", "process_start TEXT")],
    2: ["ALTER TABLE store_results ADD COLUMN seconds REAL"], 3: [], 4: [], 5: []}
_INSERT_RESULT = ("INSERT OR IGNORE INTO store_results (component, item, value, status, error, "
                  "metrics, recorded, seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
_RUN_COLUMNS = 13  # store_runs columns before the process identity


class StoreFileChanged(StoreError):
    """The store's file was deleted or replaced while a run used it."""


def _file_identity(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


@dataclass(frozen=True)
class RunInfo:
    """One recorded run. ``members`` names the run whose rollout list it shares (itself for a
    score or import run; the source run for a rescore)."""

    id: str
    kind: str
    created: float
    finished: float | None
    status: str
    rubric_name: str
    rubric_id: str
    source: str
    parent: str | None
    members: str
    size: int
    components: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    pid: int | None = None
    host: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Members:
    """A run's rollouts in input order, without their content: ids, groups, content keys and
    item numbers. ``run`` is the run that owns the list."""

    run: str
    ids: list[str]
    groups: list[str]
    keys: list[str]
    items: list[int]

    def __len__(self) -> int:
        return len(self.keys)


def group_result_keys(keys: Sequence[str]) -> list[str]:
    """Keys for a group reward's results: its value for a rollout depends on the whole group
    (contents and order), so the key names the group's content and the rollout's place in it."""
    digest = content_hash(list(keys), length=24)
    return [f"g{digest}:{index}" for index in range(len(keys))]


def _cell(value: float | None, code: int, error: str | None, metrics: str | None) -> StoredCell:
    if code == 0 and error is None and metrics is None and value is not None:
        return float(value)
    return ComponentResult(
        None if value is None else float(value),
        _STATUS_CODES[code],
        error,
        json.loads(metrics) if metrics else {},
    )


def _as_result(cell: StoredCell) -> ComponentResult:
    return ComponentResult(cell) if isinstance(cell, float) else cell


def _new_run_id(kind: str) -> str:
    return f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(3).hex()}"


class Store:
    """A result store in one SQLite file (created when missing). Safe to share between threads
    and processes; use as a context manager or call ``close()``.

    It is the engine's ``ResultCache``: ``lookup`` and ``record`` by component identity and
    rollout content key. Only ``ok`` and ``masked`` results are kept: an error or a timeout is
    tried again next time.
    """

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

    # ------------------------------------------------------------ plumbing

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

    def __enter__(self) -> Store:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: object) -> None:
        try:
            if exc is not None:
                try:
                    self._wait_begun()  # a run still being recorded is then marked too
                except StoreError:
                    pass
            if exc is not None and self._open_runs:
                # Stopped by the user (Ctrl-C; SIGTERM arrives as SystemExit from the CLI) or
                # by an error: say so, instead of leaving the run "running" forever.
                stopped = isinstance(exc, (KeyboardInterrupt, SystemExit))
                self.abandon_runs("interrupted" if stopped else "failed")
        finally:
            self.close()

    def abandon_runs(self, status: str = "interrupted") -> None:
        """Mark the runs begun here and not finished as ``status`` (best effort: a store that
        cannot be written now leaves them to be read as ``killed`` later)."""
        try:
            self._wait_begun()
        except StoreError:
            pass
        for run_id in list(self._open_runs):
            try:
                self.end_run(run_id, status)
            except StoreError:
                pass

    # ------------------------------------------------------------ numbering

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

    # ------------------------------------------------------------ results (ResultCache)

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

    def record(self, component_id: str, results: Mapping[str, ComponentResult]) -> None:
        """Keep ``ok`` and ``masked`` results (one transaction); others are not reused.

        The first result stored for a key stays: a component's identity and a rollout's
        content fix its value, and a judge's verdict, once paid for, is the one kept."""
        self._record(component_id, results, None)

    def record_items(self, component_id: str, results: Mapping[int, ComponentResult]) -> None:
        """Like ``record``, by item number (``Members.items``) instead of content key."""
        self._record(component_id, None, results)

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

    # ------------------------------------------------------------ rollouts and runs

    def begin_run(
        self,
        rollouts: Sequence[Rollout],
        *,
        kind: str = "score",
        rubric_name: str = "",
        rubric_id: str = "",
        components: Sequence[Mapping[str, Any]] = (),
        source: str = "",
        keys: Sequence[str] | None = None,
        contents: Sequence[str] | None = None,
        defer: bool = False,
    ) -> str:
        """Record a new run holding ``rollouts`` (in this order) and their content, in one
        transaction: after a crash the run is there in full, or not at all. ``contents`` and
        ``keys`` (each rollout's ``content_json`` and ``content_key``) are computed when not
        given.

        ``defer``: keep the run's rollouts, and the results recorded until it ends, as pending
        blocks (fast to write; settled into the indexed tables when first needed)."""
        if contents is None:
            contents = [r.content_json() for r in rollouts]
        if keys is None:
            keys = [key_of_content(text) for text in contents]
        run_id = _new_run_id(kind)
        if defer and not self.read_only:
            self._begin_deferred(run_id, rollouts, keys, contents, kind=kind,
                                 rubric_name=rubric_name, rubric_id=rubric_id,
                                 components=components, source=source)
            return run_id
        with self._guard("recording the run"):
            with self._write():
                items = self._items(keys, contents)
                self._db.executemany(
                    "INSERT INTO store_members VALUES (?, ?, ?, ?, ?)",
                    ((run_id, i, r.id, r.group, items[key])
                     for i, (r, key) in enumerate(zip(rollouts, keys, strict=True))))
                self._insert_run(run_id, kind, rubric_name, rubric_id, source, None, run_id,
                                 len(rollouts), components)
            if len(self._item_ids) + len(items) > _ITEM_CACHE:
                self._item_ids.clear()
            self._item_ids.update(items)  # the results of this run will need these numbers
        return run_id

    def _begin_deferred(self, run_id: str, rollouts: Sequence[Rollout], keys: Sequence[str],
                        contents: Sequence[str], *, kind: str, rubric_name: str,
                        rubric_id: str, components: Sequence[Mapping[str, Any]],
                        source: str, insert_run: bool = True) -> None:
        with self._guard("recording the run"), self._write():
            write_rollout_blocks(self._db, run_id, [r.id for r in rollouts],
                                 [r.group for r in rollouts], keys, contents)
            if insert_run:
                self._insert_run(run_id, kind, rubric_name, rubric_id, source, None, run_id,
                                 len(rollouts), components)
            # Nothing stored yet: no look-up can hit while this run records.
            empty = self._holds_no_results(besides=run_id)
        current = self.deferred
        if current is None:
            self.deferred = DeferredRun(run_id, nothing_stored=bool(empty))
        elif current.run_id == run_id and current.writer is None:
            current.nothing_stored = bool(empty)

    def begin_recording(
        self,
        rollouts: Sequence[Rollout],
        *,
        kind: str = "score",
        rubric_name: str = "",
        rubric_id: str = "",
        components: Sequence[Mapping[str, Any]] = (),
        source: str = "",
        known: ContentCache | None = None,
    ) -> RecordingRun:
        """Begin a run of ``rollouts`` recorded beside the scoring, and return its handle (the
        engine's cache for it, and what finishes it). Its rollouts are written off the
        caller's path (their fields only, when this store holds no results): by a helper
        process at low priority for a large run, once the handle's ``scoring_done`` is called
        (see ``_background``), else by a thread. Its results wait in pending blocks, as for
        any deferred run. ``known`` (rollout id() -> content JSON, key) is shared with whoever
        else needs the keys, so that a rollout is encoded once in this process (and the keys
        made for look-ups are written with the rollouts). Anything that reads or ends the run
        waits for its rollouts first. The run is listed at once; a run killed before its
        rollouts are written has none."""
        if self.read_only:
            return RecordingRun(self, self.begin_run(
                rollouts, kind=kind, rubric_name=rubric_name, rubric_id=rubric_id,
                components=components, source=source))
        self._wait_begun()
        run_id = _new_run_id(kind)
        with self._guard("recording the run"), self._write():
            # The run itself now, so that a kill at any moment leaves it listed (as killed);
            # its rollouts follow in one transaction of their own.
            self._insert_run(run_id, kind, rubric_name, rubric_id, source, None, run_id,
                             len(rollouts), components)
            empty = self._holds_no_results(besides=run_id)
        # Results of this run are kept by position while it is deferred (no keys needed).
        deferred = self.deferred = DeferredRun(
            run_id, nothing_stored=bool(empty),
            positions=dict(zip(map(id, rollouts), range(len(rollouts)))), rollouts=rollouts)
        shared: ContentCache = known if known is not None else {}

        def record() -> None:
            try:
                if not (store_background.helper_fits(len(rollouts))
                        and store_background.record_in_helper(
                            self.path, run_id, rollouts,
                            lambda: deferred.scored.wait(store_background.WAIT_FOR_SCORING),
                            lambda: _known_keys(rollouts, shared))):
                    self._record_rollouts_here(deferred, rollouts, shared)
            except BaseException as exc:  # noqa: BLE001 - raised where the run is next used
                deferred.error = exc

        deferred.writer = threading.Thread(target=record, name="rewardsmith-store-run",
                                           daemon=True)
        deferred.writer.start()
        return RecordingRun(self, run_id, deferred)

    def recording(self, run_id: str) -> RecordingRun:
        """The handle of run ``run_id``, begun here and not ended (see ``begin_recording``)."""
        deferred = self.deferred
        return RecordingRun(self, run_id,
                            deferred if deferred is not None and deferred.run_id == run_id
                            else None)

    def _record_rollouts_here(self, deferred: DeferredRun, rollouts: Sequence[Rollout],
                              known: ContentCache) -> None:
        """A background run's rollouts encoded and written by this process."""
        run_id = deferred.run_id
        if self._pending_rollouts(run_id, wait=False):
            return  # a helper wrote them and stopped before it answered
        if deferred.nothing_stored and all(type(r) is Rollout for r in rollouts):
            # Nothing to look up: the scoring makes no key, so none is made until a reader
            # needs them (a subclass may encode itself otherwise: keyed by its methods).
            rows = [field_block_row(run_id, start,
                                    rollout_columns(rollouts[start:start + ROLLOUT_CHUNK]))
                    for start in range(0, len(rollouts), ROLLOUT_CHUNK)]
            with self._guard("recording the run"), self._write():
                write_rollout_rows(self._db, rows)
            return
        texts: list[str] = [""] * len(rollouts)
        keys: list[str] = [""] * len(rollouts)
        # From the end: the scoring starts at the front and encodes what it reaches.
        for index in range(len(rollouts) - 1, -1, -1):
            rollout = rollouts[index]
            text, key = known.get(id(rollout)) or ("", "")
            if not text:
                text = rollout.content_json()
                key = key or key_of_content(text)
                known[id(rollout)] = (text, key)
            texts[index], keys[index] = text, key
        with self._guard("recording the run"), self._write():
            write_rollout_blocks(self._db, run_id, [r.id for r in rollouts],
                                 [r.group for r in rollouts], keys, texts)

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

    def _holds_no_results(self, *, besides: str) -> bool:
        """No result stored, in the tables or pending, other than run ``besides``'s."""
        return bool(self._db.execute(
            "SELECT NOT EXISTS (SELECT 1 FROM store_results) AND NOT EXISTS "
            "(SELECT 1 FROM store_pending_results WHERE run != ?)", (besides,)).fetchone()[0])

    def _run_ended(self, run_id: str) -> None:
        self._open_runs.discard(run_id)
        if self.deferred is not None and self.deferred.run_id == run_id:
            self.deferred = None
            self._pending_index = None  # its results are now looked up like any others
            self._no_pending = False

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

    def begin_derived_run(
        self,
        parent: str,
        *,
        kind: str = "rescore",
        rubric_name: str = "",
        rubric_id: str = "",
        components: Sequence[Mapping[str, Any]] = (),
        defer: bool = False,
    ) -> str:
        """Record a new run over the same rollouts as ``parent`` (nothing is copied);
        ``defer``: its results go into pending blocks until it ends (see ``begin_run``)."""
        base = self.get_run(parent)
        run_id = _new_run_id(kind)
        with self._guard("recording the run"), self._write():
            self._insert_run(run_id, kind, rubric_name, rubric_id, base.source, base.id,
                             base.members, base.size, components)
        if defer and not self.read_only:
            self.deferred = DeferredRun(run_id)
        return run_id

    def _insert_run(self, run_id: str, kind: str, rubric_name: str, rubric_id: str, source: str,
                    parent: str | None, members: str, size: int,
                    components: Sequence[Mapping[str, Any]]) -> None:
        me = ProcessIdentity.current()
        self._db.execute(
            "INSERT INTO store_runs VALUES (?, ?, ?, NULL, 'running', ?, ?, ?, ?, ?, ?, ?, NULL, "
            "?, ?, ?, ?)",
            (run_id, kind, time.time(), rubric_name, rubric_id, source, parent, members, size,
             json.dumps([dict(c) for c in components]), me.pid, me.host, me.boot_id, me.start))
        self._open_runs.add(run_id)

    def finish_run(self, run_id: str, summary: Mapping[str, Any] | None = None) -> None:
        """Mark a run done and keep its summary (JSON-serializable numbers). Raises
        ``StoreFileChanged`` when the file was deleted or replaced during the run."""
        self._wait_begun()
        self.check_file()
        text = json.dumps(dict(summary), default=str) if summary is not None else None
        with self._guard("finishing the run"), self._write():
            self._db.execute(
                "UPDATE store_runs SET status = 'done', finished = ?, summary = ? WHERE id = ?",
                (time.time(), text, run_id))
        self._run_ended(run_id)
        self.check_file()

    def end_run(self, run_id: str, status: str) -> None:
        """Mark a run that did not finish: ``interrupted`` (stopped by the user) or
        ``failed``. A run already done keeps its status."""
        if status not in ("interrupted", "failed"):
            raise ValueError(f"a run ends 'interrupted' or 'failed', not {status!r}")
        self._wait_begun()
        with self._guard("ending the run"), self._write():
            self._db.execute(
                "UPDATE store_runs SET status = ?, finished = ? WHERE id = ? "
                "AND status = 'running'", (status, time.time(), run_id))
        self._run_ended(run_id)

    def runs(self) -> list[RunInfo]:
        """Every recorded run, oldest first."""
        self._wait_begun()
        with self._guard("listing runs"):
            rows = self._db.execute(
                "SELECT * FROM store_runs ORDER BY created, rowid").fetchall()
        return [_run_info(row) for row in rows]

    def get_run(self, run_id: str | None = None) -> RunInfo:
        """A run by id (or unique id prefix); ``None`` is the latest run."""
        self._wait_begun()
        with self._guard("reading runs"):
            if run_id is None:
                rows = self._db.execute(
                    "SELECT * FROM store_runs ORDER BY created DESC, rowid DESC LIMIT 1").fetchall()
                if not rows:
                    raise StoreError(f"store {self.path!r} holds no runs yet: score rollouts "
                                     f"with --store {self.path} first, or import scores")
            else:
                rows = self._db.execute("SELECT * FROM store_runs WHERE id = ?",
                                        (run_id,)).fetchall()
                if not rows:
                    pattern = (run_id.replace("\\", "\\\\").replace("%", "\\%")
                               .replace("_", "\\_") + "%")
                    rows = self._db.execute(
                        "SELECT * FROM store_runs WHERE id LIKE ? ESCAPE '\\' LIMIT 2",
                        (pattern,)).fetchall()
                if len(rows) != 1:
                    known = ", ".join(r.id for r in self.runs()[-5:]) or "none"
                    problem = "matches several runs" if rows else "is not in this store"
                    raise StoreError(f"run {run_id!r} {problem} ({self.path}); "
                                     f"latest runs: {known}")
        return _run_info(rows[0])

    def members(self, run_id: str) -> Members:
        """The run's rollouts in input order: ids, groups, content keys and item numbers (keys
        not made yet are made here from the rollouts' fields, and kept when the store can
        write)."""
        owner = self.get_run(run_id).members
        blocks = self._pending_rollouts(owner)
        if blocks:  # recorded in bulk: its order, ids and keys are in the blocks (no numbers)
            ids: list[str] = []
            groups: list[str] = []
            keys: list[str] = []
            made: list[tuple[int, list[str]]] = []
            for start, block_ids, block_groups, keys_text, contents in blocks:
                ids.extend(json.loads(block_ids))
                groups.extend(json.loads(block_groups))
                if keys_text == NO_KEYS:  # kept as fields: the keys are made from them, once
                    with gc_paused():
                        made.append((start, keys_of_columns(columns_of_block(contents))[1]))
                    keys.extend(made[-1][1])
                else:
                    keys.extend(json.loads(keys_text))
            if made:
                self._keep_keys(owner, made)
            return Members(owner, ids, groups, keys, [])
        with self._guard("reading the run"):
            rows = self._db.execute(
                "SELECT m.id, m.grp, i.key, m.item FROM store_members m "
                "CROSS JOIN store_items i ON i.id = m.item WHERE m.run = ? ORDER BY m.position",
                (owner,)).fetchall()
        if not rows:
            return Members(owner, [], [], [], [])
        ids, groups, keys, items = (list(column) for column in zip(*rows, strict=True))
        return Members(owner, ids, groups, keys, items)

    def load_rollouts(self, run_id: str, positions: Sequence[int] | None = None) -> list[Rollout]:
        """The run's rollouts with their content (all, or those at ``positions``, in order)."""
        info = self.get_run(run_id)
        blocks = self._pending_rollouts(info.members)
        if blocks:
            return _rollouts_of_blocks(blocks, positions)
        query = ("SELECT m.position, m.id, m.grp, i.data FROM store_members m "
                 "CROSS JOIN store_items i ON i.id = m.item WHERE m.run = ?")
        wanted = None if positions is None else sorted(set(positions))
        with self._guard("reading rollouts"):
            if wanted is None or 4 * len(wanted) > info.size:  # most of the run: read it all
                rows = self._db.execute(query + " ORDER BY m.position", (info.members,)).fetchall()
                if wanted is not None:
                    keep = set(wanted)
                    rows = [row for row in rows if row[0] in keep]
            else:
                rows = []
                for start in range(0, len(wanted), _CHUNK):
                    chunk = wanted[start:start + _CHUNK]
                    rows.extend(self._db.execute(
                        query + f" AND m.position IN ({','.join('?' * len(chunk))})",
                        (info.members, *chunk)))
                rows.sort()
        for _, rollout_id, _, data in rows:
            if data is None:
                raise StoreError(f"rollout {rollout_id!r} of run {info.id} has no stored content")
        # One JSON document for all contents: decoding it is one call, not one per rollout.
        # Nothing built here forms a cycle: the collector would only rescan it, many times.
        with gc_paused():
            contents = json.loads("[" + ",".join(row[3] for row in rows) + "]")
            return [Rollout(rollout_id, group, *content)
                    for (_, rollout_id, group, _), content in zip(rows, contents, strict=True)]

    def rollouts_by_id(self, run_id: str, ids: Sequence[str]) -> dict[str, Rollout]:
        """Rollouts of a run with the given ids (the first of each id)."""
        wanted = set(ids)
        positions: dict[str, int] = {}
        for position, rollout_id in enumerate(self.members(run_id).ids):
            if rollout_id in wanted:
                positions.setdefault(rollout_id, position)
        return {r.id: r for r in self.load_rollouts(run_id, list(positions.values()))}


def _known_keys(rollouts: Sequence[Rollout], known: ContentCache) -> list[str] | None:
    """The content keys of ``rollouts`` in ``known``, in order; None unless all are there (a
    store that held results when the run began keys every rollout for its look-ups)."""
    if len(known) < len(rollouts):
        return None
    found = list(map(known.get, map(id, rollouts)))
    return None if None in found else [pair[1] for pair in cast("list[tuple[str, str]]", found)]


def _run_info(row: tuple[Any, ...]) -> RunInfo:
    (run_id, kind, created, finished, status, rubric_name, rubric_id, source, parent, members,
     size, components, summary) = row[:_RUN_COLUMNS]
    pid = host = None
    if len(row) > _RUN_COLUMNS:  # schema 2: who runs it
        pid, host, boot_id, start = row[_RUN_COLUMNS:_RUN_COLUMNS + 4]
        if status == "running" and pid is not None and host is not None and \
                ProcessIdentity(int(pid), host, boot_id, start).liveness() == "gone":
            status = "killed"  # its process ended without finishing it
    return RunInfo(run_id, kind, created, finished, status, rubric_name, rubric_id, source,
                   parent, members, size, json.loads(components or "[]"),
                   json.loads(summary) if summary else None, pid, host)


def _rollouts_of_blocks(blocks: Sequence[tuple[int, str, str, str, str | bytes]],
                        positions: Sequence[int] | None) -> list[Rollout]:
    """Rollouts from a run's pending blocks (all, or those at ``positions``, in order)."""
    wanted = None if positions is None else sorted(set(positions))
    out: list[Rollout] = []
    with gc_paused():
        for start, ids, groups, _, contents in blocks:
            block_ids: list[str] = json.loads(ids)
            end = start + len(block_ids)
            offsets: Sequence[int] = range(len(block_ids))
            if wanted is not None:  # this block's share of the sorted positions, by bisection
                inside = wanted[bisect.bisect_left(wanted, start):bisect.bisect_left(wanted, end)]
                if not inside:
                    continue
                if len(inside) < len(block_ids):
                    offsets = [p - start for p in inside]
            block_groups: list[str] = json.loads(groups)
            columns = columns_of_block(contents)
            if any(len(column) != len(block_ids) for column in columns):
                raise StoreError(f"a block of run rollouts from position {start} is damaged: "
                                 f"{len(block_ids)} ids, fields of "
                                 f"{sorted({len(column) for column in columns})} rollouts")
            if type(offsets) is range:  # the whole block: one call per rollout, nothing else
                out.extend(map(Rollout, block_ids, block_groups, *columns))
            else:
                out.extend(Rollout(block_ids[i], block_groups[i], *(c[i] for c in columns))
                           for i in offsets)
    return out
