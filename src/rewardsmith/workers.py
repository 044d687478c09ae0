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
dispatch through the program).
"""

from __future__ import annotations

import array
import contextlib
import functools
import gc
import io
import multiprocessing
import multiprocessing.connection
import os
import pickle
import queue
import struct
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

__all__ = ["gc_paused", "BatchResult", "CallTimeout", "WorkerDied", "WorkerPool", "Outcome", "OK", "ERROR", "TIMEOUT",
           "default_worker_count", "format_exception"]

OK, ERROR, TIMEOUT = 0, 1, 2
Outcome = tuple[int, Any]  # (OK, value) | (ERROR, message) | (TIMEOUT, message)

_POLL_SECONDS = 0.01
# The shared slot: the running call's index in its batch, when it started, and which batch
# (counted per worker process) it belongs to.
_SLOT_INDEX, _SLOT_START, _SLOT_BATCH = 0, 1, 2
_SLOT_SIZE = 3
# Batches travel through a buffer shared with each worker, in two halves so that the next batch
# can be written while the current one runs; a larger batch goes through the pipe. A message
# that starts with this byte (never the first byte of a pickle) names the half and the size.
_HALF = 4 << 20
_IN_BUFFER = b"\x00"


class CallTimeout(Exception):
    """A call ran past its timeout; its worker process was killed."""


class WorkerDied(Exception):
    """A worker process exited while running a call (a crash in native code, os._exit, OOM)."""


_gc_lock = threading.Lock()
_gc_depth = 0
_gc_was_enabled = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a batch allocates many small objects.

    Scoring a batch builds thousands of dicts and records that form no reference cycles; the
    collector's repeated passes over them cost about a tenth of the time. Collection resumes
    (and catches up) as soon as the outermost pause ends; nested and concurrent pauses nest.
    """
    global _gc_depth, _gc_was_enabled
    with _gc_lock:
        if _gc_depth == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            if _gc_depth == 0 and _gc_was_enabled:
                gc.enable()


