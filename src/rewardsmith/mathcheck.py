"""Math answer checking for direct use, with a hard timeout that works from any thread.

>>> math_equal("so the answer is $\\\\boxed{\\\\frac12}$", "0.5").equal
True

The fast path (extraction, parsing, exact rationals, numeric probing) runs in the calling
process and is bounded by construction. The rare pair that needs sympy runs in a worker
process that is killed when the time is up. No ``signal`` is used, so the result is the same
from the main thread, other threads, asyncio and Ray workers. Called inside a daemonic worker
process (such as the engine's), which cannot start children, the sympy step runs in place and
that worker's own timeout is the guard.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import math
import multiprocessing
import threading
import time
from dataclasses import dataclass
from typing import Any

from rewardsmith.workers import (
    CallTimeout,
    WorkerPool,
    default_worker_count,
)

from .errors import ConfigError
from .rewards.mathanswer.check import ERROR, OK, UNDECIDED, Verdict, check

__all__ = ["MathVerdict", "math_equal", "math_equal_async"]

_WALL_SLACK = 0.25  # seconds past the limit the caller waits for the worker's own kill
_pool: WorkerPool | None = None
_pool_lock = threading.Lock()


@dataclass(frozen=True)
class MathVerdict:
    """The result of one check. ``bool(verdict)`` is ``verdict.equal``.

    ``status`` is ``ok`` (``equal`` is the answer), ``timeout`` (not decided within the time
    limit: not the same as wrong) or ``error`` (the reference could not be read, or the numbers
    are too large to compare: the dataset's problem, not the model's).
    """

    equal: bool
    status: str
    extracted: str | None
    reason: str

    def __bool__(self) -> bool:
        return self.equal


def _public(verdict: Verdict) -> MathVerdict:
    status = OK if verdict.status == OK else ERROR
    return MathVerdict(verdict.equal, status, verdict.extracted, verdict.reason)


def _symbolic(completion: str, reference: Any, boxed_only: bool) -> Verdict:
    """Run in a worker process: the full check, sympy allowed."""
    return check(completion, reference, boxed_only=boxed_only, symbolic=True)


def _get_pool() -> WorkerPool:
    global _pool
    with _pool_lock:
        if _pool is None:
            pool = WorkerPool(min(2, default_worker_count()))
            atexit.register(pool.close)
            _pool = pool
        return _pool


def _validate(timeout: float) -> None:
    if (not isinstance(timeout, (int, float)) or isinstance(timeout, bool)
            or not math.isfinite(timeout) or timeout <= 0):
        raise ConfigError(f"math_equal: timeout must be a positive number of seconds, not {timeout!r}")


def _timed_out(fast: Verdict, timeout: float) -> MathVerdict:
    return MathVerdict(False, "timeout", fast.extracted, f"not decided within {timeout:g} s")


def _from_result(fast: Verdict, future: concurrent.futures.Future[Verdict],
                 timeout: float) -> MathVerdict:
    exc = future.exception()
    if isinstance(exc, CallTimeout):
        return _timed_out(fast, timeout)
    if exc is not None:
        return MathVerdict(False, ERROR, fast.extracted, f"symbolic check failed: {exc}")
    value = future.result()
    if value.status == UNDECIDED:  # cannot happen with sympy allowed; never report it as ok
        return MathVerdict(False, ERROR, value.extracted, value.reason)
    return _public(value)


def _start(completion: str, reference: Any, boxed_only: bool, timeout: float,
           ) -> tuple[Verdict, float, concurrent.futures.Future[Verdict] | None]:
    """The in-process fast path; when it is undecided, the symbolic call started in a worker."""
    started = time.monotonic()
    fast = check(completion, reference, boxed_only=boxed_only, symbolic=False)
    if fast.status != UNDECIDED:
        return fast, 0.0, None
    remaining = timeout - (time.monotonic() - started)
    if remaining <= 0:
        return fast, 0.0, None
    future: concurrent.futures.Future[Verdict] = concurrent.futures.Future()
    if multiprocessing.current_process().daemon:
        # Inside a worker process (the engine's, say) no child can start; that worker has
        # its own hard timeout, so sympy runs right here.
        future.set_result(_symbolic(completion, reference, boxed_only))
        return fast, remaining, future
    pool = _get_pool()

    def call() -> None:
        # WorkerPool.call blocks until the worker answers or is killed at ``remaining``; this
        # thread lets the caller also bound its own wait (worker start-up included).
        try:
            future.set_result(pool.call(_symbolic, completion, reference, boxed_only,
                                        timeout=remaining))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            future.set_exception(exc)

    threading.Thread(target=call, name="rewardsmith-mathcheck", daemon=True).start()
    return fast, remaining, future


def math_equal(completion_or_answer: str, reference: Any, *, timeout: float = 5.0,
               boxed_only: bool = False) -> MathVerdict:
    """Is the final answer of ``completion_or_answer`` equal to ``reference``?

    ``completion_or_answer`` is a whole completion (its final answer is extracted: the last
    ``\\boxed{}``, "final answer is", "Answer:", "####", else the last expression) or just an
    answer. ``reference`` is an answer string (a label with a box or ``####`` also works), a
    number, or a list of acceptable answers. ``boxed_only`` grades only ``\\boxed{}`` answers.
    No call takes longer than ``timeout`` seconds plus a fraction of a second.
    """
    _validate(timeout)
    fast, remaining, future = _start(completion_or_answer, reference, boxed_only, timeout)
    if future is None:
        return _public(fast) if fast.status != UNDECIDED else _timed_out(fast, timeout)
    try:
        future.exception(timeout=remaining + _WALL_SLACK)
    except concurrent.futures.TimeoutError:
        return _timed_out(fast, timeout)
    return _from_result(fast, future, timeout)


async def math_equal_async(completion_or_answer: str, reference: Any, *, timeout: float = 5.0,
                           boxed_only: bool = False) -> MathVerdict:
    """``math_equal`` for asyncio code: the symbolic step is awaited, never blocking the loop."""
    _validate(timeout)
    fast, remaining, future = _start(completion_or_answer, reference, boxed_only, timeout)
    if future is None:
        return _public(fast) if fast.status != UNDECIDED else _timed_out(fast, timeout)
    done, _ = await asyncio.wait([asyncio.wrap_future(future)], timeout=remaining + _WALL_SLACK)
    if not done:
        return _timed_out(fast, timeout)
    return _from_result(fast, future, timeout)
