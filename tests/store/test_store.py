"""The result store: results by (component, content), runs in input order, bad files, sharing
the file with the judge's tables, and several processes writing at once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rewardsmith import ComponentResult, Rollout, Status, StoreError
from rewardsmith.store import Store, group_result_keys

ROLLOUTS = [
    Rollout("a", "g1", "What is 2+2?", "4 #### 4", "4"),
    Rollout("b", "g1", "What is 2+2?", [{"role": "assistant", "content": "five"}], 4,
            {"source": "x", "tags": [1, 2]}, True),
    Rollout("c", "g2", [{"role": "user", "content": "hi"}], "", None),
    Rollout("d", "g2", "What is 2+2?", "4 #### 4", "4"),  # same content as "a", other group
]


def test_results_round_trip_and_only_reusable_ones_are_kept(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        store.record("comp", {
            "k-ok": ComponentResult(0.5, metrics={"tokens": 12.0}),
            "k-masked": ComponentResult(None, Status.MASKED),
            "k-error": ComponentResult.failed(Status.ERROR, "ValueError: no"),
            "k-timeout": ComponentResult.failed(Status.TIMEOUT, "timed out after 1 s"),
        })
        store.record("comp", {"k-ok": ComponentResult(0.9)})  # the first result stays
        found = store.lookup("comp", ["k-ok", "k-masked", "k-error", "k-timeout", "k-none"])
        assert found == {
            "k-ok": ComponentResult(0.5, metrics={"tokens": 12.0}),
            "k-masked": ComponentResult(None, Status.MASKED),
        }
        assert store.lookup("other", ["k-ok"]) == {}
        assert store.lookup_cells("comp", ["k-ok"]) == {"k-ok": found["k-ok"]}
        store.record("comp", {"k-plain": ComponentResult(1.0)})
        assert store.lookup_cells("comp", ["k-plain"]) == {"k-plain": 1.0}  # bare float


def test_runs_keep_order_ids_groups_and_exact_content(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        first = store.begin_run(ROLLOUTS, rubric_name="v1", rubric_id="abc", source="r.jsonl",
                                components=[{"name": "x"}])
        members = store.members(first)
        assert members.ids == ["a", "b", "c", "d"]
        assert members.groups == ["g1", "g1", "g2", "g2"]
        assert members.keys == [r.content_key() for r in ROLLOUTS]
        assert members.items[0] == members.items[3]  # one item per distinct content
        loaded = store.load_rollouts(first)
        assert loaded == ROLLOUTS
        assert [r.content_key() for r in loaded] == members.keys
        assert store.load_rollouts(first, [3, 1]) == [ROLLOUTS[1], ROLLOUTS[3]]
        assert store.rollouts_by_id(first, ["d", "zz"]) == {"d": ROLLOUTS[3]}

        info = store.get_run(first)
        assert (info.kind, info.status, info.size, info.rubric_name) == ("score", "running", 4,
                                                                          "v1")
        store.finish_run(first, {"rollouts": 4})
        assert store.get_run(first).summary == {"rollouts": 4}
        assert store.get_run(first).status == "done"

        second = store.begin_derived_run(first, kind="rescore", rubric_name="v2")
        assert store.get_run().id == second  # the latest
        assert store.get_run(second[:-2]).id == second  # a unique prefix
        assert store.members(second) == members  # the same rollouts, nothing copied
        assert [r.id for r in store.runs()] == [first, second]
        with pytest.raises(StoreError, match="not in this store"):
            store.get_run("nope")
        with pytest.raises(StoreError, match="matches several runs"):
            store.get_run("")


def test_column_by_position_reads_either_way(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        run = store.begin_run(ROLLOUTS)
        members = store.members(run)
        store.record("comp", {members.keys[0]: ComponentResult(1.0),
                              members.keys[1]: ComponentResult(None, Status.MASKED)})
        expected = [1.0, ComponentResult(None, Status.MASKED), None, 1.0]
        assert store.column("comp", members) == expected  # scans the component's results
        store.record("comp", {f"other-{i}": ComponentResult(0.0) for i in range(40)})
        assert store.column("comp", members) == expected  # probes, one per rollout
        assert store.column("unknown", members) == [None] * 4


def test_group_result_keys_depend_on_the_whole_group_and_the_place() -> None:
    keys = group_result_keys(["k1", "k2"])
    assert len(set(keys)) == 2
    assert group_result_keys(["k1", "k2"]) == keys
    assert group_result_keys(["k2", "k1"]) != keys[::-1]
    assert group_result_keys(["k1", "k3"])[0] != keys[0]


def test_bad_files_are_store_errors(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite, just text " * 100)
    with pytest.raises(StoreError, match="not a readable rewardsmith store"):
        Store(junk)
    with pytest.raises(StoreError, match="does not exist"):
        Store(tmp_path / "missing-dir" / "s.db")
    newer = tmp_path / "newer.db"
    Store(newer).close()
    with sqlite3.connect(newer) as db:
        db.execute("UPDATE store_meta SET value = '99' WHERE key = 'schema'")
    with pytest.raises(StoreError, match="newer rewardsmith"):
        Store(newer)


def test_shares_the_file_with_judge_tables(tmp_path: Path) -> None:
    path = tmp_path / "run.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE judge_records (key TEXT PRIMARY KEY, value REAL)")
        db.execute("INSERT INTO judge_records VALUES ('k', 0.25)")
    with Store(path) as store:
        store.begin_run(ROLLOUTS)
        store.record("comp", {"k": ComponentResult(1.0)})
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT * FROM judge_records").fetchall() == [("k", 0.25)]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {t for t in tables if not t.startswith("store_")} == {"judge_records"}


WRITER = textwrap.dedent("""
    import sys
    from rewardsmith import ComponentResult, Rollout
    from rewardsmith.store import Store

    path, name = sys.argv[1], sys.argv[2]
    with Store(path) as store:
        for step in range(25):
            shared = [Rollout(f"s{i}", "g", "p", f"shared {i}") for i in range(10)]
            own = [Rollout(f"{name}{step}-{i}", "g", "p", f"{name} {step} {i}") for i in range(10)]
            run = store.begin_run(shared + own, rubric_name=name)
            keys = store.members(run).keys
            store.record("shared", {k: ComponentResult(float(i)) for i, k in enumerate(keys[:10])})
            store.record(name, {k: ComponentResult(1.0) for k in keys})
            assert len(store.lookup(name, keys)) == 20
            store.finish_run(run, {"step": step})
