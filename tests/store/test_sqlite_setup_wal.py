"""Setting up WAL waits for another connection that holds the new file, as any busy wait does.

SQLite answers a journal-mode change with "database is locked" at once, without its busy
handler, while another connection holds a write lock: two engines opening one new judge store
at the same moment failed that way on a loaded machine."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from rewardsmith.errors import StoreError
from rewardsmith.store.sqlite_setup import connect


def _held(path: Path, seconds: float) -> threading.Thread:
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE IF NOT EXISTS t (x)")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO t VALUES (1)")

    def release() -> None:
        time.sleep(seconds)
        holder.execute("COMMIT")
        holder.close()

    thread = threading.Thread(target=release)
    thread.start()
    return thread


def test_wal_setup_waits_for_a_writer_on_the_new_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    thread = _held(path, 0.4)
    started = time.monotonic()
    conn = connect(path, what="judge store", timeout=10)
    waited = time.monotonic() - started
    thread.join()
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert waited >= 0.3  # it waited for the writer instead of failing at once
    conn.close()


def test_wal_setup_gives_up_after_its_timeout(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    thread = _held(path, 1.5)
    with pytest.raises(StoreError, match="locked"):
        connect(path, what="judge store", timeout=0.3)
    thread.join()
