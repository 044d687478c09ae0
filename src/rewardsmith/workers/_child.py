"""What runs inside a worker process (the parent's side is ``rewardsmith.workers._pool``).

A worker:
- leads its own process group, so that the parent can kill every process a reward started;
- exits within a fraction of a second when its parent is gone (``kill -9`` of the parent),
  taking its process group with it;
- writes what rewards print to stderr: its stdout is never the caller's results stream;
- runs batches of calls, writing each finished call to the result log (``rewardsmith.workers._resultlog``)
  so that a crash or a kill never makes the parent run a finished call again;
- runs async rewards on an event loop of its own, concurrently, one step at a time under the
  parent's watch: a step that blocks the loop past its call's limit is killed like a sync call.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import ctypes
import gc
import os
import pickle
import signal
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable, Generator, Sequence
from typing import Any, NoReturn

import cloudpickle

from rewardsmith._system.deadline import (
    Abandoned,
    await_within,
)
from rewardsmith._system.isolation import (
    guard_process,
    restore_streams,
    saved_streams,
)
from rewardsmith.workers._proctree import (
    TAG_VARIABLE,
    descendants,
)
from rewardsmith.workers._resultlog import LogWriter

__all__ = ["worker_tag", "SLOT_SIZE", "SLOT_INDEX", "SLOT_START", "SLOT_BATCH", "HALF", "IN_BUFFER",
           "OK", "ERROR", "TIMEOUT", "RECYCLE", "ALONE", "format_exception", "worker_main"]

OK, ERROR, TIMEOUT = 0, 1, 2
# A reply flag: the worker hit MemoryError and will exit after this reply; replace it.
RECYCLE = "recycle"
# The shared slot: the running call's index in its batch (-1 before the batch's first call),
# when it started (0.0 between calls, and between the steps of async calls), and which batch
# (counted per worker) it belongs to.
SLOT_INDEX, SLOT_START, SLOT_BATCH = 0, 1, 2
SLOT_SIZE = 3
# Batches travel through a buffer shared with each worker, in two halves so that the next batch
# can be written while the current one runs; a larger batch goes through the pipe. A message
# that starts with this byte (never the first byte of a pickle) names the half and the size.
HALF = 4 << 20
IN_BUFFER = b"\x00"
_WATCH_SECONDS = 0.2
# How long one step of an abandoned async call may block its worker's loop.
_ABANDONED_STEP = 1.0
# The round of an async call cut off twice by a kill: it runs alone (see ``_pool``).
ALONE = 2


class LateResult(Exception):
    """A call returned after its time limit: it counts as a timeout, never as a result."""


def worker_tag(owner: int, worker: int) -> str:
    """The tag a worker puts in the environment of what its calls start."""
    return f"{owner}.{worker}"


def format_exception(exc: BaseException) -> str:
    """``Type: message (at file:line in func)``: the innermost frame is where it went wrong."""
    text = f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        text += f" (at {os.path.basename(last.filename)}:{last.lineno} in {last.name})"
    return text[:2000]


def _failure_of(exc: BaseException) -> tuple[int, str]:
    if isinstance(exc, LateResult):
        return TIMEOUT, str(exc)
    return ERROR, format_exception(exc)


# ---------------------------------------------------------------- the process itself


def _die_with_parent(owner: int) -> None:
    """Exit, with every process of this group, as soon as the parent is gone.

    The kernel's parent-death signal covers a worker stuck in native code (it fires when the
    process that forked this one exits); the watch thread covers the processes a reward started
    and a parent that is not the forking process (the fork server).
    """
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(_WATCH_SECONDS)
            gone = os.getppid() != parent
            if not gone:
                try:
                    os.kill(owner, 0)
                except ProcessLookupError:
                    gone = True
                except PermissionError:
                    pass
            if gone:
                with contextlib.suppress(OSError):
                    os.killpg(os.getpid(), signal.SIGKILL)
                os._exit(1)

    threading.Thread(target=watch, name="rewardsmith-parent-watch", daemon=True).start()
    if os.getppid() != parent:  # the parent died before the watch started
        os._exit(1)


def _adopt_orphans() -> None:
    """Become the child subreaper of what the calls start: a daemon (double fork, new
    session) is then re-parented to this worker instead of init, so it can still be found
    and ended (``_end_left_behind``)."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1)  # PR_SET_CHILD_SUBREAPER