""")


def test_two_processes_write_one_store_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    Store(path).close()
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), name],
                                stderr=subprocess.PIPE, text=True) for name in ("p", "q")]
    for writer in writers:
        _, errors = writer.communicate(timeout=60)
        assert writer.returncode == 0, errors
    with Store(path) as store:
        runs = store.runs()
        assert len(runs) == 50 and all(r.status == "done" and r.size == 20 for r in runs)
        for run in runs:
            members = store.members(run.id)
            assert len(members) == 20
            assert len(store.lookup(run.rubric_name, members.keys)) == 20
            shared = store.lookup("shared", members.keys[:10])
            assert [shared[k].value for k in members.keys[:10]] == [float(i) for i in range(10)]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT count(*) FROM store_items").fetchone() == (10 + 2 * 25 * 10,)


def test_content_keys_are_those_stores_already_hold() -> None:
    # Stored results are found by content key: the key of a rollout must never change.
    from rewardsmith.types import content_hash

    for rollout in ROLLOUTS:
        old = content_hash(rollout.prompt, rollout.completion, rollout.answer, rollout.metadata,
                           rollout.truncated, length=32)
        assert rollout.content_key() == old
    assert ROLLOUTS[0].content_key() == ROLLOUTS[3].content_key()
    # Keys written by earlier versions of this library:
    assert ROLLOUTS[0].content_key() == "f4bb42a7fd19f7263ce592feb8542e84"
    assert ROLLOUTS[1].content_key() == "0783e027909018c626180544440be37d"


def test_cells_by_key_and_by_number_agree(tmp_path: Path) -> None:
    many = [Rollout(str(i), str(i // 4), "p", f"text {i}", i) for i in range(3000)]
    keys = [r.content_key() for r in many]
    with Store(tmp_path / "s.db") as store:
        store.begin_run(many, rubric_name="r", rubric_id="x")
        cells: list[float | ComponentResult] = [
            float(i) if i % 7 else ComponentResult(None, Status.MASKED) for i in range(3000)]
        cells[5] = ComponentResult.failed(Status.ERROR, "ValueError: no")  # not kept
        cells[6] = ComponentResult(0.25, metrics={"tokens": 3.0})
        store.record_cells("comp", keys[:2000], cells[:2000])
        # Dense numbers (one range query) and sparse ones (by number) in this process ...
        dense = store.lookup_cells("comp", keys)
        sparse = store.lookup_cells("comp", keys[::500])
    # ... and by key in a process that did not begin the run.
    with Store(tmp_path / "s.db") as other:
        by_key = other.lookup_cells("comp", keys)
    assert dense == by_key
    assert set(dense) == {keys[i] for i in range(2000) if i != 5}
    assert dense[keys[1]] == 1.0 and dense[keys[7]] == ComponentResult(None, Status.MASKED)
    assert dense[keys[6]] == ComponentResult(0.25, metrics={"tokens": 3.0})
    assert sparse == {k: dense[k] for k in keys[::500] if k in dense}


def test_item_numbers_of_new_and_known_content_are_the_stored_ones(tmp_path: Path) -> None:
    first = [Rollout(str(i), "g", "p", f"text {i % 50}", None) for i in range(120)]  # repeats
    second = [Rollout(str(i), "g", "p", f"text {i}", None) for i in range(30, 90)]  # overlaps
    with Store(tmp_path / "s.db") as store:
        runs = [store.begin_run(first), store.begin_run(second)]
        numbers = {run: store.members(run) for run in runs}
        for run in runs:
            store.record_cells(f"comp-{run}", numbers[run].keys,
                               [float(i) for i in range(len(numbers[run]))])
    db = sqlite3.connect(tmp_path / "s.db")
    by_key = dict(db.execute("SELECT key, id FROM store_items"))
    assert len(by_key) == 90
    for run in runs:
        members = numbers[run]
        assert members.items == [by_key[key] for key in members.keys]
        stored = dict(db.execute(
            "SELECT r.item, r.value FROM store_results r JOIN store_components c "
            "ON c.id = r.component WHERE c.identity = ?", (f"comp-{run}",)))
        # The first result of each content stays; each is stored under its own item.
        expected: dict[int, float] = {}
        for position, item in enumerate(members.items):
            expected.setdefault(item, float(position))
        assert stored == expected
