"""What travels between the pool and its workers: jobs (a batch of calls with their limits), what a batch returns, the programs a worker runs, and each worker's handle on the parent's side."""

from __future__ import annotations

import array
import multiprocessing
import multiprocessing.connection
import multiprocessing.spawn
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from rewardsmith.workers._child import (
    OK,
)

Outcome = tuple[int, Any]  # (OK, value) | (ERROR, message) | (TIMEOUT, message)


class CallTimeout(Exception):
    """A call ran past its timeout; its worker process was killed."""


class AsyncProgram(Protocol):
    """A program whose calls are coroutines, run concurrently in a worker's event loop."""

    def rows(self, shared: Any) -> Any:
        """What ``start`` reads, built once per batch from its shared payload."""

    def start(self, item: Any, rows: Any) -> Awaitable[Any]:
        """The call for ``item``, not yet awaited."""

    def finish(self, item: Any, value: Any) -> Any:
        """The call's return value in the form sent back to the parent."""


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
    memory: Sequence[float] | None = None  # MB per call
    concurrency: int = 0  # > 0: async calls, this many at once in the worker
    # A share of another job's calls, offered to idle workers: run by whichever driver takes
    # this lock first (its owner takes it back if no other driver has).
    claim: threading.Lock | None = None
    # Async calls only: each call's round (how many kills have cut it off; see ``_pool``),
    # None while no kill has.
    rounds: Sequence[int] | None = None

    def claimed(self) -> bool:
        """Take this job for the calling driver; False when another driver has it."""
        return self.claim is None or self.claim.acquire(blocking=False)


@dataclass
class _Worker:
    process: Any
    conn: multiprocessing.connection.Connection
    slot: Any
    known: set[str] = field(default_factory=set)
    buffer: Any = None  # shared with the process: two halves of _HALF bytes
    log: Any = None  # shared with the process: the result log of its current batch
    sent: int = 0  # batches sent to this process
    halves_used: list[int] = field(default_factory=list)  # halves of batches not yet answered


def _extra(job: _Job, pending: list[int] | None, rounds: Sequence[int] | None) -> Any:
    """What an async batch adds to its message: each call's time limit, the concurrency, and
    each call's round (None: all in the first)."""
    if job.concurrency <= 0:
        return None
    limits = list(job.limits) if pending is None else [job.limits[i] for i in pending]
    if rounds is not None:
        rounds = list(rounds) if pending is None else [rounds[i] for i in pending]
    return (limits, job.concurrency, rounds)


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


def _nothing() -> None:
    return None


class _Apply:
    """A program that calls ``func(*args)`` for each item ``args``."""

    def __init__(self, func: Callable[..., Any]):
        self.func = func

    def __call__(self, args: tuple[Any, ...], shared: Any) -> Any:
        return self.func(*args)
