"""The worker pool: batches, the segment fast path, failures and hard timeouts within a batch."""

from __future__ import annotations

import array
import sys
import time
from collections.abc import Iterator
from typing import Any

import cloudpickle
import pytest

from rewardsmith.workers import ERROR, OK, TIMEOUT, WorkerPool, dumps_fast

# The programs below are defined here, so they travel to the workers by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _square(row: Any) -> Any:
    if row == "boom":
        raise ValueError("bad row")
    if row == "hang":
        while True:
            pass
    if row == "slow":
        time.sleep(0.3)
        return 0.5
    if row == "int":
        return 7  # not a float: read by the program's fix
    return float(row) ** 2


class SegmentProgram:
    """Two runs over the shared rows: squares, then the rows negated."""

    def __init__(self) -> None:
        self.generic_calls = 0

    def segments(self, items: range, shared: list[Any]
                 ) -> Iterator[tuple[Any, list[Any], Any]]:
        count = len(shared)
        runs = [(_square, lambda v: ("fixed", v)), (lambda row: -float(row), lambda v: v)]
        for k, (call, fix) in enumerate(runs):
            low = max(items.start, k * count) - k * count
            high = min(items.stop, (k + 1) * count) - k * count
            if low < high:
                yield call, shared[low:high], fix

    def __call__(self, item: int, shared: list[Any]) -> Any:
        # The generic path (used to redo calls after a worker was killed).
        k, row = divmod(item, len(shared))
        value = _square(shared[row]) if k == 0 else -float(shared[row])
        return value if type(value) is float else ("fixed", value)


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    with WorkerPool(1) as workers:
        workers.register("segments", SegmentProgram())
        workers.register("plain", lambda item, shared: shared[item] * 10)
        yield workers


def test_segment_path_keeps_item_order_and_reads_other_values(pool: WorkerPool) -> None:
    shared = ["1", "2", "int", "3"]
    batch = pool.run("segments", range(8), [5.0] * 8, shared).result()
    assert batch.values == [1.0, 4.0, ("fixed", 7), 9.0, -1.0, -2.0, None, -3.0]
    assert list(batch.failures) == [6]  # float("int") in the second run
    assert "ValueError" in batch.failures[6][1]


def test_segment_path_with_a_part_of_the_range(pool: WorkerPool) -> None:
    shared = ["1", "2", "3"]
    batch = pool.run("segments", range(2, 5), [5.0] * 3, shared).result()
    assert list(batch.values) == [9.0, -1.0, -2.0]
    assert isinstance(batch.values, array.array)  # nothing but finite floats: one block


def test_a_failing_call_is_data_and_later_calls_still_run(pool: WorkerPool) -> None:
    shared = ["1", "boom", "2"]
    batch = pool.run("segments", range(6), [5.0] * 6, shared).result()
    assert batch.outcome(1)[0] == ERROR and "ValueError: bad row" in batch.outcome(1)[1]
    assert [batch.outcome(i) for i in (0, 2)] == [(OK, 1.0), (OK, 4.0)]
    assert batch.outcome(3) == (OK, -1.0) and batch.outcome(5) == (OK, -2.0)
    assert 4 in batch.failures  # float("boom") in the second run fails too


def test_a_hanging_call_times_out_alone_and_the_rest_is_redone(pool: WorkerPool) -> None:
    shared = ["1", "hang", "2"]
    started = time.monotonic()
    batch = pool.run("segments", range(6), [1.0] * 6, shared).result()
    assert time.monotonic() - started < 1.0 + 1.5
    status, message = batch.outcome(1)
    assert status == TIMEOUT and "timed out after 1 s" in message
    assert batch.outcome(0) == (OK, 1.0) and batch.outcome(2) == (OK, 4.0)
    assert batch.outcome(3) == (OK, -1.0) and batch.outcome(5) == (OK, -2.0)
    assert pool.replaced >= 1


def test_each_call_gets_its_own_clock(pool: WorkerPool) -> None:
    # Four calls of 0.3 s under a 0.5 s limit: 1.2 s for the batch, but no call is late.
    batch = pool.run("segments", range(4), [0.5] * 4, ["slow"] * 2).result()
    assert list(batch.values[:2]) == [0.5, 0.5]
    assert sorted(batch.failures) == [2, 3]  # float("slow"): errors, not timeouts
    assert all(status == ERROR for status, _ in batch.failures.values())


def test_programs_without_segments_take_ranges_too(pool: WorkerPool) -> None:
    batch = pool.run("plain", range(1, 3), [5.0, 5.0], [1, 2, 3]).result()
    assert batch.values == [20, 30]


def test_cyclic_payloads_are_still_sent() -> None:
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    blob = dumps_fast(("run", "k", cyclic, [0]))
    import pickle

    message = pickle.loads(blob)
    assert message[2][1] is message[2]
    shared_twice = ["text"] * 3
    assert pickle.loads(dumps_fast(shared_twice)) == shared_twice