def _end_left_behind() -> None:
    """Kill every process the batch's calls started and left running (and reap them): none
    outlives its call, or holds the caller's output streams open."""
    me = os.getpid()
    for _ in range(2):  # a second look: one may have forked while the first were killed
        left = descendants(me)
        if not left:
            break
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def worker_main(conn: Any, slot: Any, buffer: Any, log_block: Any, owner: int) -> None:
    """The worker's loop: register programs, run batches, reply, until told to stop."""
    with contextlib.suppress(OSError):
        os.setsid()  # lead a process group: the parent kills the whole group on a timeout
    _die_with_parent(owner)
    _adopt_orphans()
    # Inherited by what the calls start: found by the parent even after this process is gone.
    os.environ[TAG_VARIABLE] = worker_tag(owner, os.getpid())
    with contextlib.suppress(OSError):
        os.dup2(2, 1)  # what rewards print (Python, C code, child processes) goes to stderr
    sys.stdout = sys.stderr
    guard_process()  # a fork, a chdir: only for the call that made it
    streams = saved_streams()
    programs: dict[str, Callable[[Any, Any], Any]] = {}
    # A memoryview writes to shared memory several times faster than ctypes item assignment,
    # and this runs twice per call.
    view: Any = memoryview(slot).cast("B").cast("d")
    halves = memoryview(buffer).cast("B")
    log = LogWriter(log_block)
    runner = _AsyncRunner(view, log)
    batches = 0
    while True:
        try:
            raw: Any = conn.recv_bytes()
            if raw[:1] == IN_BUFFER:  # the batch lies in one half of the shared buffer
                half, size = struct.unpack_from("!BQ", raw, 1)
                raw = halves[half * HALF : half * HALF + size]
        except (EOFError, OSError):
            _end_group()
        gc.disable()  # a batch allocates many small objects and forms no cycles
        recycle = False
        try:
            try:
                message = pickle.loads(raw)
            except BaseException as exc:  # noqa: BLE001 - only a batch carries user data
                batches += 1
                view[SLOT_INDEX] = -1.0
                view[SLOT_BATCH] = batches
                del raw
                conn.send_bytes(pickle.dumps((
                    "unreadable", f"the batch could not be read in a worker process: "
                                  f"{format_exception(exc)}")))
                continue
            kind = message[0]
            if kind == "stop":
                _end_group()
            if kind == "register":
                _, key, blob = message
                try:
                    program = cloudpickle.loads(blob)
                    prepare = getattr(program, "prepare", None)
                    if prepare is not None:  # load the rewards now: a failure is the run's
                        prepare()
                    programs[key] = program
                    reply = pickle.dumps(("registered", key, None))
                except BaseException as exc:  # noqa: BLE001 - reported to the parent
                    reply = pickle.dumps(("registered", key, format_exception(exc)))
            else:
                _, key, shared, items, limits = message
                batches += 1
                # No call of this batch running yet: the index the last batch left would name
                # a call of this one (or none at all) to the parent.
                view[SLOT_INDEX] = -1.0
                view[SLOT_START] = 0.0
                view[SLOT_BATCH] = batches
                log.reset(len(items))
                program = programs[key]
                if limits is not None:
                    values, failures = runner.run(program, shared, items, limits)
                else:
                    values, failures = _run_batch(program, shared, items, view, log)
                recycle = bool(runner.abandoned) or any(
                    isinstance(f, tuple) and "MemoryError" in str(f[1])
                    for f in failures.values())
                reply = _reply(values, failures, recycle)
                restore_streams(streams)
                _end_left_behind()
            del message, raw
        finally:
            gc.enable()
        try:
            conn.send_bytes(reply)
        except OSError:  # the parent stopped listening (it is closing): nothing to report to
            _end_group()
        if recycle:
            _end_group()  # memory may be left fragmented or half-freed: a fresh process follows


