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
from rewardsmith.store._blocks import block_keys, block_positions, pack_results, unpack_results


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
    rows = unpack_results(block_keys(packed[0], None) or [], *packed[1:])
    assert [row[0] for row in rows] == ["k0", "k1", "k2", "k4"]  # error, timeout dropped
    assert rows[0][1:4] == (1.0, 0, None) and rows[3][1] == 0.25
    assert rows[1][1] is None and rows[1][2] != 0  # masked
    assert rows[2][1] == 0.5 and rows[2][4] == '{"len": 3.0}'
    assert [round(row[5] or 0, 6) for row in rows] == [0.0, 0.1, 0.2, 0.4]
    assert pack_results(["a"], [ComponentResult(None, Status.ERROR, "x")]) is None
    nan_packed = pack_results(["n"], [math.nan])
    assert nan_packed is not None
    nan_rows = unpack_results(["n"], *nan_packed[1:])
    assert math.isnan(nan_rows[0][1] or 0.0)


def test_blocks_name_their_rollouts_by_position_in_their_run() -> None:
    run_keys = [f"key{i}" for i in range(10)]
    consecutive = pack_results([3, 4, 5], [1.0, 0.5, 0.0])
    assert consecutive is not None and consecutive[0] == "@3:3"
    assert block_positions(consecutive[0]) == [3, 4, 5]
    assert block_keys(consecutive[0], run_keys) == ["key3", "key4", "key5"]
    # Dropped failures leave gaps: the positions are then listed.
    gapped = pack_results([0, 1, 2], [1.0, ComponentResult(None, Status.ERROR, "x"), 0.5])
    assert gapped is not None and gapped[0] == "@[0,2]"
    assert block_keys(gapped[0], run_keys) == ["key0", "key2"]
    # Keys as before; positions without their run's keys (not recorded yet) give none.
    assert block_keys('["a", "b"]', None) == ["a", "b"]
    assert block_keys("@8:3", run_keys) is None and block_keys("@0:1", None) is None


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


def test_a_batch_is_found_in_its_run_as_a_stretch_or_rollout_by_rollout() -> None:
    from rewardsmith.store._deferred import positions_in_run as _positions_in_run

    run = _rollouts(10)
    run.append(run[3])  # the same object twice: the later position, as the mapping says
    positions = dict(zip(map(id, run), range(len(run))))
    assert _positions_in_run(run[4:8], positions, run) == range(4, 8)
    assert list(_positions_in_run([run[5], run[2], run[9]], positions, run) or []) == [5, 2, 9]
    assert list(_positions_in_run([run[9], run[0]], positions, run) or []) == [9, 0]  # wraps
    assert list(_positions_in_run([run[3], run[4]], positions, run) or []) == [10, 4]
    assert _positions_in_run(run[8:] + [_rollouts(1)[0]], positions, run) is None  # a stranger
    assert _positions_in_run([], positions, run) == []
    copy = Rollout(**{f: getattr(run[1], f) for f in ("id", "group", "prompt", "completion",
                                                       "answer", "metadata", "truncated")})
    assert _positions_in_run([copy], positions, run) is None  # equal is not the same rollout


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
    from rewardsmith.store import _results as store_module

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
    with Store(tmp_path / "s.db") as store:
        recording = store.begin_recording(rollouts)
        run = recording.run_id
        keys = [r.content_key() for r in rollouts[:5]]
        store.record_cells("comp", keys, [1.0] * 5)  # while the rollouts are being written
        members = store.members(run)  # waits for the background write
        assert len(members) == 20_000
        assert all(members.keys[i] == rollouts[i].content_key() for i in range(0, 20_000, 997))
        store.finish_run(run)
        assert store.get_run(run).status == "done"
    with Store(tmp_path / "s.db") as store:
        assert store.column("comp", store.members(run))[:6] == [1.0] * 5 + [None]


def test_a_background_recording_that_fails_is_reported(tmp_path: Path) -> None:
    class Unencodable(Rollout):
        def content_json(self) -> str:
            raise ValueError("cannot encode this rollout")

    rollouts = [*_rollouts(3), Unencodable("bad", "g", "p", "c")]
    with Store(tmp_path / "s.db") as store:
        recording = store.begin_recording(rollouts)
        run = recording.run_id
        with pytest.raises(StoreError, match="cannot encode this rollout"):
            store.finish_run(run)