def default_worker_count() -> int:
    """The cores this process may use (respects taskset/cgroup affinity), at most 8."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


def format_exception(exc: BaseException) -> str:
    """``Type: message (at file:line in func)``: the innermost frame is where it went wrong."""
    text = f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        text += f" (at {os.path.basename(last.filename)}:{last.lineno} in {last.name})"
    return text[:2000]


# ---------------------------------------------------------------- worker process side


def _worker_main(conn: multiprocessing.connection.Connection, slot: Any, buffer: Any) -> None:
    programs: dict[str, Callable[[Any, Any], Any]] = {}
    # A memoryview writes to shared memory several times faster than ctypes item assignment,
    # and this runs twice per call.
    view: Any = memoryview(slot).cast("B").cast("d")
    halves = memoryview(buffer).cast("B")
    batches = 0
    while True:
        try:
            raw: Any = conn.recv_bytes()
            if raw[:1] == _IN_BUFFER:  # the batch lies in one half of the shared buffer
                half, size = struct.unpack_from("!BQ", raw, 1)
                raw = halves[half * _HALF : half * _HALF + size]
        except (EOFError, OSError):
            return
        with gc_paused():
            try:
                message = pickle.loads(raw)
            except BaseException as exc:  # noqa: BLE001 - only a batch carries user data
                batches += 1
                view[_SLOT_BATCH] = batches
                del raw
                conn.send_bytes(pickle.dumps((
                    "unreadable", f"the batch could not be read in a worker process: "
                                  f"{format_exception(exc)}")))
                continue
            kind = message[0]
            if kind == "stop":
                return
            if kind == "register":
                _, key, blob = message
                try:
                    programs[key] = cloudpickle.loads(blob)
                    reply = pickle.dumps(("registered", key, None))
                except BaseException as exc:  # noqa: BLE001 - reported to the parent
                    reply = pickle.dumps(("registered", key, format_exception(exc)))
            else:
                _, key, shared, items = message
                batches += 1
                view[_SLOT_START] = 0.0
                view[_SLOT_BATCH] = batches
                reply = _run_batch(programs[key], shared, items, view)
            del message, raw
        conn.send_bytes(reply)


def _run_batch(program: Callable[[Any, Any], Any], shared: Any, items: Sequence[Any],
               view: Any) -> bytes:
    # The start time is written before the index and neither is cleared between calls: the
    # parent reads index, start, index and so never pairs a call with a later call's start.
    clock = time.monotonic
    values: list[Any] = []
    failures: dict[int, Outcome] = {}
    append = values.append
    segments = getattr(program, "segments", None)
    reply: Any = values
    if segments is not None and type(items) is range:
        index = 0
        plain = True  # every value a finite float so far
        for call, args, fix in segments(items, shared):
            for arg in args:
                view[_SLOT_START] = clock()
                view[_SLOT_INDEX] = index
                try:
                    value = call(arg)
                    if type(value) is not float or value - value != 0.0:
                        value = fix(value)  # anything but a finite float: the program's form
                        plain = plain and type(value) is float
                except BaseException as exc:  # noqa: BLE001 - a failure is data
                    value = None
                    plain = False
                    failures[index] = (ERROR, format_exception(exc))
                append(value)
                index += 1
        if index != len(items):
            raise RuntimeError(f"program segments made {index} calls for {len(items)} items")
        if plain:
            reply = array.array("d", values)  # one block of bytes, and no type check later
    else:
        for index, item in enumerate(items):
            view[_SLOT_START] = clock()
            view[_SLOT_INDEX] = index
            try:
                append(program(item, shared))
            except BaseException as exc:  # noqa: BLE001 - a failure is data
                append(None)
                failures[index] = (ERROR, format_exception(exc))
    view[_SLOT_START] = 0.0  # not running a call while the reply is pickled and sent
    try:
        return pickle.dumps(("done", reply, failures), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - an unpicklable result is that call's error
        return pickle.dumps(("done", *_picklable(values, failures, exc)))


def _picklable(values: list[Any], failures: dict[int, Outcome],
               exc: Exception) -> tuple[list[Any], dict[int, Outcome]]:
    for index, value in enumerate(values):
        try:
            pickle.dumps(value)
        except Exception:  # noqa: BLE001
            values[index] = None
            failures[index] = (ERROR, f"result cannot be sent back from the worker: {exc}")
    return values, failures


# ---------------------------------------------------------------- parent side


def _dumps(message: Any) -> bytes:
    """Pickle without the memo: several times faster for many distinct strings (the texts of a
    batch); a repeated object is written again instead of referenced. Cyclic data, which the
    memo-less mode refuses, is pickled the usual way."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.fast = True
    try:
        pickler.dump(message)
    except ValueError:
        return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return buffer.getvalue()


@dataclass
class BatchResult:
    """What a batch returned: ``values[i]`` for call i, unless ``failures`` holds call i.

    ``values`` is a list, or an ``array('d')`` when a batch run by segments returned nothing
    but finite floats.
    """

    values: list[Any] | array.array[float]
    failures: dict[int, Outcome]

    def outcome(self, index: int) -> Outcome:
        return self.failures.get(index) or (OK, self.values[index])

    def outcomes(self) -> list[Outcome]:
        return [self.outcome(i) for i in range(len(self.values))]


@dataclass
class _Job:
    key: str
    items: Sequence[Any]
    limits: Sequence[float]
    shared: Any
    future: Future[BatchResult]


@dataclass
class _Worker:
    process: Any
    conn: multiprocessing.connection.Connection
    slot: Any
    known: set[str] = field(default_factory=set)
    buffer: Any = None  # shared with the process: two halves of _HALF bytes
    sent: int = 0  # batches sent to this process
    halves_used: list[int] = field(default_factory=list)  # halves of batches not yet answered


