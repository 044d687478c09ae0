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

Both hooks find "the reward's call" from the stack: the caller is the nearest frame in the
engine's own calling code (worker loop, engine, binders, asyncio), and the call returns when
a frame whose parent is that caller returns. A profile function watches for it, only in the
thread (or forked child) concerned and only until then: calls that do none of this pay
nothing. (A coroutine's frame "returns" at each await, so for an async reward the folder is
restored, and a forked child exits, at its first await.)
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
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
    global _guarded
    with _lock:
        if _guarded:
            return
        _guarded = True
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_child_after_fork)
    os.chdir = _chdir
    os.fchdir = _fchdir


def saved_streams() -> tuple[Any, Any]:
    """``sys.stdout`` and ``sys.stderr`` as they are now."""
    return sys.stdout, sys.stderr


def restore_streams(saved: tuple[Any, Any]) -> None:
    """Put back streams a reward replaced (``sys.stdout = io.StringIO()``)."""
    if sys.stdout is not saved[0]:
        sys.stdout = saved[0]
    if sys.stderr is not saved[1]:
        sys.stderr = saved[1]
