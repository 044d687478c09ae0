"""The durable record of judge calls: one SQLite file (WAL), shared by processes and runs.

Tables (all prefixed ``judge_``; the file may hold other tables, which are left alone):

- ``judge_records``: one row per graded criterion key. ``state`` is ``claimed`` (a process is
  calling for it: ``owner``, ``owner_host``, ``owner_pid``, ``lease_until``), ``ok`` (``value``)
  or ``failed`` (``error``, and ``failures``: how many calls for it failed; asked again by a
  later run while ``failures`` is at most the judge's ``retry_failed``, then replayed as the
  error; never replayed as a grade).
- ``judge_calls``: one row per call made, successful or not, with the raw reply, tokens and
  cost, written in the same transaction as the records it settles.
- ``judge_history``: grades replaced by a refresh (``Judge.refresh``, ``--refresh``), kept
  beside the new ones: key, old value, the call that gave it, when it was replaced.

A process claims a key before calling for it. Others see the claim and wait for the result; a
claim whose owner died (same host, process gone) or whose lease ran out (the owner renews it
while it works) is taken over.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rewardsmith.store.sqlite_setup import (
    connect,
    ensure_schema,
)

from ..errors import StoreError

__all__ = ["CallRecord", "Claim", "Ledger", "Owner", "Record", "pid_alive"]

SCHEMA_VERSION = 2
# Version 1 had no failure count: its failed grades count as failed once.
_MIGRATIONS = {1: ["ALTER TABLE judge_records ADD COLUMN failures INTEGER NOT NULL DEFAULT 0",
                   "UPDATE judge_records SET failures = 1 WHERE state = 'failed'"]}
LEASE_SECONDS = 60.0
_CHUNK = 500  # keys per IN (...) query, well under SQLite's variable limit
T = TypeVar("T")
_Queued = tuple[Callable[[sqlite3.Connection], Any], "asyncio.Future[Any]", asyncio.AbstractEventLoop]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS judge_records (
    key TEXT PRIMARY KEY,
    state TEXT NOT NULL CHECK (state IN ('claimed', 'ok', 'failed')),
    value REAL,
    error TEXT,
    call_id TEXT,
    criterion TEXT,
    model TEXT,
    owner TEXT,
    owner_host TEXT,
    owner_pid INTEGER,
    lease_until REAL,
    updated_at REAL NOT NULL,
    failures INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS judge_records_owner ON judge_records (owner) WHERE owner IS NOT NULL;
CREATE TABLE IF NOT EXISTS judge_calls (
    id TEXT PRIMARY KEY,
    judge TEXT,
    model TEXT NOT NULL,
    criteria TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    error TEXT,
    http_status INTEGER,
    attempts INTEGER NOT NULL,
    tokens_in INTEGER NOT NULL,
    tokens_out INTEGER NOT NULL,
    cost REAL NOT NULL,
    reply TEXT,
    reply_model TEXT,
    started_at REAL NOT NULL,
    finished_at REAL NOT NULL,
    pid INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS judge_history (
    key TEXT NOT NULL,
    value REAL,
    call_id TEXT,
    graded_at REAL NOT NULL,
    replaced_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS judge_history_key ON judge_history (key);
"""


@dataclass(frozen=True)
class Owner:
    """Who holds a claim: a token unique to one judge in one process, and where it runs."""

    token: str
    host: str
    pid: int

    @classmethod
    def here(cls) -> Owner:
        owner = cls(uuid.uuid4().hex, socket.gethostname(), os.getpid())
        _LIVE_OWNERS.add(owner.token)
        return owner

    def retire(self) -> None:
        """This owner stops working: its claims left behind are stale at once."""
        _LIVE_OWNERS.discard(self.token)


# Owners alive in this process: a claim of this process by an owner not in here was left by a
# run that ended without giving it back, and need not wait for its lease to run out.
_LIVE_OWNERS: set[str] = set()


@dataclass
class Record:
    key: str
    state: str
    value: float | None = None
    error: str | None = None
    owner: str | None = None
    owner_host: str | None = None
    owner_pid: int | None = None
    lease_until: float | None = None
    updated_at: float | None = None
    call_id: str | None = None
    failures: int = 0

    def replayed_failure(self) -> str:
        """The error a run gives for a grade that failed too often to be asked again."""
        return (f"{self.error or 'judge call failed'} (recorded: failed {self.failures} "
                f"times, not asked again; --refresh asks again)")


