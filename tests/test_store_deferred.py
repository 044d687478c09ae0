"""Runs recorded in bulk (``begin_run(defer=True)``): pending blocks settle into the indexed
tables when first needed, and reads see exactly what a row-by-row recording would give."""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rewardsmith import ComponentResult, Rollout, Status, StoreError
from rewardsmith.store import Store
from rewardsmith.store_pending import pack_results, unpack_results


def _rollouts(count: int) -> list[Rollout]:
    return [Rollout(f"r{i}", f"g{i // 4}", f"prompt {i // 4} é", f"answer {i % 3}", str(i % 3),
                    {"n": i}, i % 7 == 0) for i in range(count)]


CELLS = [1.0, ComponentResult(None, Status.MASKED), ComponentResult(0.5, Status.OK, None,
                                                                     {"len": 3.0}),
         ComponentResult(None, Status.ERROR, "boom"), 0.25, ComponentResult(None, Status.TIMEOUT)]


def test_packed_blocks_keep_every_reusable_cell_and_drop_failures() -> None:
    keys = [f"k{i}" for i in range(len(CELLS))]
    packed = pack_results(keys, CELLS, seconds=[0.1 * i for i in range(len(CELLS))])
    assert packed is not None
    rows = unpack_results(*packed)
    assert [row[0] for row in rows] == ["k0", "k1", "k2", "k4"]  # error, timeout dropped
    assert rows[0][1:4] == (1.0, 0, None) and rows[3][1] == 0.25
    assert rows[1][1] is None and rows[1][2] != 0  # masked
    assert rows[2][1] == 0.5 and rows[2][4] == '{"len": 3.0}'
    assert [round(row[5] or 0, 6) for row in rows] == [0.0, 0.1, 0.2, 0.4]
    assert pack_results(["a"], [ComponentResult(None, Status.ERROR, "x")]) is None
    nan_rows = unpack_results(*pack_results(["n"], [math.nan]))  # type: ignore[misc]
    assert math.isnan(nan_rows[0][1] or 0.0)


def _record_run(path: Path, rollouts: list[Rollout], *, defer: bool) -> str:
    with Store(path) as store:
        run = store.begin_run(rollouts, defer=defer)
        keys = [r.content_key() for r in rollouts]
        for start in range(0, len(rollouts), 5):
            chunk = slice(start, start + 5)
            store.record_cells("comp", keys[chunk], [CELLS[i % len(CELLS)] for i in
                                                     range(start, min(start + 5, len(keys)))],
                               seconds=[0.001 * i for i in range(start, min(start + 5,
                                                                            len(keys)))])
        store.finish_run(run)
    return run


def _snapshot(path: Path, run: str) -> tuple[object, ...]:
    with Store(path) as store:
        members = store.members(run)
        rollouts = store.load_rollouts(run)
        column = store.column("comp", members)
        found = store.lookup_cells("comp", members.keys)
    return (members.ids, members.groups, members.keys, rollouts, column,
            [found.get(k) for k in members.keys])


def test_a_deferred_run_reads_back_as_a_row_by_row_one(tmp_path: Path) -> None:
    rollouts = _rollouts(23)
    deferred = _record_run(tmp_path / "d.db", rollouts, defer=True)
    direct = _record_run(tmp_path / "r.db", rollouts, defer=False)
    with sqlite3.connect(tmp_path / "d.db") as db:  # nothing indexed: blocks only
        assert db.execute("SELECT count(*) FROM store_results").fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM store_pending_results").fetchone()[0] == 5
    assert _snapshot(tmp_path / "d.db", deferred) == _snapshot(tmp_path / "r.db", direct)
    with sqlite3.connect(tmp_path / "d.db") as db:  # read from the blocks, not settled
        assert db.execute("SELECT count(*) FROM store_pending_results").fetchone()[0] == 5


