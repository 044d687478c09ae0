"""The one SQLite setup for rewardsmith's files (the result store and the judge ledger).

- ``connect``: WAL mode (checked: a network file system may refuse it), ``synchronous =
  NORMAL`` (in WAL mode a killed process loses nothing; only power loss can drop the latest
  commits), a busy timeout, autocommit so transactions are explicit. A read-only connection
  uses SQLite's ``mode=ro`` URI, or ``immutable=1`` when even the WAL index cannot be opened
  (a read-only folder).
- ``read_only_reason``: why a file cannot be written (its mode, its folder), so writing
  commands can say "read-only" before they start and reading ones can still open it.
- ``ensure_schema``: create the tables, record the schema version in a ``<prefix>_meta``
  table, apply migrations from older versions, refuse files from newer ones.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import quote

from rewardsmith.errors import StoreError

__all__ = ["connect", "ensure_schema", "is_busy_error", "is_read_only_error", "read_only_reason",
           "statements"]


def read_only_reason(path: str | Path) -> str | None:
    """Why ``path`` (or, for a new file, its folder) cannot be written; None when it can.

    A file without any write permission bit counts as read-only even for root, who could
    write it anyway: the owner marked it so."""
    target = Path(path)
    try:
        if target.exists():
            mode = target.stat().st_mode
            if not os.access(target, os.W_OK) or mode & 0o222 == 0:
                return f"file mode {mode & 0o777:04o}"
        folder = target.resolve().parent
        if folder.is_dir():
            folder_mode = folder.stat().st_mode
            if not os.access(folder, os.W_OK) or folder_mode & 0o222 == 0:
                return f"its folder {str(folder)!r} cannot be written"
    except OSError as exc:
        return f"cannot check: {exc.strerror or exc}"
    return None


def is_read_only_error(exc: BaseException) -> bool:
    """Whether a SQLite error says the file or its folder cannot be written."""
    text = str(exc).lower()
    return "readonly" in text or "read-only" in text or "read only" in text


def is_busy_error(exc: BaseException) -> bool:
    """Whether a SQLite error says another connection holds the lock wanted."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED (and their extended codes)
    return "locked" in str(exc).lower() or "busy" in str(exc).lower()


def _uri(path: str, options: str) -> str:
    return f"file:{quote(os.path.abspath(path))}?{options}"


def _read_only(path: str, what: str, timeout: float) -> sqlite3.Connection:
    if not os.path.isfile(path):
        raise StoreError(f"no {what} at {path!r}")
    for options in ("mode=ro", "immutable=1"):
        conn = sqlite3.connect(_uri(path, options), uri=True, timeout=timeout,
                               isolation_level=None, check_same_thread=False)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError as exc:
            conn.close()
            if "not a database" in str(exc) or "malformed" in str(exc):
                raise StoreError(f"{what} {path!r} cannot be opened: not a readable rewardsmith "
                             f"{what} ({exc})") from None
            continue
        if options == "immutable=1":
            wal = f"{path}-wal"
            if os.path.exists(wal) and os.path.getsize(wal) > 0:
                conn.close()
                raise StoreError(
                    f"{what} {path!r} is read-only and its last changes are still in {wal!r} "
                    f"(a run was stopped before they were merged): open it once where it can "
                    f"be written, or copy the folder somewhere writable")
        return conn
    raise StoreError(f"{what} {path!r} is read-only and cannot be opened for reading either")


