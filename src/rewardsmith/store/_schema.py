"""The store's file format: its tables, the constants of its numbering and the rows it reads
back (``RunInfo``, ``Members``). The tables are described in ``rewardsmith.store._model``."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardsmith._system.process_identity import ProcessIdentity
from rewardsmith.errors import StoreError
from rewardsmith.store._blocks import (
    PENDING_SCHEMA,
)
from rewardsmith.store.status_codes import (
    STATUS_CODES,
    code_of,
)
from rewardsmith.types import (
    ComponentResult,
    Status,
    content_hash,
)

__all__ = ["ContentCache", "DEFAULT_STORE_PATH", "Members", "RunInfo", "SCHEMA_VERSION",
           "StoreFileChanged", "StoredCell", "group_result_keys"]

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