def test_too_many_pending_results_are_settled_into_the_tables(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardsmith import store as store_module

    rollouts = _rollouts(23)
    deferred = _record_run(tmp_path / "d.db", rollouts, defer=True)
    direct = _record_run(tmp_path / "r.db", rollouts, defer=False)
    monkeypatch.setattr(store_module, "_PENDING_IN_MEMORY", 0)
    with Store(tmp_path / "d.db") as store:
        store.lookup_cells("comp", ["nothing"])
    with sqlite3.connect(tmp_path / "d.db") as db:
        assert db.execute("SELECT count(*) FROM store_pending_results").fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM store_pending_rollouts").fetchone()[0] == 0
        seconds = db.execute("SELECT seconds FROM store_results ORDER BY item").fetchall()
        assert seconds[0][0] == 0.0 and seconds[1][0] == pytest.approx(0.001)
    assert _snapshot(tmp_path / "d.db", deferred) == _snapshot(tmp_path / "r.db", direct)


def test_its_own_run_reads_back_while_deferring(tmp_path: Path) -> None:
    rollouts = _rollouts(6)
    with Store(tmp_path / "s.db") as store:
        run = store.begin_run(rollouts, defer=True)
        keys = [r.content_key() for r in rollouts]
        store.record_cells("comp", keys[:3], [1.0, 2.0, 3.0])
        assert store.lookup_cells("comp", keys) == {}  # its own blocks: not looked up
        assert [r.id for r in store.load_rollouts(run)] == [r.id for r in rollouts]
        store.finish_run(run)
        assert store.lookup_cells("comp", keys) == dict(zip(keys[:3], [1.0, 2.0, 3.0]))
        assert store.column("comp", store.members(run)) == [1.0, 2.0, 3.0, None, None, None]
        positions = [r.id for r in store.load_rollouts(run, [5, 1, 1])]
        assert positions == ["r1", "r5"]


def test_a_killed_deferred_run_is_settled_and_reused_by_the_next_open(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    script = textwrap.dedent(f"""
        import os
        from rewardsmith import Rollout
        from rewardsmith.store import Store
        rollouts = [Rollout(f"r{{i}}", "g", "p", f"c{{i}}") for i in range(10)]
        store = Store({str(path)!r})
        store.begin_run(rollouts, defer=True)
        store.record_cells("comp", [r.content_key() for r in rollouts[:4]], [1.0] * 4)
        os._exit(9)  # no finish, no close
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert done.returncode == 9, done.stderr
    rollouts = [Rollout(f"r{i}", "g", "p", f"c{i}") for i in range(10)]
    with Store(path) as store:
        (run,) = store.runs()
        assert run.status == "killed" and len(store.members(run.id)) == 10
        found = store.lookup_cells("comp", [r.content_key() for r in rollouts])
        assert sorted(found.values()) == [1.0] * 4


def test_a_read_only_file_with_pending_blocks_is_read_as_it_is(
        tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    run = _record_run(path, _rollouts(9), defer=True)
    before = path.read_bytes()
    path.chmod(0o444)
    tmp_path.chmod(0o555)
    try:
        with Store(path) as store:
            assert store.read_only
            assert len(store.load_rollouts(run)) == 9
            assert store.column("comp", store.members(run))[0] == 1.0
    finally:
        tmp_path.chmod(0o755)
        path.chmod(0o644)
    assert path.read_bytes() == before


def test_a_store_opened_for_reading_reads_pending_blocks(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    run = _record_run(path, _rollouts(9), defer=True)
    with Store(path, read_only=True) as store:
        assert store.read_only and len(store.members(run)) == 9
        assert store.column("comp", store.members(run))[4] == 0.25


@pytest.mark.parametrize("text", ["", "plain", "é ü 日本", "quote \" back \\ slash", "\n\t\r\x00\x1f",
                                  "\u2028\u2029", "\ud800 lone surrogate", "emoji 🎉", "</script>"])
def test_the_fast_content_json_is_the_stable_encoders_text(text: str) -> None:
    from rewardsmith.types import stable_json

    for truncated in (True, False):
        rollout = Rollout("i", "g", text, text[::-1], text + "!", {}, truncated)
        assert rollout.content_json() == stable_json(
            [rollout.prompt, rollout.completion, rollout.answer, {}, truncated])
    # Anything else takes the encoder's own path.
    odd = Rollout("i", "g", [{"role": "user", "content": text}], text, 3, {"b": 1, "a": 2}, True)
    assert odd.content_json() == stable_json([odd.prompt, odd.completion, 3,
                                              {"a": 2, "b": 1}, True])


def test_a_run_recorded_in_the_background_is_whole_before_it_is_read(tmp_path: Path) -> None:
    rollouts = _rollouts(20_000)
    known: dict[int, tuple[str, str]] = {}
    with Store(tmp_path / "s.db") as store:
        run = store.begin_run_background(rollouts, known=known)
        keys = [r.content_key() for r in rollouts[:5]]
        store.record_cells("comp", keys, [1.0] * 5)  # while the rollouts are being written
        assert len(store.members(run)) == 20_000  # waits for the background write
        store.finish_run(run)
        assert store.get_run(run).status == "done"
    assert all(known[id(r)][1] == r.content_key() for r in rollouts[::997])
    with Store(tmp_path / "s.db") as store:
        assert store.column("comp", store.members(run))[:6] == [1.0] * 5 + [None]


def test_a_background_recording_that_fails_is_reported(tmp_path: Path) -> None:
    class Unencodable(Rollout):
        def content_json(self) -> str:
            raise ValueError("cannot encode this rollout")

    rollouts = [*_rollouts(3), Unencodable("bad", "g", "p", "c")]
    with Store(tmp_path / "s.db") as store:
        run = store.begin_run_background(rollouts)
        with pytest.raises(StoreError, match="cannot encode this rollout"):
            store.finish_run(run)


def test_a_run_killed_before_its_rollouts_were_written_is_listed_and_refused_for_rescore(
        tmp_path: Path) -> None:
    from rewardsmith import Component, Rubric
    from rewardsmith.rescore import rescore

    path = tmp_path / "s.db"
    with Store(path) as store:
        run = store.begin_run_background(_rollouts(4))
        store._wait_begun()
        store._db.execute("DELETE FROM store_pending_rollouts")  # as if killed before the write
    with Store(path) as store:
        assert [r.id for r in store.runs()] == [run]
        with pytest.raises(StoreError, match="holds none of its 4 rollouts"):
            rescore(store, Rubric([Component("n", "number")]), run=run)