def _explode() -> None:
    raise RuntimeError("cannot be rebuilt here")


class Unreadable:
    """Pickles fine, but raises when the worker unpickles it."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return (_explode, ())


def test_a_batch_the_worker_cannot_read_fails_every_call_and_the_pool_goes_on(
        pool: WorkerPool) -> None:
    batch = pool.run("plain", [0, 1], [5.0, 5.0], [Unreadable(), 2]).result()
    assert sorted(batch.failures) == [0, 1]
    assert all("could not be read" in message for _, message in batch.failures.values())
    assert list(pool.run("plain", [0], [5.0], [4]).result().values) == [40]


def test_batches_larger_than_the_shared_buffer_go_through_the_pipe(pool: WorkerPool) -> None:
    big = ["x" * (3 << 20), "y" * (3 << 20)]  # about 6 MB pickled
    first = pool.run("plain", [0], [5.0], big)
    second = pool.run("plain", [1], [5.0], big)
    assert first.result().values == ["x" * (30 << 20)]
    assert second.result().values == ["y" * (30 << 20)]


def test_batches_queued_behind_a_hanging_one_are_all_answered() -> None:
    # One worker, several batches submitted at once: the next batch is sent ahead while one
    # runs. When a call hangs and the worker is killed, the batch sent ahead died with it and
    # must be sent again to the new worker.
    with WorkerPool(1) as workers:
        workers.register("segments", SegmentProgram())
        futures = [workers.run("segments", range(6), [1.0] * 6, rows)
                   for rows in (["1", "2", "3"], ["1", "hang", "2"], ["4", "5", "6"],
                                ["7", "8", "9"])]
        batches = [future.result(timeout=30) for future in futures]
    assert list(batches[0].values) == [1.0, 4.0, 9.0, -1.0, -2.0, -3.0]
    assert batches[1].outcome(1)[0] == TIMEOUT
    assert [batches[1].outcome(i) for i in (0, 2, 3, 5)] == [
        (OK, 1.0), (OK, 4.0), (OK, -1.0), (OK, -2.0)]
    assert list(batches[2].values) == [16.0, 25.0, 36.0, -4.0, -5.0, -6.0]
    assert list(batches[3].values) == [49.0, 64.0, 81.0, -7.0, -8.0, -9.0]
    assert workers.replaced == 1


class _DiesBeforeItsFirstCall:
    """Dies while preparing a batch whose rows say so, before any call of it begins."""

    def segments(self, items: range, shared: list[Any]
                 ) -> Iterator[tuple[Any, list[Any], Any]]:
        if shared == ["die"]:
            import os

            os._exit(1)
        yield float, list(items), float

    def __call__(self, item: int, shared: list[Any]) -> Any:
        return float(item)


def test_a_worker_dying_before_a_batch_s_first_call_blames_no_call_of_another_batch() -> None:
    """The worker's slot still named the last call of its previous (larger) batch when it died:
    that index must not be read as a call of this batch."""
    with WorkerPool(1) as workers:
        workers.register("dies", _DiesBeforeItsFirstCall())
        big = workers.run("dies", range(100), [5.0] * 100, ["fine"]).result()
        assert list(big.values) == [float(i) for i in range(100)]
        small = workers.run("dies", range(2), [5.0] * 2, ["die"]).result()
        assert sorted(small.failures) == [0, 1]
        assert all("died before running this batch" in f[1] for f in small.failures.values())
        again = workers.run("dies", range(3), [5.0] * 3, ["fine"]).result()
        assert list(again.values) == [0.0, 1.0, 2.0]


def test_a_batch_sent_ahead_to_a_worker_that_died_waits_for_its_successor() -> None:
    """Sending the next batch ahead to a worker that died during its batch (a broken pipe) is
    not the batch's failure: it stays taken, unsent, for the worker that replaces it."""
    from concurrent.futures import Future

    from rewardsmith.workers._batches import _Ahead, _Job

    workers = WorkerPool(1)  # no program registered: no driver competes for the queue
    try:
        workers._programs["p"] = cloudpickle.dumps(_DiesBeforeItsFirstCall())
        worker = workers._spawn()
        workers._ensure_program(worker, "p")
        worker.halves_used.append(0)  # as if a batch were running
        worker.process.kill()
        worker.process.join(timeout=5)
        job = _Job("p", range(3), [5.0] * 3, ["fine"], Future())
        workers._queue.put(job)
        ahead = _Ahead()
        workers._send_ahead(worker, ahead)  # a broken pipe: must not raise
        assert ahead.job is job and ahead.worker is None
        assert worker.sent == 0 and worker.halves_used == [0]
        workers._kill(worker, replaced=False)
    finally:
        workers.close()
