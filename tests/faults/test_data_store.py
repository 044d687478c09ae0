"""The store: readable when it cannot be written, one SQLite setup, one status encoding.

Before: ``runs``, ``rescore --dry-run`` and ``diff --store`` failed on a store that could not be
written (file mode 0444, a read-only folder), and writing commands failed with SQLite's own
words; the status-to-integer encoding was written out in two modules (and on disk, unversioned);
the store and the judge ledger each had their own copy of the connection setup.

As root, SQLite could write a 0444 file anyway: rewardsmith treats a file (or folder) without
any write permission bit as read-only all the same, so these tests mean the same as root.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rewardsmith import Rollout, Rubric, ScoreJob, StoreError
from rewardsmith.judge.ledger import SCHEMA_VERSION as LEDGER_SCHEMA_VERSION
from rewardsmith.judge.ledger import Ledger
from rewardsmith.store import SCHEMA_VERSION, Store
from rewardsmith.store.status_codes import STATUS_CODES, STATUS_ENCODING_VERSION, code_of, status_of
from rewardsmith.types import ComponentResult, Status

CLI = [sys.executable, "-m", "rewardsmith"]


def cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


@pytest.fixture
def scored_store(tmp_path: Path) -> Iterator[Path]:
    """A folder with a store holding one score run, its rollouts, scores and rubric."""
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "rubric.yaml").write_text("components:\n  correct: {reward: gsm8k}\n",
                                        encoding="utf-8")
    (folder / "v2.yaml").write_text("components:\n  correct: {reward: gsm8k}\n"
                                    "  format: {reward: marker, weight: 0.2}\n", encoding="utf-8")
    (folder / "r.jsonl").write_text("".join(
        json.dumps({"id": str(i), "prompt": f"q{i // 2}", "completion": f"#### {i % 3}",
                    "answer": "1"}) + "\n" for i in range(8)), encoding="utf-8")
    with (folder / "s.jsonl").open("w", encoding="utf-8") as handle:  # set up in-process
        ScoreJob(Rubric.from_yaml(folder / "rubric.yaml"), workers=0,
                 store=str(folder / "run.db")).run(folder / "r.jsonl", handle)
    yield folder
    folder.chmod(0o755)  # let pytest clean up


def read_only(folder: Path, *, whole_folder: bool) -> None:
    (folder / "run.db").chmod(0o444)
    if whole_folder:
        folder.chmod(0o555)


@pytest.mark.parametrize("whole_folder", [False, True], ids=["file-0444", "folder-0555"])
def test_reading_commands_work_on_a_read_only_store(scored_store: Path,
                                                    whole_folder: bool) -> None:
    folder = scored_store
    before = (folder / "run.db").read_bytes()
    read_only(folder, whole_folder=whole_folder)
    runs = cli("runs", "--store", "run.db", "--json", cwd=folder)
    assert runs.returncode == 0, runs.stderr
    assert [run["status"] for run in json.loads(runs.stdout)] == ["done"]
    plan = cli("rescore", "--store", "run.db", "--rubric", "v2.yaml", "--dry-run", "--json",
               cwd=folder)
    assert plan.returncode == 0, plan.stderr
    assert {c["name"]: c["reused"] for c in json.loads(plan.stdout)["plan"]["components"]} == \
        {"correct": 8, "format": 0}
    diff = cli("diff", "s.jsonl", "s.jsonl", "--store", "run.db", "--json", cwd=folder)
    assert diff.returncode == 0, diff.stderr
    assert json.loads(diff.stdout)["matched"] == 8
    assert (folder / "run.db").read_bytes() == before


@pytest.mark.parametrize("whole_folder", [False, True], ids=["file-0444", "folder-0555"])
def test_writing_commands_say_the_store_is_read_only(scored_store: Path,
                                                     whole_folder: bool) -> None:
    folder = scored_store
    read_only(folder, whole_folder=whole_folder)
    attempts = [
        ("score", "r.jsonl", "--rubric", "rubric.yaml", "--store", "run.db", "--workers", "0",
         "-o", "-"),
        ("rescore", "--store", "run.db", "--rubric", "v2.yaml", "-o", "-"),
        ("import-scores", "s.jsonl", "--rubric", "rubric.yaml", "--rollouts", "r.jsonl",
         "--store", "run.db"),
    ]
    for args in attempts:
        done = cli(*args, cwd=folder)
        assert done.returncode == 2, (args, done.stderr)
        assert "read-only" in done.stderr, (args, done.stderr)
        assert done.stdout == ""


def test_the_library_opens_a_read_only_store_for_reading(scored_store: Path) -> None:
    read_only(scored_store, whole_folder=False)
    with Store(scored_store / "run.db") as store:
        assert store.read_only and len(store.runs()) == 1
        with pytest.raises(StoreError, match="read-only"):
            store.begin_run([Rollout("x", "g", "q", "a")])


def test_a_store_from_schema_1_is_migrated_and_its_runs_kept(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Store(path) as store:
        run_id = store.begin_run([Rollout("1", "g", "q", "a")])
        store.finish_run(run_id)
    with sqlite3.connect(path) as db:  # make it what version 1 wrote
        for column in ("pid", "host", "boot_id", "process_start"):
            db.execute(f"ALTER TABLE store_runs DROP COLUMN {column}")
        db.execute("ALTER TABLE store_results DROP COLUMN seconds")
        db.execute("DROP TABLE store_pending_rollouts")
        db.execute("DROP TABLE store_pending_results")
        db.execute("UPDATE store_meta SET value = '1' WHERE key = 'schema'")
        db.execute("DELETE FROM store_meta WHERE key = 'status_encoding'")
    path.chmod(0o444)
    with Store(path) as store:  # read-only: read as it is, nothing migrated
        assert store.schema == 1 and [r.status for r in store.runs()] == ["done"]
    path.chmod(0o644)
    with Store(path) as store:
        assert store.schema == 1 and [r.id for r in store.runs()] == [run_id]
    with sqlite3.connect(path) as db:
        assert dict(db.execute("SELECT key, value FROM store_meta")) == {
            "schema": str(SCHEMA_VERSION), "status_encoding": str(STATUS_ENCODING_VERSION)}


def test_an_unknown_status_encoding_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    Store(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE store_meta SET value = '9' WHERE key = 'status_encoding'")
    with pytest.raises(StoreError, match="encodes statuses with version 9"):
        Store(path)


def test_statuses_on_disk_use_the_one_encoding(tmp_path: Path) -> None:
    assert [status_of(code_of(s)) for s in Status] == list(Status) == list(STATUS_CODES)
    with pytest.raises(ValueError, match="status code 7"):
        status_of(7)
    with Store(tmp_path / "s.db") as store:
        store.record("component", {"k1": ComponentResult(None, Status.MASKED),
                                   "k2": ComponentResult(0.5)})
    with sqlite3.connect(tmp_path / "s.db") as db:
        codes = sorted(row[0] for row in db.execute("SELECT status FROM store_results"))
    assert codes == sorted([code_of(Status.MASKED), code_of(Status.OK)])


def test_store_and_judge_ledger_share_one_setup(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    Store(path).close()
    ledger = Ledger(str(path))
    ledger.open()
    ledger.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        metas = {name: dict(db.execute(f"SELECT key, value FROM {name}"))["schema"]
                 for name in ("store_meta", "judge_meta")}
    assert metas == {"store_meta": str(SCHEMA_VERSION),
                     "judge_meta": str(LEDGER_SCHEMA_VERSION)}
    missing = tmp_path / "nowhere" / "x.db"
    with pytest.raises(StoreError) as store_error:
        Store(missing)
    with pytest.raises(StoreError) as ledger_error:
        Ledger(str(missing)).open()
    assert "folder" in str(store_error.value) and "does not exist" in str(store_error.value)
    assert str(ledger_error.value).replace("judge store", "store") == str(store_error.value)
