"""What a reward does to its process stays inside its own call.

A reward runs in a worker process or, with ``workers=0``, in the caller's process. Some things
it may do would reach past its call:

- ``os.fork()``: both copies return into the code that called the reward, so the child ran a
  second copy of the worker loop (or of the whole CLI). The child now exits the moment its
  copy of the reward returns; until then it may do what it forked for.
- ``os.chdir()`` / ``os.fchdir()``: later calls, and the CLI's relative paths, would see the
  new folder. The folder the call started in is restored when the call returns.
- ``sys.stdout`` / ``sys.stderr`` replaced: restored after each batch (``restore_streams``).
- ``sys.exit()``: a ``SystemExit`` that the engine records as the call's error.
- A daemon (double fork, ``setsid``) left running: in a worker, the worker ends it; in the
  caller's process (``workers=0``) this process is, while batches run, the child subreaper of
  what rewards start, and processes started while a batch runs carry a tag in their environment: when no
  batch is running any more (``restore_streams``; at most 20 ms later after many quick
  batches, and at exit), the tagged ones still alive are killed and reaped, so none outlives
  its batch or holds the CLI's output streams.

Both hooks find "the reward's call" from the stack: the caller is the nearest frame in the
engine's own calling code (worker loop, engine, binders, asyncio), and the call returns when
a frame whose parent is that caller returns. A profile function watches for it, only in the
thread (or forked child) concerned and only until then: calls that do none of this pay
nothing. (A coroutine's frame "returns" at each await, so for an async reward the folder is
restored, and a forked child exits, at its first await.)
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["guard_process", "restore_streams", "saved_streams"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # rewardsmith/
# The files whose frames call rewards: a reward's call ends when it returns into one of them.
_CALLERS = tuple(os.path.join(_PACKAGE, *name.split("/")) for name in (
    "workers/_child.py", "workers/_pool.py", "rubric/calling.py", "_system/deadline.py",
    "engine/"))
_ASYNCIO = os.path.dirname(os.path.abspath(asyncio.__file__)) + os.sep

_lock = threading.Lock()
_guarded = False
# In the caller's process (not a worker, which ends what its calls leave itself): the batches
# running now, and the environment variable that marks what their rewards start.
_reaping = False
_running: set[Any] = set()
_TAG_VARIABLE = "REWARDSMITH_CALLER_TAG"
_WORKER_VARIABLE = "REWARDSMITH_WORKER_TAG"  # set in every worker (workers._proctree)
_LOOK_EVERY = 0.02  # seconds between two looks for what batches left running
_last_look = 0.0
_timer: threading.Timer | None = None
_real_chdir = os.chdir
_real_fchdir = os.fchdir


def _is_caller(frame: FrameType) -> bool:
    name = frame.f_code.co_filename
    return name.startswith(_CALLERS) or name.startswith(_ASYNCIO)


def _caller_of(frame: FrameType | None) -> FrameType | None:
    """The nearest frame (from ``frame`` outwards) of the code that called the reward; None
    when this is not inside a reward's call."""
    below: FrameType | None = None
    while frame is not None:
        if _is_caller(frame):
            return frame if below is not None else None
        below, frame = frame, frame.f_back
    return None