def connect(path: str | Path, *, what: str, timeout: float = 60.0, read_only: bool = False,
            wal: bool = True) -> sqlite3.Connection:
    """A connection to ``path`` (created when missing, unless ``read_only``). ``what`` names
    the file in errors ("store", "judge store"). ``wal=False`` leaves the journal mode alone
    (a second connection to a file another connection set up)."""
    path = str(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise StoreError(f"cannot open {what} {path!r}: folder {folder!r} does not exist")
    if read_only:
        conn = _read_only(path, what, timeout)
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        return conn
    try:
        conn = sqlite3.connect(path, timeout=timeout, isolation_level=None,
                               check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {what} {path!r}: {exc}") from None
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        if wal:
            mode = _journal_mode_wal(conn, timeout)
            if str(mode).lower() != "wal":
                raise StoreError(f"{what} {path!r}: cannot use WAL mode (got {mode!r}); is it "
                                 f"on a network file system?")
            conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.DatabaseError as exc:
        conn.close()
        if is_read_only_error(exc):
            reason = read_only_reason(path) or "the file system refused a write"
            raise StoreError(f"{what} {path!r} is read-only ({reason})") from None
        if "not a database" in str(exc) or "malformed" in str(exc):
            raise StoreError(f"{what} {path!r} cannot be opened: not a readable rewardsmith "
                             f"{what} ({exc})") from None
        raise StoreError(f"cannot open {what} {path!r}: {exc}") from None
    except BaseException:
        conn.close()
        raise
    return conn


def _journal_mode_wal(conn: sqlite3.Connection, timeout: float) -> str:
    """Set WAL mode, waiting out other connections that set up the same new file at once.

    Changing the journal mode needs the file to itself, and SQLite answers "database is
    locked" at once, without its busy handler, when two connections would otherwise wait for
    each other (two engines opening one new judge store together did)."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if not is_busy_error(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


def statements(script: str) -> list[str]:
    """The statements of a schema script (no ``;`` inside a statement)."""
    return [part.strip() for part in script.split(";") if part.strip()]


def ensure_schema(conn: sqlite3.Connection, *, what: str, path: str, prefix: str, script: str,
                  version: int, migrations: Mapping[int, Sequence[str]] | None = None,
                  read_only: bool = False) -> int:
    """Create the tables of ``script`` and the ``<prefix>_meta`` table (key, value), record
    ``version`` as its ``schema`` entry, apply ``migrations[v]`` to a file at version ``v``
    until it reaches ``version``. Returns the version the file had (``version`` when new).
    Read-only: nothing is created; a file without the tables is not ours."""
    meta = f"{prefix}_meta"
    try:
        if read_only:
            exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                  (meta,)).fetchone()
            if exists is None:
                raise StoreError(f"{path!r} holds no {what} (no {meta} table)")
            row = conn.execute(f"SELECT value FROM {meta} WHERE key = 'schema'").fetchone()
            found = version if row is None else _version(row[0], what, path)
            _refuse_newer(found, version, what, path, prefix)
            return found
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {meta} (key TEXT PRIMARY KEY, "
                         f"value TEXT NOT NULL)")
            row = conn.execute(f"SELECT value FROM {meta} WHERE key = 'schema'").fetchone()
            found = version if row is None else _version(row[0], what, path)
            _refuse_newer(found, version, what, path, prefix)
            if row is not None:
                for step in range(found, version):
                    for statement in (migrations or {}).get(step, ()):
                        conn.execute(statement)
            for statement in statements(script):
                conn.execute(statement)
            conn.execute(f"INSERT OR REPLACE INTO {meta} VALUES ('schema', ?)", (str(version),))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        if is_read_only_error(exc):
            reason = read_only_reason(path) or "the file system refused a write"
            raise StoreError(f"{what} {path!r} is read-only ({reason})") from None
        raise StoreError(f"{what} {path!r}: cannot set up its tables: {exc}") from None
    return found


def _version(text: str, what: str, path: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise StoreError(f"{what} {path!r} has schema {text!r}, not a version number") from None


def _refuse_newer(found: int, version: int, what: str, path: str, prefix: str) -> None:
    if found > version:
        raise StoreError(f"{what} {path!r} was written by a newer rewardsmith ({prefix} schema "
                         f"{found}; "
                         f"this version reads up to {version}): upgrade rewardsmith")