def _end_group() -> NoReturn:
    """Exit, and take every process the calls started with this one."""
    sys.stderr.flush()
    for child in descendants(os.getpid()):
        with contextlib.suppress(OSError):
            os.kill(child, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.killpg(os.getpid(), signal.SIGKILL)  # the rest of this group, and this process
    os._exit(0)


def _reply(values: Any, failures: dict[int, tuple[int, Any]], recycle: bool) -> bytes:
    flag = RECYCLE if recycle else None
    try:
        return pickle.dumps(("done", values, failures, flag), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - an unpicklable result is that call's error
        for index, value in enumerate(values):
            try:
                pickle.dumps(value)
            except Exception:  # noqa: BLE001
                values[index] = None
                failures[index] = (ERROR, f"result cannot be sent back from the worker: {exc}")
        return pickle.dumps(("done", values, failures, flag))


# ---------------------------------------------------------------- sync batches


def _run_batch(program: Callable[[Any, Any], Any], shared: Any, items: Sequence[Any],
               view: Any, log: LogWriter) -> tuple[Any, dict[int, tuple[int, Any]]]:
    # The start time is written before the index and neither is cleared between calls: the
    # parent reads index, start, index and so never pairs a call with a later call's start.
    clock = time.monotonic
    values: list[Any] = []
    failures: dict[int, tuple[int, Any]] = {}
    append = values.append
    floats = log.floats
    limit_log = min(len(items), len(floats))
    segments = getattr(program, "segments", None)
    if segments is not None and type(items) is range:
        index = 0
        plain = True  # every value a finite float so far
        for segment in segments(items, shared):
            call, args, fix = segment[0], segment[1], segment[2]
            limit = segment[3] if len(segment) > 3 else float("inf")
            spread = len(segment) > 4 and segment[4]  # each arg a tuple of arguments
            # One clock reading per call: the end of one call starts the next, so a call's
            # time includes the few steps of bookkeeping after the call before it.
            now = clock()
            for arg in args:
                view[SLOT_START] = now
                view[SLOT_INDEX] = index
                try:
                    value = call(*arg) if spread else call(arg)
                    end = clock()
                    if end - now > limit:
                        raise LateResult(f"timed out after {limit:g} s (returned too late)")
                    now = end
                    if type(value) is float and value - value == 0.0:
                        if index < limit_log:
                            floats[index] = value
                    else:
                        value = fix(value)  # anything but a finite float: the program's form
                        plain = plain and type(value) is float
                        log.record(index, (OK, value))
                except BaseException as exc:  # noqa: BLE001 - a failure is data
                    value = None
                    plain = False
                    failures[index] = _failure_of(exc)
                    log.record(index, failures[index])
                    now = clock()
                append(value)
                index += 1
        if index != len(items):
            raise RuntimeError(f"program segments made {index} calls for {len(items)} items")
        view[SLOT_START] = 0.0
        if plain:
            return array.array("d", values), failures  # one block of bytes, no type check
        return values, failures
    for index, item in enumerate(items):
        view[SLOT_START] = clock()
        view[SLOT_INDEX] = index
        try:
            value = program(item, shared)
            append(value)
            if type(value) is float and value - value == 0.0 and index < limit_log:
                floats[index] = value
            else:
                log.record(index, (OK, value))
        except BaseException as exc:  # noqa: BLE001 - a failure is data
            append(None)
            failures[index] = _failure_of(exc)
            log.record(index, failures[index])
    view[SLOT_START] = 0.0  # not running a call while the reply is pickled and sent
    return values, failures


# ---------------------------------------------------------------- async batches


class _Stepped:
    """Awaits a coroutine one step at a time, telling the parent which call each step runs.

    Between steps the slot says "no call running", so a call that awaits (a network read)
    never counts against a blocked loop; a step that blocks (``time.sleep``, a busy loop) is
    seen by the parent as a running call and killed past its limit.
    """

    def __init__(self, coroutine: Any, index: int, started: float, view: Any):
        self.coroutine, self.index, self.started, self.view = coroutine, index, started, view
        # Set once the call has been abandoned past its deadline: each later step then counts
        # as started ``-shift`` seconds ago, so that one that blocks the loop for more than
        # ``_ABANDONED_STEP`` seconds gets the worker killed.
        self.shift: float | None = None

    def __await__(self) -> Generator[Any, Any, Any]:
        coroutine, view = self.coroutine, self.view
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            view[SLOT_START] = (self.started if self.shift is None
                                else time.monotonic() + self.shift)
            view[SLOT_INDEX] = self.index
            try:
                if thrown is not None:
                    yielded = coroutine.throw(thrown)
                else:
                    yielded = coroutine.send(sent)
            except StopIteration as stop:
                return stop.value
            finally:
                view[SLOT_START] = 0.0
            try:
                sent, thrown = (yield yielded), None
            except GeneratorExit:
                coroutine.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - passed into the coroutine
                sent, thrown = None, exc


class _AsyncRunner:
    """Runs a batch of async calls concurrently on this worker's own event loop.

    A call past its limit is abandoned when it does not stop on cancellation (see
    ``rewardsmith._system.deadline``); ``abandoned`` then holds it, and the worker is replaced after
    its batch, since nothing else can end a coroutine that will not stop.
    """

    def __init__(self, view: Any, log: LogWriter):
        self.view, self.log = view, log
        self.loop: asyncio.AbstractEventLoop | None = None
        self.abandoned: set[asyncio.Future[Any]] = set()

    def run(self, program: Any, shared: Any, items: Sequence[Any],
            limits: tuple[Sequence[float], int, Sequence[int] | None]
            ) -> tuple[list[Any], dict[int, tuple[int, Any]]]:
        times, concurrency, rounds = limits
        if self.loop is None or self.loop.is_closed():
            self.loop = asyncio.new_event_loop()
        values: list[Any] = [None] * len(items)
        failures: dict[int, tuple[int, Any]] = {}
        self.loop.run_until_complete(
            self._all(program, shared, items, times, max(1, concurrency), rounds, values,
                      failures))
        return values, failures

    async def _all(self, program: Any, shared: Any, items: Sequence[Any],
                   times: Sequence[float], concurrency: int, rounds: Sequence[int] | None,
                   values: list[Any], failures: dict[int, tuple[int, Any]]) -> None:
        rows = program.rows(shared)
        gate = asyncio.Semaphore(concurrency)

        async def one(index: int) -> None:
            async with gate:
                limit = float(times[index])
                started = time.monotonic()
                self.log.start(index)
                stepped: _Stepped | None = None
                try:
                    stepped = _Stepped(program.start(items[index], rows), index, started,
                                       self.view)
                    value = await await_within(stepped, limit, self.abandoned)
                    if time.monotonic() - started > limit:
                        raise LateResult(f"timed out after {limit:g} s (returned too late)")
                    value = program.finish(items[index], value)
                    values[index] = value
                    self.log.record(index, (OK, value))
                except asyncio.TimeoutError as exc:
                    if isinstance(exc, Abandoned) and stepped is not None:
                        stepped.shift = _ABANDONED_STEP - limit
                    note = " (it ignored its cancellation)" if isinstance(exc, Abandoned) else ""
                    failures[index] = (TIMEOUT, f"timed out after {limit:g} s{note}")
                    self.log.record(index, failures[index])
                except BaseException as exc:  # noqa: BLE001 - a failure is data
                    failures[index] = _failure_of(exc)
                    self.log.record(index, failures[index])

        if rounds is None:
            await asyncio.gather(*(one(i) for i in range(len(items))))
            return
        # Calls are started in the order of their rounds (the gate lets them in first come,
        # first served): calls a kill cut off once start after every call not yet cut off.
        # Calls cut off twice run one at a time once all others have finished, so that no
        # other call can cut them off again (see ``_pool``).
        await asyncio.gather(*(one(i) for i in sorted(range(len(items)), key=rounds.__getitem__)
                               if rounds[i] < ALONE))
        gate = asyncio.Semaphore(1)
        await asyncio.gather(*(one(i) for i in range(len(items)) if rounds[i] >= ALONE))