def _when_returned_into(caller: FrameType, action: Callable[[], None]) -> None:
    """Run ``action`` (once) when a frame called by ``caller`` returns, in this thread."""
    previous: Any = sys.getprofile()

    def watch(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "return" and frame.f_back is caller:
            sys.setprofile(previous)
            action()
        elif previous is not None:
            return previous(frame, event, arg)
        return None

    sys.setprofile(watch)


def _child_after_fork() -> None:
    caller = _caller_of(sys._getframe(1))
    if caller is not None:
        # Whatever the child forked for is done when its copy of the reward returns: it must
        # not go on as a second copy of the worker loop or the CLI.
        def leave() -> None:
            os._exit(0)

        _when_returned_into(caller, leave)


class _Restore:
    """Puts this thread back in the folder its reward call started in."""

    def __init__(self) -> None:
        self.fd = os.open(".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))

    def __call__(self) -> None:
        try:
            _real_fchdir(self.fd)
        finally:
            os.close(self.fd)


_pending = threading.local()


def _guarded_change(change: Callable[[Any], None], target: Any) -> None:
    caller = _caller_of(sys._getframe(2))
    if caller is None or getattr(_pending, "caller", None) is caller:
        change(target)  # not in a reward's call, or its way back is already set up
        return
    try:
        restore = _Restore()
    except OSError:
        change(target)
        return
    change(target)
    _pending.caller = caller

    def back() -> None:
        _pending.caller = None
        restore()

    _when_returned_into(caller, back)


def _chdir(path: Any) -> None:
    _guarded_change(_real_chdir, path)


def _fchdir(fd: Any) -> None:
    _guarded_change(_real_fchdir, fd)


def guard_process() -> None:
    """Install the fork and folder hooks in this process (once; rewards may run here)."""
    global _guarded, _reaping
    with _lock:
        if _guarded:
            return
        _guarded = True
    if _WORKER_VARIABLE not in os.environ and sys.platform.startswith("linux"):
        _reaping = _subreaper(True) and _subreaper(False)
        if _reaping:
            atexit.register(_look_at_exit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_child_after_fork)
    os.chdir = _chdir
    os.fchdir = _fchdir


def saved_streams() -> tuple[Any, Any]:
    """``sys.stdout`` and ``sys.stderr`` as they are now (before a batch's calls)."""
    if _reaping:
        _batch_begins()
    return sys.stdout, sys.stderr


def restore_streams(saved: tuple[Any, Any]) -> None:
    """Put back streams a reward replaced (``sys.stdout = io.StringIO()``)."""
    if sys.stdout is not saved[0]:
        sys.stdout = saved[0]
    if sys.stderr is not saved[1]:
        sys.stderr = saved[1]
    if _reaping:
        _batch_ends()


def _batch_key() -> Any:
    try:
        return asyncio.current_task() or threading.get_ident()
    except RuntimeError:  # no event loop in this thread
        return threading.get_ident()


def _subreaper(on: bool) -> bool:
    """Be (or stop being) the child subreaper of what this process starts: while it is, an
    orphan below it (a daemon's first fork exited) comes back to it instead of to init."""
    try:
        return bool(_libc().prctl(36, int(on)) == 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:  # noqa: BLE001 - no prctl: nothing is adopted
        return False


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    import ctypes  # here: only a process that scores in-process pays for the import

    return ctypes.CDLL(None, use_errno=True)


def _batch_begins() -> None:
    with _lock:
        if not _running:
            # Only while batches run: orphans of the rest of the program still go to init.
            _subreaper(True)
            os.environ[_TAG_VARIABLE] = f"{os.getpid()}"
        _running.add(_batch_key())


def _batch_ends() -> None:
    global _timer
    with _lock:
        _running.discard(_batch_key())
        # A batch cancelled before its end never says so: its task is done.
        for key in [k for k in _running if isinstance(k, asyncio.Future) and k.done()]:
            _running.discard(key)
        if _running:
            return  # another batch's calls may still use what they started
        os.environ.pop(_TAG_VARIABLE, None)
        _subreaper(False)  # what the calls left is below this process already
        wait = _last_look + _LOOK_EVERY - time.monotonic()
        if wait <= 0:
            _end_left_behind()
        elif _timer is None:
            # Reading /proc costs about 0.2 ms: after many quick batches, one look soon after.
            _timer = threading.Timer(wait, _look_later)
            _timer.daemon = True
            _timer.start()


def _look_later() -> None:
    global _timer
    with _lock:
        _timer = None
        if not _running:  # else the running batches look when they end
            _end_left_behind()


def _look_at_exit() -> None:
    if _lock.acquire(timeout=2):  # a look running in the timer's thread finishes first
        try:
            _end_left_behind()
        finally:
            _lock.release()


def _end_left_behind() -> None:
    """Kill what the batches' rewards started and left running, and reap it (under _lock)."""
    global _last_look
    _last_look = time.monotonic()
    needle = f"{_TAG_VARIABLE}={os.getpid()}".encode()
    # Processes this program started for itself while a batch ran (a worker pool's fork
    # server, its workers, multiprocessing's resource tracker) inherit the tag too: they and
    # what runs below them are never a reward's.
    ours = _own_processes()
    spared = set(ours)
    for pid in ours:
        spared.update(_descendants(pid))
    killed = []
    for _ in range(2):  # a second look: one may have forked while the first were killed
        found = False
        for pid in _descendants(os.getpid()):
            if pid in spared:
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as handle:
                    environment = handle.read().split(b"\0")
            except OSError:
                continue
            if needle in environment:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    found = True
        if not found:
            break
    deadline = time.monotonic() + 1.0
    for pid in killed:  # those that are (or became, as orphans) this process's children
        while True:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                break
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.001)


def _own_processes() -> list[int]:
    """The processes multiprocessing started for this program: its children, the fork server
    and the resource tracker (read from multiprocessing's own state; none when it was never
    imported)."""
    if "multiprocessing" not in sys.modules:
        return []
    import multiprocessing  # imported already: free

    pids = [child.pid for child in multiprocessing.active_children() if child.pid]
    for module, attribute in (("multiprocessing.forkserver", "_forkserver_pid"),
                              ("multiprocessing.resource_tracker", "_pid")):
        helper = sys.modules.get(module)
        holder = getattr(helper, "_forkserver", None) or getattr(helper, "_resource_tracker", None)
        pid = getattr(holder, attribute, None)
        if isinstance(pid, int):
            pids.append(pid)
    return pids


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid``, from ``/proc/<pid>/task/*/children``."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children", "rb") as handle:
                    children = [int(child) for child in handle.read().split()]
            except OSError:
                continue
            found.extend(children)
            todo.extend(children)
    return found
