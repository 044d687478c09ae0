"""Judge limits shared by every process that uses one store file on one machine.

The state lives in a SQLite file beside the store (``<store>-limits``, WAL), apart from the
store itself so that a judge waiting for a slot never queues behind the ledger's writes.
Each transaction is short (a few rows) and takes the write lock at once (``BEGIN
IMMEDIATE``), so two processes never both read a free slot and both take it.

- ``limit_members``: one row per run that shares the limits (a judge on one event loop): its
  token, who runs it (pid, host, boot id, process start time; ``process_identity``) and
  ``held``, its calls in flight (concurrency slots). The slots taken are the sum over a key's
  members, so a gone member's row takes its slots with it.
- ``limit_state``: per limits key, the two token buckets (level, updated) and the budget's
  running totals (calls, tokens, cost).

A member is gone when its process is (a pid check with the start time, so a reused pid does
not count); a crashed or killed process's slots are taken back the next time a process finds
every slot taken. Where the process cannot be checked (another host name, such as containers
sharing a volume), a member is gone once its heartbeat (every ``HEARTBEAT`` seconds) is older
than ``LEASE`` seconds. When a process joins and no member of its key is left, the key starts
afresh: the budget covers the processes that run at the same time.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

from rewardsmith._system.process_identity import ProcessIdentity
from rewardsmith.store.sqlite_setup import (
    connect,
    ensure_schema,
)

from ..errors import StoreError
from .limit_settings import FULL, LimitSettings, bucket_reserve

__all__ = ["HEARTBEAT", "LEASE", "StoreLimits"]

SCHEMA_VERSION = 1
LEASE = 60.0  # seconds without a heartbeat before a member that cannot be checked is gone
HEARTBEAT = 15.0
_REAP_EVERY = 0.25  # seconds between looks for gone members while every slot is taken
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS limit_members (
    token TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    boot_id TEXT,
    start TEXT,
    seen_at REAL NOT NULL,
    held INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS limit_members_key ON limit_members (key);
CREATE TABLE IF NOT EXISTS limit_state (
    key TEXT PRIMARY KEY,
    requests_level REAL,
    requests_at REAL,
    tokens_level REAL,
    tokens_at REAL,
    calls INTEGER NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0,
    started_at REAL NOT NULL
) WITHOUT ROWID;
"""

# Members alive in this process: a member row of this pid whose token is not in here was left
# by a run that ended without leaving (its event loop closed), and holds nothing any more.
_LIVE_MEMBERS: set[str] = set()