def test_a_run_killed_before_its_rollouts_were_written_is_listed_and_refused_for_rescore(
        tmp_path: Path) -> None:
    from rewardsmith import Component, Rubric
    from rewardsmith.jobs.rescore import rescore

    path = tmp_path / "s.db"
    with Store(path) as store:
        recording = store.begin_recording(_rollouts(4))
        run = recording.run_id
        store._wait_begun()
        store._db.execute("DELETE FROM store_pending_rollouts")  # as if killed before the write
    with Store(path) as store:
        assert [r.id for r in store.runs()] == [run]
        with pytest.raises(StoreError, match="holds none of its 4 rollouts"):
            rescore(store, Rubric([Component("n", "number")]), run=run)


@pytest.fixture
def helper_for_small_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of any size recorded by the helper process, as on a machine with cores to spare."""
    from rewardsmith.store import _background as store_background

    monkeypatch.setattr(store_background, "MIN_ROLLOUTS", 1)
    monkeypatch.setattr(store_background, "_cores", lambda: 2)


def _odd_rollouts() -> list[Rollout]:
    texts = ["plain", "", "ünïcode ✓ 🎉", "quote \" and \\ back", "line\nbreak\ttab",
             "\u2028\u2029", "\ud800 lone surrogate", "\x00 nul"]
    out = [Rollout(f"t{i}", f"g{i // 2}", text, text[::-1], text, {}, i % 2 == 0)
           for i, text in enumerate(texts)]
    out.append(Rollout("chat", "gc", [{"role": "user", "content": "hi"}],
                       [{"role": "assistant", "content": "#### 4"}], 4, {"b": [1, 2], "a": None},
                       False))
    out.append(Rollout("float", "gc", "p", "c", 0.1, {"x": 1.5}, True))
    return out


@pytest.mark.usefixtures("helper_for_small_runs")
def test_a_helper_process_records_the_same_rollouts_as_this_process(tmp_path: Path) -> None:
    rollouts = _odd_rollouts() * 3
    with Store(tmp_path / "helper.db") as store:
        recording = store.begin_recording(rollouts)
        run = recording.run_id
        store.finish_run(run)
        by_helper = store.members(run), store.load_rollouts(run)
    from rewardsmith.store import _background as store_background

    store_background.MIN_ROLLOUTS = 10**9  # (restored by the fixture)
    with Store(tmp_path / "here.db") as store:
        recording = store.begin_recording(rollouts)
        run = recording.run_id
        store.finish_run(run)
        by_thread = store.members(run), store.load_rollouts(run)
    assert by_helper[0].keys == by_thread[0].keys == [r.content_key() for r in rollouts]
    assert by_helper[1] == by_thread[1] == rollouts


def _unusual_values() -> list[Rollout]:
    """Fields whose JSON reads back as other values: the keys must not change."""
    from decimal import Decimal

    return [
        Rollout("dec", "u", "p", "c", Decimal("1.50")),  # not JSON: kept as its text
        Rollout("tuple", "u", ({"role": "user", "content": "hi"},), "c", (1, 2)),
        Rollout("none", "u", "p", "c", None, None),  # no metadata: as {}
        Rollout("falsy", "u", "p", "c", "a", [], False),
        Rollout("intkeys", "u", "p", "c", "a", {2: "b", 1: ["x", {"z": 1, "y": 2}]}),
        Rollout("floats", "u", "p", "c", math.nan, {"inf": math.inf, "neg": -0.0,
                                                   "big": 10**30, "tiny": 5e-324}),
        Rollout("flag", "u", "p", "c", "a", {}, 1),  # not a bool
        Rollout("surrogate", "u", "\udfff", "\ud800\udc00", "\U0001F600"),
    ]


@pytest.mark.usefixtures("helper_for_small_runs")
def test_a_helper_keeps_fields_and_the_first_reader_that_can_write_keeps_the_keys(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from rewardsmith.store import _background as store_background

    monkeypatch.setattr(store_background, "ROLLOUT_CHUNK", 3)
    plain = [r for r in _odd_rollouts() + _unusual_values()
             if not any("\ud800" <= ch <= "\udfff" for ch in r.content_json())]
    surrogates = [Rollout("lone", "s", "\udfff", "c", "a"),
                  Rollout("pair", "s", "p", "\ud800\udc00", "a")]  # JSON reads one character
    rollouts = plain[:6] + surrogates + plain[6:]
    expected = [r.content_key() for r in rollouts]
    path = tmp_path / "s.db"

    def stored_keys() -> list[str]:
        with sqlite3.connect(path) as db:
            return [row[0] for row in db.execute(
                "SELECT keys FROM store_pending_rollouts ORDER BY start")]

    with Store(path) as store:
        recording = store.begin_recording(rollouts)
        run = recording.run_id
        store.finish_run(run)
    # Blocks of three: fields only (no content JSON, no hashing beside the scoring), except
    # the one with surrogate code points, keyed at once (its JSON would read back otherwise).
    assert [text == "" for text in stored_keys()] == [True, True, False, True, True, True]
    assert json.loads(stored_keys()[2]) == expected[6:9]
    with Store(path, read_only=True) as store:
        assert store.members(run).keys == expected  # made from the fields, nothing written
    assert stored_keys().count("") == 5
    with Store(path) as store:
        assert store.members(run).keys == expected
    assert [key for text in stored_keys() for key in json.loads(text)] == expected  # kept
    with Store(path) as store:
        assert store.members(run).keys == expected


@pytest.mark.usefixtures("helper_for_small_runs")
@pytest.mark.parametrize("recorder", ["helper", "thread"])
def test_only_a_run_into_a_fresh_store_leaves_its_keys_to_readers(
        tmp_path: Path, recorder: str) -> None:
    import io
    import json

    from rewardsmith import Component, Rubric, ScoreJob, store_background

    if recorder == "thread":
        store_background.MIN_ROLLOUTS = 10**9  # (restored by the fixture)
    rubric = Rubric([Component("n", "number")])
    path = tmp_path / "s.db"
    first, second = _rollouts(60), _rollouts(90)[30:]

    def stored_keys(run: str) -> list[str]:
        with sqlite3.connect(path) as db:
            return [row[0] for row in db.execute(
                "SELECT keys FROM store_pending_rollouts WHERE run = ?", (run,))]

    one = ScoreJob(rubric, workers=0, store=path).run_rollouts(first, io.StringIO())
    assert stored_keys(one.summary.extra["run"]) == [""]  # nothing looked up: no key made
    result = ScoreJob(rubric, workers=0, store=path).run_rollouts(second, io.StringIO())
    assert result.summary.extra["reward_calls"] == 30  # 30 of them found in the first run
    # The first run's keys, made for the second run's look-ups, are kept; the second run made
    # every key of its own for its look-ups, and wrote them.
    assert json.loads(stored_keys(one.summary.extra["run"])[0]) == [
        r.content_key() for r in first]
    assert [json.loads(text) for text in stored_keys(result.summary.extra["run"])] == [
        [r.content_key() for r in second]]


def test_a_first_score_into_a_fresh_store_makes_no_content_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rewardsmith import Component, Rubric, ScoreJob, types
    from rewardsmith.jobs import recording
    from rewardsmith.store import _blocks as store_pending
    from rewardsmith.store import _model as store

    made: list[str] = []
    original = types.key_of_content

    def counted(text: str) -> str:
        made.append(text)
        return original(text)

    for module in (types, store, store_pending, recording):
        monkeypatch.setattr(module, "key_of_content", counted)
    rollouts = _rollouts(100)
    path = tmp_path / "s.db"
    result = ScoreJob(Rubric([Component("n", "number")]), workers=0, store=path).run_rollouts(
        rollouts, io.StringIO())
    assert made == []  # recorded by this process: fields only, results by position
    with Store(path) as reader:
        assert reader.members(result.summary.extra["run"]).keys == [
            original(r.content_json()) for r in rollouts]
    assert len(made) == 100  # made once, by the first reader, and kept
    with Store(path) as reader:
        reader.members(result.summary.extra["run"])
    assert len(made) == 100


@pytest.mark.usefixtures("helper_for_small_runs")
def test_keys_made_while_another_process_writes_are_used_and_not_waited_for(
        tmp_path: Path) -> None:
    import time

    rollouts = _rollouts(50)
    path = tmp_path / "s.db"
    with Store(path) as store:
        recording = store.begin_recording(rollouts)
        run = recording.run_id
        recording.record_rollout_cells("comp", rollouts[:8], [0.5] * 8)  # kept by position
        store.finish_run(run)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        with Store(path, timeout=30.0) as store:
            other.execute("BEGIN IMMEDIATE")  # another writer holds the file from here on
            started = time.monotonic()
            keys = store.members(run).keys
            assert keys == [r.content_key() for r in rollouts]
            assert store.lookup_cells("comp", keys[:10]) == {key: 0.5 for key in keys[:8]}
            assert time.monotonic() - started < 10  # not the 30 s the store would wait to write
            other.execute("ROLLBACK")
    finally:
        other.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT keys FROM store_pending_rollouts").fetchone() == ("",)


@pytest.mark.usefixtures("helper_for_small_runs")
def test_results_kept_by_position_are_found_by_later_runs_and_survive_settling(
        tmp_path: Path) -> None:
    from rewardsmith import Component, Engine, Rubric
    from rewardsmith.jobs.rescore import rescore

    rollouts = _rollouts(300)
    rubric = Rubric([Component("n", "number"), Component("len", "length",
                                                          params={"max_length": 10, "buffer": 5})])
    path = tmp_path / "s.db"
    with Store(path) as store:
        recording = store.begin_recording(rollouts)
        run = recording.run_id
        assert recording.holds_nothing()  # a fresh store: no look-up, no content key
        with Engine(rubric, workers=0, cache=recording, batch_rollouts=64) as engine:
            first = engine.score(rollouts)
        store.finish_run(run)
        texts = [row[0] for row in store._db.execute(
            "SELECT keys FROM store_pending_results").fetchall()]
        assert texts and all(text.startswith("@") for text in texts)
    with Store(path) as store:
        members = store.members(run)
        assert store.column(rubric.components[0].identity(), members) == [
            s.components["n"] for s in first]
        with Engine(rubric, workers=0, cache=store) as engine:
            again = engine.score(rollouts)
            assert engine.calls == 0  # every result found by content key
        assert [s.to_dict() for s in again] == [s.to_dict() for s in first]
        store._settle()
        assert store._db.execute("SELECT count(*) FROM store_pending_results").fetchone() == (0,)
        assert rescore(store, rubric, run=run).reward_calls == 0


@pytest.mark.usefixtures("helper_for_small_runs")
@pytest.mark.parametrize("broken", ["start", "handover"])
def test_a_helper_that_fails_leaves_the_recording_to_this_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: str) -> None:
    from multiprocessing import reduction

    from rewardsmith import workers

    def fail(*args: object) -> None:
        raise (OSError("no processes here") if broken == "start"
               else TypeError("no descriptor passing on this platform"))

    if broken == "start":
        monkeypatch.setattr(workers, "start_without_main", fail)
    else:
        monkeypatch.setattr(reduction, "send_handle", fail)
    rollouts = _rollouts(40)
    with Store(tmp_path / "s.db") as store:
        recording = store.begin_recording(rollouts)
        run = recording.run_id
        store.finish_run(run)
        assert store.members(run).keys == [r.content_key() for r in rollouts]


@pytest.mark.usefixtures("helper_for_small_runs")
def test_a_score_job_recorded_by_the_helper_rescores_from_the_store(tmp_path: Path) -> None:
    import io

    from rewardsmith import Component, Rubric, ScoreJob
    from rewardsmith.jobs.rescore import rescore

    rollouts = _rollouts(200)
    rubric = Rubric([Component("n", "number")])
    path = tmp_path / "s.db"
    result = ScoreJob(rubric, workers=0, store=path).run_rollouts(rollouts, io.StringIO())
    run = result.summary.extra["run"]
    with Store(path) as store:
        assert store.get_run(run).status == "done"
        assert store.members(run).keys == [r.content_key() for r in rollouts]
        again = rescore(store, rubric, run=run)
    assert again.reward_calls == 0
    assert [s.reward for s in again.scores] == [s.reward for s in result.scores]


_KILLED_WHILE_RECORDING = """
import multiprocessing, os, signal, sys, time
from rewardsmith import Rollout
from rewardsmith.store import _background as store_background
from rewardsmith.store import Store
store_background.MIN_ROLLOUTS = 1
store_background._cores = lambda: 2
rollouts = [Rollout(f"r{i}", f"g{i // 4}", "p", f"answer {i}", str(i)) for i in range(200)]
store = Store(sys.argv[1])
recording = store.begin_recording(rollouts)
run = recording.run_id
recording.record_rollout_cells("comp", rollouts[:10], [0.5] * 10)  # kept by position
print(run, flush=True)
deadline = time.monotonic() + 20
while not any(p.name == "rewardsmith-store-run" for p in multiprocessing.active_children()):
    if time.monotonic() > deadline:
        sys.exit(3)
    time.sleep(0.01)
