"""Worker processes with hard per-call timeouts.

Python cannot stop a running thread, and ``signal.alarm`` only works on the main thread of the
main interpreter (it breaks in threads, asyncio executors and Ray workers). So CPU-bound calls
run in child processes; a call that runs past its limit has its process killed and replaced.

Each worker shares a small array with the parent: the index of the call it is running and
when that call started. The parent's driver thread for that worker watches the clock, so the
limit counts from when the call starts, not from when it was queued. Work is sent in batches
(many calls per message) to keep the pipe cost per call small.

A program may also offer ``segments(items, shared)`` for a batch given as a ``range``: runs of
calls that share one function, which the worker then makes in a tight loop (no per-call
dispatch through the program). A segment is ``(call, args, fix[, limit[, spread]])``: one call
per arg (``call(*arg)`` when ``spread``), ``fix`` reading a value that is not a finite float. A program for async calls offers ``rows``, ``start`` and
``finish`` (see ``AsyncProgram``); its batches run concurrently on the worker's event loop.

What a pool guarantees (the worker's side is ``rewardsmith.workers._child``):
- a call past its time limit, or a worker past its call's memory limit, is killed with every
  process it started, and its worker replaced;
- a crash or a kill never runs a finished call again: finished calls are read back from the
  worker's result log (``rewardsmith.workers._resultlog``); only calls that had not finished run again;
- no worker outlives the process that owns the pool;
- a reward that cannot be loaded in a worker raises ``LoadError`` instead of failing each call.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import queue
import struct
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import cloudpickle

from rewardsmith.errors import LoadError
from rewardsmith.workers._batches import (
    BatchResult,
    CallTimeout,
    Outcome,
    _Ahead,
    _Apply,
    _extra,
    _Job,
    _nothing,
    _Worker,
)
from rewardsmith.workers._child import (
    ALONE,
    ERROR,
    HALF,
    IN_BUFFER,
    OK,
    RECYCLE,
    SLOT_BATCH,
    SLOT_INDEX,
    SLOT_SIZE,
    SLOT_START,
    TIMEOUT,
    format_exception,
    worker_main,
    worker_tag,
)
from rewardsmith.workers._health import (
    _FROZEN_SECONDS,
    _HELD_BEFORE,
    _HELD_SHARE,
    _NEVER_STARTED,
    _OVER_MEMORY,
    _SHARE_AT_LEAST,
    _FrozenWatch,
    _near_memory_limit,
)
from rewardsmith.workers._processes import (
    WARM_UP_SECONDS,
    default_worker_count,
    dumps_fast,
    process_context,
    start_without_main,
)
from rewardsmith.workers._proctree import (
    kill_tagged,
    kill_tagged_any,
    kill_tree,
    resident_bytes,
)
from rewardsmith.workers._resultlog import (
    LOG_BYTES,
    read_log,
    read_started,
)
from rewardsmith.workers._spare import (
    _Spare,
)

__all__ = ["WorkerPool", "DEFAULT_MEMORY_LIMIT_MB"]


_POLL_SECONDS = 0.01
_SLOT_INDEX, _SLOT_START, _SLOT_BATCH, _SLOT_SIZE = SLOT_INDEX, SLOT_START, SLOT_BATCH, SLOT_SIZE
_HALF, _IN_BUFFER = HALF, IN_BUFFER
# A call's worker may hold this much resident memory (MB) unless the rubric says otherwise.
DEFAULT_MEMORY_LIMIT_MB = 2048


# ---------------------------------------------------------------- parent side


class WorkerPool:
    """A pool of worker processes that run registered programs with hard per-call timeouts.

    A program is a picklable callable ``program(item, shared)``; ``run`` sends a batch of
    items plus one ``shared`` payload (sent once per batch, e.g. the rows the items point at).

    >>> pool = WorkerPool(2)
    >>> pool.register("double", lambda item, shared: 2 * item)
    >>> pool.run("double", [1, 2], [5.0, 5.0]).result().values
    [2, 4]
    """

    def __init__(self, size: int | None = None, *, start_method: str | None = None,
                 preload: Sequence[str] = ()):
        self.size = size if size is not None else default_worker_count()
        if self.size < 1:
            raise ValueError(f"a worker pool needs at least 1 process, not {self.size}")
        # ``preload``: modules the programs need, imported once by the fork server.
        self._context: Any = process_context(start_method, preload)
        self._programs: dict[str, bytes] = {}
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._threads: list[threading.Thread] = []
        self.replaced = 0  # workers killed and replaced (timeouts, crashes, memory)
        self._tags: list[str] = []  # the tag of every worker started (see _proctree)

    # -- public API

    def register(self, key: str, program: Callable[[Any, Any], Any]) -> None:
        """Make ``program(item, shared)`` runnable under ``key``.

        Raises ``LoadError`` when the program cannot be sent to a worker process.
        """
        with self._lock:
            if key not in self._programs:
                try:
                    self._programs[key] = cloudpickle.dumps(program)
                except Exception as exc:
                    raise LoadError(
                        f"the reward cannot be sent to worker processes ({format_exception(exc)})"
                        ": define it as a plain function at the top level of a module (or of "
                        "the script), or score in this process with workers=0 (no hard "
                        "timeouts)") from exc
        self._start()

    def run(self, key: str, items: Sequence[Any], limits: Sequence[float],
            shared: Any = None, *, memory: Sequence[float] | None = None,
            concurrency: int = 0) -> Future[BatchResult]:
        """Run the program ``key`` on each item, each with its own time limit in seconds.

        ``memory`` gives each call's limit on its worker's resident memory, in MB.
        ``concurrency > 0`` runs an async program's calls that many at a time.
        """
        if key not in self._programs:
            raise KeyError(f"no program registered as {key!r}")
        if len(items) != len(limits):
            raise ValueError("items and limits must have the same length")
        if memory is not None and len(memory) != len(items):
            raise ValueError("items and memory limits must have the same length")
        future: Future[BatchResult] = Future()
        if not items:
            future.set_result(BatchResult([], {}))
            return future
        if self._closed:
            raise RuntimeError("the worker pool is closed")
        self._queue.put(_Job(key, items, limits, shared, future, memory, concurrency))
        return future

    def call(self, func: Callable[..., Any], *args: Any, timeout: float) -> Any:
        """Run ``func(*args)`` in a worker; raise ``CallTimeout`` past ``timeout`` seconds."""
        key = f"call:{id(func)}"
        self.register(key, _Apply(func))
        status, value = self.run(key, [args], [timeout]).result().outcome(0)
        if status == OK:
            return value
        if status == TIMEOUT:
            raise CallTimeout(value)
        raise RuntimeError(value)

    def close(self) -> None:
        """Stop every worker (and what their calls started); calls not yet started fail."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout=5)
        # A last look for what any of its workers' calls started, whichever way the worker
        # ended: a daemon that escaped the look made when its worker was killed ends here.
        with contextlib.suppress(Exception):
            kill_tagged_any(list(self._tags))
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is not None and not job.future.done():
                job.future.set_exception(RuntimeError("the worker pool was closed"))

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals

    def _start(self) -> None:
        with self._lock:
            if self._threads or self._closed:
                return
            for index in range(self.size):
                thread = threading.Thread(
                    target=self._drive, name=f"rewardsmith-worker-{index}", daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def _spawn(self, dead: _Worker | None = None) -> _Worker:
        """A new worker; the shared blocks of a ``dead`` one it replaces are used again
        (allocating them costs more than starting the process)."""
        parent_conn, child_conn = self._context.Pipe()
        if dead is not None and dead.log is not None:
            slot, buffer, log = dead.slot, dead.buffer, dead.log
            slot[_SLOT_INDEX] = slot[_SLOT_START] = slot[_SLOT_BATCH] = 0.0
        else:
            slot = self._context.Array("d", _SLOT_SIZE, lock=False)
            buffer = self._context.RawArray("B", 2 * _HALF)
            log = self._context.RawArray("B", LOG_BYTES)
        process = self._context.Process(
            target=worker_main, args=(child_conn, slot, buffer, log, os.getpid()),
            name="rewardsmith-worker", daemon=True,
        )
        start_without_main(process)
        child_conn.close()
        if process.pid is not None:
            self._tags.append(worker_tag(os.getpid(), process.pid))
        return _Worker(process, parent_conn, slot, buffer=buffer, log=log)

    def _send_batch(self, worker: _Worker, blob: bytes) -> None:
        """Send one batch: through a free half of the shared buffer when it fits."""
        free = [h for h in (0, 1) if h not in worker.halves_used]
        if len(blob) <= _HALF and free:
            half = free[0]
            memoryview(worker.buffer).cast("B")[half * _HALF : half * _HALF + len(blob)] = blob
            worker.conn.send_bytes(_IN_BUFFER + struct.pack("!BQ", half, len(blob)))
            worker.halves_used.append(half)
        else:
            worker.conn.send_bytes(blob)
            worker.halves_used.append(-1)
        worker.sent += 1

    def _kill(self, worker: _Worker, *, replaced: bool = True) -> None:
        """Kill the worker and every process its calls started (before it is reaped, so that
        its process group cannot be confused with a later process's)."""
        pid = worker.process.pid
        if pid is not None:
            with contextlib.suppress(Exception):
                kill_tree(pid)
        with contextlib.suppress(Exception):
            worker.process.join(timeout=2)
        if pid is not None:
            # What its calls started and it had adopted goes to init once it is gone, out of
            # its tree: a crash, or a daemon that forked between the tree's listing and the
            # kill. They still carry its tag; a second look ends one that forked meanwhile.
            tag = worker_tag(os.getpid(), pid)
            for _ in range(3):
                with contextlib.suppress(Exception):
                    if not kill_tagged(tag):
                        break
        with contextlib.suppress(Exception):
            worker.conn.close()
        if replaced:
            self.replaced += 1

    def _drive(self) -> None:
        worker: _Worker | None = None
        ahead = _Ahead()
        spare = _Spare(self)
        try:
            while True:
                if ahead.job is not None:
                    job, sent = ahead.take(worker)
                elif ahead.stop:
                    return
                else:
                    job, sent = self._queue.get(), False
                    if job is not None and not job.claimed():
                        continue  # a share its owner, or another driver, runs
                if job is None:
                    return
                try:
                    if worker is None or not worker.process.is_alive():
                        if worker is not None:  # exited on its own (after a MemoryError)
                            self._kill(worker, replaced=False)
                        worker, sent = self._spawn(), False
                    worker = self._run_job(worker, job, sent, ahead, spare)
                except BaseException as exc:  # noqa: BLE001 - never lose a caller's future
                    if not job.future.done():
                        job.future.set_exception(exc)
                    if worker is not None:
                        self._kill(worker)
                    worker = None
        finally:
            if ahead.job is not None and not ahead.job.future.done():
                ahead.job.future.set_exception(RuntimeError("the worker pool was closed"))
            if worker is not None:
                with contextlib.suppress(Exception):
                    worker.conn.send_bytes(pickle.dumps(("stop",)))
                worker.process.join(timeout=1)
                # The worker's group: daemons its calls left behind.
                self._kill(worker, replaced=False)
            spare.close()

    def _ensure_program(self, worker: _Worker, key: str) -> None:
        if key in worker.known:
            return
        try:
            worker.conn.send_bytes(pickle.dumps(("register", key, self._programs[key])))
            if not worker.conn.poll(WARM_UP_SECONDS):
                self._kill(worker)
                raise LoadError(
                    f"loading the reward in a worker process (with its warm-up hook) took more "
                    f"than {WARM_UP_SECONDS:g} s")
            reply = pickle.loads(worker.conn.recv_bytes())
        except (EOFError, OSError) as exc:
            worker.process.join(timeout=1)
            raise LoadError(
                f"a worker process exited while loading the reward (exit code "
                f"{worker.process.exitcode}): it cannot run in a worker process here; score "
                f"in this process with workers=0 (no hard timeouts)") from exc
        if reply[2] is not None:
            raise LoadError(
                f"the reward could not be loaded in a worker process: {reply[2]}. Make it "
                f"importable there (a module on the Python path, or a function defined in the "
                f"script itself), or score in this process with workers=0 (no hard timeouts)")
        worker.known.add(key)

    def _send_ahead(self, worker: _Worker, ahead: _Ahead) -> None:
        """While a batch runs, send the next one to the same worker, so that it starts the
        moment this one is done instead of after a round trip through this process."""
        if ahead.job is not None or ahead.stop:
            return
        try:
            job = self._queue.get_nowait()
        except queue.Empty:
            return
        if job is None:
            ahead.stop = True
            return
        if not job.claimed():
            return
        ahead.job = job
        if job.key not in worker.known or len(worker.halves_used) != 1:
            return  # loading a program needs a round trip: sent when its turn comes
        blob = dumps_fast(("run", job.key, job.shared, job.items, _extra(job, None, job.rounds)))
        if len(blob) > _HALF:
            return  # through the pipe, which could block this thread: sent when its turn comes
        try:
            self._send_batch(worker, blob)
        except OSError:  # the worker died during its batch: sent to its successor in turn
            return
        ahead.worker = worker

    def _run_job(self, worker: _Worker, job: _Job, sent: bool, ahead: _Ahead,
                 spare: _Spare) -> _Worker:
        size = len(job.items)
        values: list[Any] = [None] * size
        failures: dict[int, Outcome] = {}
        pending: list[int] | None = None  # None: every item, in order (the usual case)
        rounds = None if job.rounds is None else list(job.rounds)  # async: see below
        number = worker.sent  # when already sent, the last batch sent to this worker
        share: tuple[_Job, list[int]] | None = None  # calls offered to the other workers
        restarts = 0  # fresh workers given this batch after one was frozen before it began
        retried: set[int] = set()  # calls run again after their worker crossed the memory limit
        while True:
            todo = range(size) if pending is None else pending
            if not sent:
                self._ensure_program(worker, job.key)
                items = job.items if pending is None else [job.items[i] for i in pending]
                worker.slot[_SLOT_START] = 0.0
                try:
                    self._send_batch(worker, dumps_fast(("run", job.key, job.shared, items,
                                                     _extra(job, pending, rounds))))
                except OSError:
                    # The worker died since it was last seen (between batches): nothing of
                    # this batch ran, and a fresh worker takes it.
                    if restarts >= 2:
                        raise
                    restarts += 1
                    self._kill(worker)
                    worker = spare.replace(worker)
                    continue
                number = worker.sent
            sent = False
            limits = job.limits if pending is None else [job.limits[i] for i in pending]
            memory = (job.memory if pending is None or job.memory is None
                      else [job.memory[i] for i in pending])
            # While a share is out, nothing more is sent ahead: taking the share back must be
            # able to send it to this worker as its next batch.
            prefetch = (functools.partial(self._send_ahead, worker, ahead) if share is None
                        else _nothing)
            reply, failed_at, failure = self._wait(worker, limits, memory, number, prefetch)
            if reply is not None:
                got_values, got_failures, flag = reply
                if pending is None:
                    values = got_values
                    failures.update(got_failures)
                else:
                    for position, index in enumerate(pending):
                        values[index] = got_values[position]
                        if position in got_failures:
                            failures[index] = got_failures[position]
                if flag == RECYCLE or _near_memory_limit(worker, job.memory):
                    # It exits after this reply (MemoryError), or it has grown close to the
                    # memory limit: a fresh worker takes the next batch, before a call of it
                    # would cross the limit.
                    self._kill(worker)
                    worker = spare.replace(worker)
                break
            if failed_at == _NEVER_STARTED and restarts < 2:  # a frozen worker: once more
                restarts += 1
                worker = spare.replace(worker)
                continue
            if failed_at < 0:  # the batch itself could not be run: every call gets why
                for index in todo:
                    failures[index] = failure
                if not self._closed:
                    if worker.process.is_alive():  # it could not read the batch: not reused
                        self._kill(worker)
                    worker = spare.replace(worker)
                break
            # The worker was killed (timeout, memory) or died at position ``failed_at``: that
            # call gets the failure, the calls it had finished come from its result log, and
            # only the calls that had not finished run again.
            order = list(todo)
            finished = read_log(worker.log, len(order))
            for position, outcome in finished.items():
                # A call the kill named may have finished (and logged its outcome) just as the
                # kill landed, the worker already on the next call: what it logged stands.
                if position < len(order):
                    if outcome[0] == OK:
                        values[order[position]] = outcome[1]
                    else:
                        failures[order[position]] = outcome
            crossed = (failure[1].startswith(_OVER_MEMORY) and _HELD_BEFORE in failure[1]
                       and order[failed_at] not in retried and failed_at not in finished)
            if crossed:
                # The worker's memory crossed the limit during this call, but most of it was
                # held before the call began (what earlier calls left behind): the call runs
                # once more, on a fresh worker, and fails only if it crosses the limit there.
                retried.add(order[failed_at])
            elif failed_at not in finished:
                failures[order[failed_at]] = failure
            pending = [order[p] for p in range(len(order))
                       if (p != failed_at or crossed) and p not in finished]
            if job.concurrency > 0:
                # Async calls the kill cut off (started, not finished, not the one that blocked)
                # run again after the calls not yet started, together: awaiting calls still
                # overlap. A call cut off a second time runs alone, so that none runs more than
                # three times. Calls not yet started keep their round, and their concurrency.
                if rounds is None:
                    rounds = [0] * size
                for position in read_started(worker.log, len(order)) - finished.keys():
                    if position != failed_at:
                        rounds[order[position]] = min(ALONE, rounds[order[position]] + 1)
                pending.sort(key=rounds.__getitem__)
            worker = spare.replace(worker)
            if (share is None and self.size > 1 and not self._closed
                    and len(pending) >= (2 if job.concurrency > 0 else _SHARE_AT_LEAST)):
                # A call that had to be killed sends the rest of its batch to a fresh worker:
                # half of what is left is offered to the others, so that calls which block
                # their worker time out in parallel. (A few sync calls are not worth another
                # worker's start.)
                kept = len(pending) // 2
                share = (self._offer(job, pending[kept:], rounds), pending[kept:])
                pending = pending[:kept]
            if not pending:
                break
        if share is not None:
            worker = self._gather_share(worker, job, share, values, failures, ahead, spare)
        if not job.future.done():
            job.future.set_result(BatchResult(values, failures))
        return worker

    def _offer(self, job: _Job, indices: list[int], rounds: list[int] | None) -> _Job:
        share = _Job(job.key, [job.items[i] for i in indices], [job.limits[i] for i in indices],
                     job.shared, Future(),
                     None if job.memory is None else [job.memory[i] for i in indices],
                     job.concurrency, claim=threading.Lock(),
                     rounds=None if rounds is None else [rounds[i] for i in indices])
        self._queue.put(share)
        return share

    def _gather_share(self, worker: _Worker, job: _Job, share: tuple[_Job, list[int]],
                      values: list[Any], failures: dict[int, Outcome], ahead: _Ahead,
                      spare: _Spare) -> _Worker:
        """The results of the calls offered to the other workers: run here when no other
        driver took them, else waited for."""
        offered, indices = share
        if offered.claimed():
            worker = self._run_job(worker, offered, False, ahead, spare)
        result = offered.future.result()
        for position, index in enumerate(indices):
            values[index] = result.values[position]
            if position in result.failures:
                failures[index] = result.failures[position]
        return worker

    def _wait(self, worker: _Worker, limits: Sequence[float], memory: Sequence[float] | None,
              number: int, idle: Callable[[], None]
              ) -> tuple[tuple[Any, dict[int, Outcome], Any] | None, int, Outcome]:
        """Wait for batch ``number``'s reply, killing the worker when a call runs too long or
        its worker holds more memory than the call may."""
        slot = worker.slot
        pid = worker.process.pid
        frozen = _FrozenWatch()
        seen_index, seen_used = -1, None  # the running call, and its worker's memory at first
        pause = _POLL_SECONDS
        while True:
            try:
                ready = worker.conn.poll(pause)
            except (EOFError, OSError):
                ready = True
            pause = _POLL_SECONDS
            if ready:
                try:
                    message = pickle.loads(worker.conn.recv_bytes())
                except (EOFError, OSError):
                    return None, *self._died(worker, number, len(limits))
                worker.halves_used.pop(0)  # replies come in the order batches were sent
                if message[0] == "unreadable":
                    return None, -1, (ERROR, message[1])
                return (message[1], message[2], message[3]), -1, (OK, None)
            idle()
            if self._closed:  # closing: the calls still running are stopped, not waited for
                self._kill(worker, replaced=False)
                return None, -1, (ERROR, "the worker pool was closed while this call ran")
            if slot[_SLOT_BATCH] != number:  # not started yet (or still reading the batch)
                index_seen, started = -1.0, 0.0
            else:
                index_seen = slot[_SLOT_INDEX]
                started = slot[_SLOT_START]
                if slot[_SLOT_INDEX] != index_seen:
                    continue  # the worker moved to the next call while we read: look again
            index = int(index_seen)
            if not 0 <= index < len(limits):  # the batch, or its first call, has not begun
                if not worker.process.is_alive():
                    return None, *self._died(worker, number, len(limits))
                if frozen.frozen(pid):  # stopped (SIGSTOP) before running any call of it
                    self._kill(worker)
                    return None, _NEVER_STARTED, (
                        ERROR, f"the worker process was stopped (SIGSTOP) for "
                               f"{_FROZEN_SECONDS:g} s before running this call")
                continue
            if memory is not None:
                used = resident_bytes(pid)
                allowed = float(memory[index])
                if index != seen_index:  # the first look at this call: what it started with
                    seen_index, seen_used = index, used
                if (used is not None and used > allowed * (1 << 20)
                        and _still(slot, index_seen, started)):
                    self._kill(worker)
                    held = seen_used is not None and seen_used > _HELD_SHARE * allowed * (1 << 20)
                    return None, index, (
                        ERROR, f"{_OVER_MEMORY} of {allowed:g} MB (worker process "
                               f"killed{_HELD_BEFORE if held else ''}; raise memory_limit if "
                               f"the reward needs more)")
            if started > 0.0:
                limit = float(limits[index])
                left = limit - (time.monotonic() - started)
                if left < 0.0 and _still(slot, index_seen, started):
                    self._kill(worker)
                    return None, index, (
                        TIMEOUT, f"timed out after {limit:g} s (worker process killed)"
                    )
                # Wake at the deadline rather than up to a poll later.
                pause = min(_POLL_SECONDS, max(0.001, left + 0.0005))
            elif not worker.process.is_alive():
                return None, *self._died(worker, number, len(limits))

    def _died(self, worker: _Worker, number: int, calls: int) -> tuple[int, Outcome]:
        index = int(worker.slot[_SLOT_INDEX]) if worker.slot[_SLOT_BATCH] == number else -1
        started = 0 <= index < calls
        worker.process.join(timeout=1)
        code = worker.process.exitcode
        self._kill(worker)
        if not started:
            return -1, (ERROR, f"the worker process died before running this batch (exit code "
                               f"{code})")
        return index, (ERROR, f"the worker process died while running this call (exit code {code})")


def _still(slot: Any, index: float, started: float) -> bool:
    """Whether the worker is still on the call seen (same index, same start): read again just
    before a kill, so that a driver that was not scheduled for a while never kills a worker
    for a call that has since finished."""
    return bool(slot[_SLOT_INDEX] == index and slot[_SLOT_START] == started)