class StoreLimits:
    """The ``SharedLimits`` of one judge's key in one limits file (see the module docstring)."""

    def __init__(self, path: str, settings: LimitSettings):
        self.path = path
        self.settings = settings
        self.key = settings.key
        self.token = uuid.uuid4().hex
        self.me = ProcessIdentity.current()
        self._db: sqlite3.Connection | None = None
        self._last_reap = 0.0
        self._full = False  # the last try found every slot taken
        self._heartbeat: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ connection

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            db = connect(self.path, what="judge limits file", timeout=10.0)
            try:
                ensure_schema(db, what="judge limits file", path=self.path, prefix="limit",
                              script=_SCHEMA, version=SCHEMA_VERSION)
            except BaseException:
                db.close()
                raise
            self._db = db
        return self._db

    def _write(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """``operation`` in one ``BEGIN IMMEDIATE`` transaction (the write lock taken first)."""
        db = self._conn()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                result = operation(db)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return result
        except sqlite3.Error as exc:
            raise StoreError(f"judge limits file {self.path!r}: {exc}") from None

    # ------------------------------------------------------------------ membership

    async def join(self) -> None:
        self._write(self._join)
        _LIVE_MEMBERS.add(self.token)
        self._heartbeat = asyncio.get_running_loop().create_task(self._beat())

    def _join(self, db: sqlite3.Connection) -> None:
        now = time.time()
        self._reap(db, now)
        others = db.execute("SELECT COUNT(*) FROM limit_members WHERE key = ?",
                            (self.key,)).fetchone()[0]
        if not others:  # nobody shares this key now: a new run, with a fresh budget
            db.execute("DELETE FROM limit_state WHERE key = ?", (self.key,))
        db.execute("INSERT OR IGNORE INTO limit_state (key, started_at) VALUES (?, ?)",
                   (self.key, now))
        me = self.me
        db.execute("INSERT INTO limit_members (token, key, pid, host, boot_id, start, seen_at) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (self.token, self.key, me.pid, me.host, me.boot_id, me.start, now))

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT)
            with contextlib.suppress(StoreError):
                self._write(lambda db: db.execute(
                    "UPDATE limit_members SET seen_at = ? WHERE token = ?",
                    (time.time(), self.token)))

    def _gone(self, token: str, pid: int, host: str, boot_id: str | None, start: str | None,
              seen_at: float, *, now: float) -> bool:
        if pid == self.me.pid and host == self.me.host:
            return token not in _LIVE_MEMBERS
        liveness = ProcessIdentity(pid, host, boot_id, start).liveness()
        if liveness == "unknown":
            return seen_at < now - LEASE
        return liveness == "gone"

    def _reap(self, db: sqlite3.Connection, now: float) -> int:
        """Remove gone members of this key, and with them the slots they held; those slots."""
        self._last_reap = now
        members = db.execute("SELECT token, pid, host, boot_id, start, seen_at, held FROM "
                             "limit_members WHERE key = ?", (self.key,)).fetchall()
        gone = [row for row in members if self._gone(*row[:6], now=now)]
        db.executemany("DELETE FROM limit_members WHERE token = ?", [(r[0],) for r in gone])
        return sum(int(r[6]) for r in gone)

    def _held(self, db: sqlite3.Connection) -> int:
        return int(db.execute("SELECT COALESCE(SUM(held), 0) FROM limit_members WHERE key = ?",
                              (self.key,)).fetchone()[0])

    # ------------------------------------------------------------------ slots and budget

    async def acquire(self, want_slot: bool,
                      requests: float) -> tuple[str | None, str | None, float] | str:
        if want_slot and self._full:
            # While every slot is taken, a waiting process looks before taking the write lock
            # (WAL readers never wait) instead of queueing for it at each try.
            if (self._held(self._conn()) >= self.settings.max_concurrency
                    and time.time() - self._last_reap < _REAP_EVERY):
                return FULL
        outcome = self._write(lambda db: self._acquire(db, want_slot, requests))
        self._full = outcome == FULL
        return outcome

    def _acquire(self, db: sqlite3.Connection, want_slot: bool,
                 requests: float) -> tuple[str | None, str | None, float] | str:
        calls, tokens, cost = db.execute(
            "SELECT calls, tokens, cost FROM limit_state WHERE key = ?", (self.key,)).fetchone()
        spent = self.settings.spent(calls, tokens, cost)
        if spent is not None:
            return None, spent, 0.0
        slot = None
        if want_slot:
            held = self._held(db)
            now = time.time()
            if held >= self.settings.max_concurrency and now - self._last_reap >= _REAP_EVERY:
                held -= self._reap(db, now)
            if held >= self.settings.max_concurrency:
                return FULL
            slot = self.token
            db.execute("UPDATE limit_members SET held = held + 1 WHERE token = ?", (self.token,))
        if self.settings.has_budget:
            db.execute("UPDATE limit_state SET calls = calls + 1 WHERE key = ?", (self.key,))
        wait = self._pace(db, requests, 0.0, 0.0) if requests else 0.0
        return slot, None, wait

    async def release(self, slot: str | None, tokens: int, cost: float,
                      token_debt: float) -> None:
        def write(db: sqlite3.Connection) -> None:
            if slot is not None:
                db.execute("UPDATE limit_members SET held = held - 1 WHERE token = ? AND "
                           "held > 0", (self.token,))
            if self.settings.has_budget and (tokens or cost):
                db.execute("UPDATE limit_state SET tokens = tokens + ?, cost = cost + ? "
                           "WHERE key = ?", (tokens, cost, self.key))
            if token_debt:
                db.execute("UPDATE limit_state SET tokens_level = tokens_level - ? "
                           "WHERE key = ? AND tokens_level IS NOT NULL", (token_debt, self.key))
        self._write(write)

    # ------------------------------------------------------------------ rates

    async def pace(self, requests: float, tokens: float, token_debt: float) -> float:
        return self._write(lambda db: self._pace(db, requests, tokens, token_debt))

    def _pace(self, db: sqlite3.Connection, requests: float, tokens: float,
              token_debt: float) -> float:
        now = time.time()
        row = db.execute("SELECT requests_level, requests_at, tokens_level, tokens_at FROM "
                         "limit_state WHERE key = ?", (self.key,)).fetchone()
        wait = 0.0
        updates: list[tuple[str, float, float]] = []
        for name, per_minute, cost, debt, level, at in (
                ("requests", self.settings.requests_per_minute, requests, 0.0, row[0], row[1]),
                ("tokens", self.settings.tokens_per_minute, tokens, token_debt, row[2], row[3])):
            if per_minute is None or (not cost and not debt):
                continue
            if level is None:  # a new bucket starts full
                level, at = max(1.0, per_minute / 60.0), now
            level, seconds = bucket_reserve(level, at, now, per_minute, cost, debt)
            wait = max(wait, seconds)
            updates.append((name, level, now))
        for name, level, at in updates:
            db.execute(f"UPDATE limit_state SET {name}_level = ?, {name}_at = ? WHERE key = ?",
                       (level, at, self.key))
        return wait

    # ------------------------------------------------------------------ leaving

    async def close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
            self._heartbeat = None
        self.abandon()

    def abandon(self) -> None:
        """Leave: this member's slots go back at once (no await: safe without a loop)."""
        _LIVE_MEMBERS.discard(self.token)
        if self._heartbeat is not None:
            with contextlib.suppress(RuntimeError):  # its loop may be closed already
                self._heartbeat.cancel()
            self._heartbeat = None
        if self._db is None:
            return
        with contextlib.suppress(StoreError):
            self._write(lambda db: db.execute("DELETE FROM limit_members WHERE token = ?",
                                              (self.token,)))
        self._db.close()
        self._db = None