class WorkerPool:
    """A pool of worker processes that run registered programs with hard per-call timeouts.

    A program is a picklable callable ``program(item, shared)``; ``run`` sends a batch of
    items plus one ``shared`` payload (sent once per batch, e.g. the rows the items point at).

    >>> pool = WorkerPool(2)
    >>> pool.register("double", lambda item, shared: 2 * item)
    >>> pool.run("double", [1, 2], [5.0, 5.0]).result().values
    [2, 4]
    """

    def __init__(self, size: int | None = None, *, start_method: str | None = None):
        self.size = size if size is not None else default_worker_count()
        if self.size < 1:
            raise ValueError(f"a worker pool needs at least 1 process, not {self.size}")
        method = start_method or ("forkserver" if "forkserver" in
                                  multiprocessing.get_all_start_methods() else "spawn")
        self._context: Any = multiprocessing.get_context(method)
        if method == "forkserver":
            # Workers that are replaced after a timeout start warm from the fork server.
            self._context.set_forkserver_preload(["rewardsmith.workers", "rewardsmith.rewards"])
        self._programs: dict[str, bytes] = {}
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._threads: list[threading.Thread] = []
        self.replaced = 0  # workers killed and replaced (timeouts, crashes)

    # -- public API

    def register(self, key: str, program: Callable[[Any, Any], Any]) -> None:
        """Make ``program(item, shared)`` runnable under ``key``."""
        with self._lock:
            if key not in self._programs:
                self._programs[key] = cloudpickle.dumps(program)
        self._start()

    def run(self, key: str, items: Sequence[Any], limits: Sequence[float],
            shared: Any = None) -> Future[BatchResult]:
        """Run the program ``key`` on each item, each with its own time limit in seconds."""
        if key not in self._programs:
            raise KeyError(f"no program registered as {key!r}")
        if len(items) != len(limits):
            raise ValueError("items and limits must have the same length")
        future: Future[BatchResult] = Future()
        if not items:
            future.set_result(BatchResult([], {}))
            return future
        if self._closed:
            raise RuntimeError("the worker pool is closed")
        self._queue.put(_Job(key, items, limits, shared, future))
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
        """Stop every worker; calls not yet started fail."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout=5)
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

    def _spawn(self) -> _Worker:
        parent_conn, child_conn = self._context.Pipe()
        slot = self._context.Array("d", _SLOT_SIZE, lock=False)
        buffer = self._context.RawArray("B", 2 * _HALF)  # pages are taken only when written
        process = self._context.Process(
            target=_worker_main, args=(child_conn, slot, buffer), name="rewardsmith-worker",
            daemon=True,
        )
        process.start()
        child_conn.close()
        return _Worker(process, parent_conn, slot, buffer=buffer)

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

    def _kill(self, worker: _Worker) -> None:
        with contextlib.suppress(Exception):
            worker.process.kill()
        with contextlib.suppress(Exception):
            worker.process.join(timeout=2)
        with contextlib.suppress(Exception):
            worker.conn.close()
        self.replaced += 1

    def _drive(self) -> None:
        worker: _Worker | None = None
        ahead = _Ahead()
        try:
            while True:
                if ahead.job is not None:
                    job, sent = ahead.take(worker)
                elif ahead.stop:
                    return
                else:
                    job, sent = self._queue.get(), False
                if job is None:
                    return
                try:
                    if worker is None or not worker.process.is_alive():
                        worker, sent = self._spawn(), False
                    worker = self._run_job(worker, job, sent, ahead)
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
                if worker.process.is_alive():
                    worker.process.kill()

    def _ensure_program(self, worker: _Worker, key: str) -> str | None:
        if key in worker.known:
            return None
        worker.conn.send_bytes(pickle.dumps(("register", key, self._programs[key])))
        reply = pickle.loads(worker.conn.recv_bytes())
        if reply[2] is not None:
            return f"the reward could not be loaded in a worker process: {reply[2]}"
        worker.known.add(key)
        return None

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
        ahead.job = job
        if job.key not in worker.known or len(worker.halves_used) != 1:
            return  # loading a program needs a round trip: sent when its turn comes
        blob = _dumps(("run", job.key, job.shared, job.items))
        if len(blob) > _HALF:
            return  # through the pipe, which could block this thread: sent when its turn comes
        self._send_batch(worker, blob)
        ahead.worker = worker

    def _run_job(self, worker: _Worker, job: _Job, sent: bool, ahead: _Ahead) -> _Worker:
        size = len(job.items)
        values: list[Any] = [None] * size
        failures: dict[int, Outcome] = {}
        pending: list[int] | None = None  # None: every item, in order (the usual case)
        number = worker.sent  # when already sent, the last batch sent to this worker
        while True:
            todo = range(size) if pending is None else pending
            if not sent:
                try:
                    problem = self._ensure_program(worker, job.key)
                except (EOFError, OSError):
                    problem = "the worker process exited while loading the reward"
                if problem is not None:
                    for index in todo:
                        failures[index] = (ERROR, problem)
                    break
                items = job.items if pending is None else [job.items[i] for i in pending]
                worker.slot[_SLOT_START] = 0.0
                self._send_batch(worker, _dumps(("run", job.key, job.shared, items)))
                number = worker.sent
            sent = False
            limits = job.limits if pending is None else [job.limits[i] for i in pending]
            prefetch = functools.partial(self._send_ahead, worker, ahead)
            reply, failed_at, failure = self._wait(worker, limits, number, prefetch)
            if reply is not None:
                got_values, got_failures = reply
                if pending is None:
                    values = got_values
                    failures.update(got_failures)
                else:
                    for position, index in enumerate(pending):
                        values[index] = got_values[position]
                        if position in got_failures:
                            failures[index] = got_failures[position]
                break
            if failed_at < 0:  # the batch itself could not be run: every call gets why
                for index in todo:
                    failures[index] = failure
                worker = self._spawn()
                break
            # The worker was killed (timeout) or died at position ``failed_at``: that call gets
            # the failure; the calls before it are redone (their results died with it).
            order = list(todo)
            failures[order[failed_at]] = failure
            pending = order[:failed_at] + order[failed_at + 1 :]
            worker = self._spawn()
            if not pending:
                break
        if not job.future.done():
            job.future.set_result(BatchResult(values, failures))
        return worker

    def _wait(self, worker: _Worker, limits: Sequence[float], number: int,
              idle: Callable[[], None]
              ) -> tuple[tuple[list[Any], dict[int, Outcome]] | None, int, Outcome]:
        """Wait for batch ``number``'s reply, killing the worker when a call runs too long."""
        slot = worker.slot
        while True:
            try:
                ready = worker.conn.poll(_POLL_SECONDS)
            except (EOFError, OSError):
                ready = True
            if ready:
                try:
                    message = pickle.loads(worker.conn.recv_bytes())
                except (EOFError, OSError):
                    return None, *self._died(worker, number)
                worker.halves_used.pop(0)  # replies come in the order batches were sent
                if message[0] == "unreadable":
                    return None, -1, (ERROR, message[1])
                return (message[1], message[2]), -1, (OK, None)
            idle()
            if slot[_SLOT_BATCH] != number:  # not started yet (or still reading the batch)
                if not worker.process.is_alive():
                    return None, *self._died(worker, number)
                continue
            index_seen = slot[_SLOT_INDEX]
            started = slot[_SLOT_START]
            if slot[_SLOT_INDEX] != index_seen:
                continue  # the worker moved to the next call while we read: look again
            if started > 0.0:
                index = int(index_seen)
                limit = float(limits[index])
                if time.monotonic() - started > limit:
                    self._kill(worker)
                    return None, index, (
                        TIMEOUT, f"timed out after {limit:g} s (worker process killed)"
                    )
            elif not worker.process.is_alive():
                return None, *self._died(worker, number)

    def _died(self, worker: _Worker, number: int) -> tuple[int, Outcome]:
        started = worker.slot[_SLOT_BATCH] == number
        index = int(worker.slot[_SLOT_INDEX]) if started else -1
        worker.process.join(timeout=1)
        code = worker.process.exitcode
        self._kill(worker)
        if not started:
            return -1, (ERROR, f"the worker process died before running this batch (exit code "
                               f"{code})")
        return index, (ERROR, f"the worker process died while running this call (exit code {code})")


class _Ahead:
    """The job a driver took from the queue before its current one finished."""

    def __init__(self) -> None:
        self.job: _Job | None = None
        self.worker: _Worker | None = None  # the worker it was sent to, if sent
        self.stop = False  # the pool is closing: stop after the current job

    def take(self, worker: _Worker | None) -> tuple[_Job | None, bool]:
        """The job, and whether ``worker`` (alive) already has all of it."""
        job, target = self.job, self.worker
        sent = target is not None and target is worker and worker.process.is_alive()
        self.job, self.worker = None, None
        return job, sent


class _Apply:
    """A program that calls ``func(*args)`` for each item ``args``."""

    def __init__(self, func: Callable[..., Any]):
        self.func = func

    def __call__(self, args: tuple[Any, ...], shared: Any) -> Any:
        return self.func(*args)