time.sleep(1.0)  # the helper has its rollouts and waits for the word to write them
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_run_killed_while_its_helper_waits_still_gets_its_rollouts(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    path = tmp_path / "s.db"
    done = subprocess.run([sys.executable, "-c", _KILLED_WHILE_RECORDING, str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == -9, done.stderr[-2000:]
    run = done.stdout.split()[0]
    deadline = time.monotonic() + 30
    while True:  # the helper writes them once it sees its caller gone
        with Store(path) as store:
            if store._pending_rollouts(run):
                break
        assert time.monotonic() < deadline, "the helper did not write the rollouts"
        time.sleep(0.2)
    with Store(path) as store:
        assert store.get_run(run).status == "killed"
        keys = store.members(run).keys
        assert len(keys) == 200
        assert store.lookup_cells("comp", keys[:12]) == {key: 0.5 for key in keys[:10]}


@pytest.mark.parametrize("older", ["zlib", "text"])
def test_rollout_blocks_are_compressed_and_older_blocks_still_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, older: str) -> None:
    import json
    import zlib

    import zstandard

    from rewardsmith.store import _results as store_module

    rollouts = _rollouts(40)
    run = _record_run(tmp_path / "s.db", rollouts, defer=True)
    with sqlite3.connect(tmp_path / "s.db") as db:
        stored = db.execute("SELECT contents FROM store_pending_rollouts").fetchone()[0]
        assert isinstance(stored, bytes) and stored.startswith(b"\x28\xb5\x2f\xfd")  # zstd
        text = zstandard.ZstdDecompressor().decompress(stored)
        assert json.loads(text) == [json.loads(r.content_json()) for r in rollouts]
        # The same JSON as schema 5 wrote it (zlib), or as versions before it (plain text).
        db.execute("UPDATE store_pending_rollouts SET contents = ?",
                   (zlib.compress(text, 1) if older == "zlib" else text.decode("utf-8"),))
    with Store(tmp_path / "s.db") as store:
        assert store.load_rollouts(run) == rollouts
        assert store.members(run).keys == [r.content_key() for r in rollouts]
    monkeypatch.setattr(store_module, "_PENDING_IN_MEMORY", 0)  # settle the older blocks
    with Store(tmp_path / "s.db") as store:
        store.lookup_cells("comp", ["nothing"])
        assert store.load_rollouts(run) == rollouts
        assert store.column("comp", store.members(run))[0] == 1.0  # results found by key
    with sqlite3.connect(tmp_path / "s.db") as db:
        assert db.execute("SELECT count(*) FROM store_pending_rollouts").fetchone()[0] == 0


def test_a_damaged_block_of_fields_is_an_error_naming_it(tmp_path: Path) -> None:
    import io
    import json

    from rewardsmith import Component, Rubric, ScoreJob

    rollouts = _rollouts(30)
    path = tmp_path / "s.db"
    result = ScoreJob(Rubric([Component("n", "number")]), workers=0, store=path).run_rollouts(
        rollouts, io.StringIO())
    run = result.summary.extra["run"]
    with Store(path) as store:
        assert store.load_rollouts(run) == rollouts  # fields, read back whole
        assert store.load_rollouts(run, [29, 3]) == [rollouts[3], rollouts[29]]
    with sqlite3.connect(path) as db:
        db.execute("UPDATE store_pending_rollouts SET ids = ?",
                   (json.dumps([r.id for r in rollouts[:-1]]),))
    with Store(path) as store, pytest.raises(StoreError, match="position 0 is damaged: 29 ids"):
        store.load_rollouts(run)


def test_rollouts_at_positions_are_found_across_blocks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardsmith.store import _blocks as store_pending

    monkeypatch.setattr(store_pending, "ROLLOUT_CHUNK", 4)  # 23 rollouts in 6 blocks
    rollouts = _rollouts(23)
    run = _record_run(tmp_path / "s.db", rollouts, defer=True)
    with sqlite3.connect(tmp_path / "s.db") as db:
        assert db.execute("SELECT count(*) FROM store_pending_rollouts").fetchone()[0] == 6
    with Store(tmp_path / "s.db") as store:
        picked = store.load_rollouts(run, [22, 0, 5, 5, 9, 7, 4])
        assert [r.id for r in picked] == ["r0", "r4", "r5", "r7", "r9", "r22"]
        assert picked == [rollouts[i] for i in (0, 4, 5, 7, 9, 22)]
        assert store.load_rollouts(run, list(range(8, 12))) == rollouts[8:12]  # a whole block
        assert store.load_rollouts(run) == rollouts