@dataclass
class Claim:
    """The outcome of trying to claim keys: call for ``mine``, wait for ``theirs``."""

    mine: list[str] = field(default_factory=list)
    theirs: list[str] = field(default_factory=list)
    done: dict[str, Record] = field(default_factory=dict)  # settled meanwhile (ok)
    failed: dict[str, Record] = field(default_factory=dict)  # failed too often: not asked


@dataclass
class CallRecord:
    """One call as it is written to ``judge_calls``."""

    judge: str
    model: str
    criteria: list[str]
    status: str
    attempts: int
    tokens_in: int
    tokens_out: int
    cost: float
    started_at: float
    error: str | None = None
    http_status: int | None = None
    reply: str | None = None
    reply_model: str | None = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    cut: bool = False  # the reply stopped at max_tokens (not stored: its error says so)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` on this host still runs (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            state = handle.read().rsplit(")", 1)[-1].split()
        return not state or state[0] not in ("Z", "X")
    except OSError:
        return True  # no /proc (macOS): kill(0) said it exists


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


class Ledger:
    """The judge tables of one store file. Writes run on the ledger's own thread (a busy
    database never blocks the event loop), several to a transaction; reads run inline."""

    def __init__(self, path: str, *, lease: float = LEASE_SECONDS):
        self.path = path
        self.lease = lease
        self._conn: sqlite3.Connection | None = None  # writes, on the ledger's thread
        self._reader: sqlite3.Connection | None = None  # reads, on the event loop's thread
        self._executor: ThreadPoolExecutor | None = None
        self._queue: list[_Queued] = []
        self._queue_lock = threading.Lock()
        self._draining = False

    async def run(self, method: Callable[..., T], *args: Any) -> T:
        """``method(*args)`` on the ledger's thread (for what is not a grouped write)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="rewardsmith-judge-store")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(method, *args))

    # ------------------------------------------------------------------ connection

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._open()
        return self._conn

    def _connect(self) -> sqlite3.Connection:
        return connect(self.path, what="judge store", timeout=30.0, wal=False)

    def _open(self) -> sqlite3.Connection:
        conn = connect(self.path, what="judge store", timeout=30.0)
        try:
            ensure_schema(conn, what="judge store", path=self.path, prefix="judge",
                          script=_SCHEMA, version=SCHEMA_VERSION, migrations=_MIGRATIONS)
        except BaseException:
            conn.close()
            raise
        return conn

    def open(self) -> None:
        """Open (and create) the tables now, so a bad path fails before scoring."""
        self._db()

    def close(self, owner: Owner | None = None) -> None:
        """Give back this owner's unfinished claims and close the connection."""
        if self._conn is not None:
            try:
                if owner is not None:
                    _let_go(self._conn, owner, "")
            except sqlite3.Error:
                pass  # a claim left behind is taken over when its lease runs out
            self._conn.close()
            self._conn = None

    def shutdown(self) -> None:
        """Close the read connection and stop the ledger's thread (after ``close`` ran on it)."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def abandon(self, owner: Owner) -> None:
        """Let go without awaiting (the event loop that used this ledger is gone)."""
        if self._executor is not None:
            self._executor.submit(self.close, owner)
            self._executor.shutdown(wait=False)
            self._executor = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    # ------------------------------------------------------------------ reading

    def lookup(self, keys: Sequence[str]) -> dict[str, Record]:
        """The records of ``keys`` as committed now. Call it on the event loop's thread: it
        uses a read-only connection of its own, and WAL readers never wait for writers."""
        if self._reader is None:
            self._reader = self._connect()
        try:
            return self._select(self._reader, keys)
        except sqlite3.Error as exc:
            raise StoreError(f"judge store {self.path!r}: cannot read: {exc}") from None

    def grades(self, keys: Sequence[str], *, since: float | None = None) -> dict[str, float]:
        """The recorded grades among ``keys`` (key -> value), only those recorded at or after
        ``since`` when given (a refresh); like ``lookup``, inline."""
        if self._reader is None:
            self._reader = self._connect()
        found: dict[str, float] = {}
        newer = "" if since is None else " AND updated_at >= ?"
        try:
            for chunk in _chunks(keys):
                marks = ",".join("?" * len(chunk))
                found.update(self._reader.execute(
                    f"SELECT key, value FROM judge_records WHERE key IN ({marks}) "
                    f"AND state = 'ok' AND value IS NOT NULL{newer}",
                    (*chunk, *(() if since is None else (since,)))).fetchall())
        except sqlite3.Error as exc:
            raise StoreError(f"judge store {self.path!r}: cannot read: {exc}") from None
        return found

    def _select(self, db: sqlite3.Connection, keys: Sequence[str]) -> dict[str, Record]:
        found: dict[str, Record] = {}
        for chunk in _chunks(keys):
            marks = ",".join("?" * len(chunk))
            for row in db.execute(
                "SELECT key, state, value, error, owner, owner_host, owner_pid, lease_until, "
                f"updated_at, call_id, failures FROM judge_records WHERE key IN ({marks})",
                tuple(chunk)):
                found[row[0]] = Record(*row)
        return found

    def is_stale(self, record: Record, owner: Owner, now: float) -> bool:
        if record.lease_until is None or record.lease_until < now:
            return True
        if record.owner_host != owner.host or record.owner_pid is None:
            return False  # another machine: only the lease tells
        if record.owner_pid == owner.pid:
            return record.owner not in _LIVE_OWNERS
        return not pid_alive(record.owner_pid)

    # ------------------------------------------------------------------ writing

    async def claim(self, keys: Sequence[str], owner: Owner, criteria: Mapping[str, str],
                    model: str, *, refresh_before: float | None = None,
                    retry_failed: int | None = None) -> Claim:
        """Claim every key that has no grade and no live claim; report the rest. With
        ``refresh_before``, grades (and failures) recorded before that time are claimed too
        (to be asked again), and old grades moved to ``judge_history``. With
        ``retry_failed``, a key whose calls failed more often than that is not claimed but
        reported in ``failed``."""
        return await self._write(functools.partial(self._claim, keys, owner, criteria, model,
                                                   refresh_before, retry_failed))

    async def finish(self, call: CallRecord, outcomes: Mapping[str, float | str],
                     criteria: Mapping[str, str]) -> None:
        """Record the call and the grades (float) or failures (str) it settled; returns once
        they are committed."""
        await self._write(functools.partial(self._finish, call, outcomes, criteria))

    async def _write(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        # Group commit: writes queued while the ledger thread is busy share one transaction,
        # so a burst of calls finishing together costs one commit instead of one each.
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._queue_lock:
            self._queue.append((operation, future, loop))
            start = not self._draining
            self._draining = True
        if start:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="rewardsmith-judge-store")
            self._executor.submit(self._drain)
        return await future  # type: ignore[no-any-return]

    def _drain(self) -> None:
        while True:
            with self._queue_lock:
                batch, self._queue = self._queue, []
                if not batch:
                    self._draining = False
                    return
            outcomes = self._apply(batch)
            for (_, future, loop), outcome in zip(batch, outcomes, strict=True):
                loop.call_soon_threadsafe(_settle, future, outcome)

    def _apply(self, batch: list[_Queued]) -> list[Any]:
        """Run each queued write in its own savepoint, all in one transaction."""
        outcomes: list[Any] = []
        try:
            db = self._db()
            db.execute("BEGIN IMMEDIATE")
        except (sqlite3.Error, StoreError) as exc:
            failure = exc if isinstance(exc, StoreError) else StoreError(
                f"judge store {self.path!r}: cannot write: {exc}")
            return [failure] * len(batch)
        for operation, _, _ in batch:
            try:
                db.execute("SAVEPOINT judge_write")
                outcomes.append(operation(db))
                db.execute("RELEASE judge_write")
            except sqlite3.Error as exc:
                db.execute("ROLLBACK TO judge_write")
                db.execute("RELEASE judge_write")
                outcomes.append(StoreError(f"judge store {self.path!r}: cannot write: {exc}"))
        try:
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            _rollback(db)
            return [StoreError(f"judge store {self.path!r}: cannot commit: {exc}")] * len(batch)
        return outcomes

    def _claim(self, keys: Sequence[str], owner: Owner, criteria: Mapping[str, str],
               model: str, refresh_before: float | None, retry_failed: int | None,
               db: sqlite3.Connection) -> Claim:
        claim = Claim()
        now = time.time()
        current = self._select(db, keys)
        rows = []
        replaced = []
        for key in keys:
            record = current.get(key)
            stale = (refresh_before is not None and record is not None
                     and (record.updated_at or 0.0) < refresh_before)
            if record is not None and record.state == "ok" and not stale:
                claim.done[key] = record
            elif (record is not None and record.state == "failed" and not stale
                  and retry_failed is not None and record.failures > retry_failed):
                claim.failed[key] = record
            elif (record is not None and record.state == "claimed"
                  and record.owner != owner.token and not self.is_stale(record, owner, now)):
                claim.theirs.append(key)
            else:
                claim.mine.append(key)
                if record is not None and record.state == "ok":
                    replaced.append((key, record.value, record.call_id,
                                     record.updated_at or now, now))
                rows.append((key, criteria.get(key), model, owner.token, owner.host,
                             owner.pid, now + self.lease, now))
        db.executemany("INSERT INTO judge_history (key, value, call_id, graded_at, replaced_at) "
                       "VALUES (?, ?, ?, ?, ?)", replaced)
        # A claim keeps the count of earlier failures (the next failure adds to it).
        db.executemany(
            "INSERT INTO judge_records (key, state, criterion, model, owner, "
            "owner_host, owner_pid, lease_until, updated_at) "
            "VALUES (?, 'claimed', ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET state = 'claimed', value = NULL, "
            "criterion = excluded.criterion, model = excluded.model, "
            "owner = excluded.owner, owner_host = excluded.owner_host, "
            "owner_pid = excluded.owner_pid, lease_until = excluded.lease_until, "
            "updated_at = excluded.updated_at", rows)
        return claim

    def _finish(self, call: CallRecord, outcomes: Mapping[str, float | str],
                criteria: Mapping[str, str], db: sqlite3.Connection) -> None:
        now = time.time()
        ok = [(key, value, call.id, criteria.get(key), call.model, now)
              for key, value in outcomes.items() if isinstance(value, float)]
        failed = [(key, value, call.id, criteria.get(key), call.model, now)
                  for key, value in outcomes.items() if isinstance(value, str)]
        db.execute(
            "INSERT INTO judge_calls (id, judge, model, criteria, status, error, http_status, "
            "attempts, tokens_in, tokens_out, cost, reply, reply_model, started_at, "
            "finished_at, pid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (call.id, call.judge, call.model, json.dumps(call.criteria), call.status,
             call.error, call.http_status, call.attempts, call.tokens_in, call.tokens_out,
             call.cost, call.reply, call.reply_model, call.started_at, now, os.getpid()))
        db.executemany(
            "INSERT OR REPLACE INTO judge_records (key, state, value, error, call_id, "
            "criterion, model, updated_at) VALUES (?, 'ok', ?, NULL, ?, ?, ?, ?)", ok)
        # A failure never overwrites a grade another process recorded for the same key.
        db.executemany(
            "INSERT INTO judge_records (key, state, error, call_id, criterion, model, "
            "updated_at, failures) VALUES (?, 'failed', ?, ?, ?, ?, ?, 1) "
            "ON CONFLICT (key) DO UPDATE SET state = 'failed', error = excluded.error, "
            "call_id = excluded.call_id, value = NULL, owner = NULL, owner_host = NULL, "
            "owner_pid = NULL, lease_until = NULL, updated_at = excluded.updated_at, "
            "failures = judge_records.failures + 1 "
            "WHERE judge_records.state != 'ok'", failed)

    def release(self, keys: Sequence[str], owner: Owner) -> None:
        """Give back claims this owner will not call for (budget spent, run stopped)."""
        db = self._db()
        try:
            for chunk in _chunks(keys):
                _let_go(db, owner, f" AND key IN ({','.join('?' * len(chunk))})", chunk)
        except sqlite3.Error as exc:
            raise StoreError(f"judge store {self.path!r}: cannot release claims: {exc}") from None

    def renew(self, owner: Owner) -> None:
        """Push this owner's claims' leases forward (it is alive and still working on them)."""
        try:
            self._db().execute("UPDATE judge_records SET lease_until = ? WHERE owner = ? AND "
                               "state = 'claimed'", (time.time() + self.lease, owner.token))
        except sqlite3.Error:
            pass  # the next renewal tries again; a lapse only lets another process take over


def _let_go(db: sqlite3.Connection, owner: Owner, where: str,
            keys: Sequence[str] = ()) -> None:
    """Give back this owner's claims (those ``where`` selects): a key that had failed before
    goes back to failed, with its count and error; any other is forgotten."""
    db.execute("UPDATE judge_records SET state = 'failed', owner = NULL, owner_host = NULL, "
               "owner_pid = NULL, lease_until = NULL WHERE owner = ? AND state = 'claimed' "
               f"AND failures > 0{where}", (owner.token, *keys))
    db.execute(f"DELETE FROM judge_records WHERE owner = ? AND state = 'claimed'{where}",
               (owner.token, *keys))


def _settle(future: asyncio.Future[Any], outcome: Any) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def _rollback(db: sqlite3.Connection) -> None:
    try:
        db.execute("ROLLBACK")
    except sqlite3.Error:
        pass
