"""Executors: where a planned batch of calls runs.

Every executor takes the same request (a registered program, its items, a time and a memory
limit per call, the batch's shared payload) and answers with a ``BatchResult``; the engine
turns that into cells in one place (``assemble.store_plan``), whichever executor ran it.

- ``InlineExecutor``: in this process, no hard limits (``workers=0``: debugging, trusted and
  quick rewards).
- ``WorkerPool`` (``rewardsmith.workers``): local worker processes with hard time and memory
  limits, crash isolation and result logs.
- ``RayExecutor`` (``rewardsmith.engine.ray_backend``): a ``WorkerPool`` on every node of a Ray
  cluster, so every guarantee of the local pool holds there too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

from rewardsmith.workers import (
    ERROR,
    TIMEOUT,
    BatchResult,
    LateResult,
    Outcome,
    WorkerPool,
    format_exception,
)

from ..errors import ConfigError
from .backends import BACKEND_ENV, BACKENDS, PROGRAM_MODULES, RAY_ADDRESS_ENV

__all__ = ["BACKENDS", "Executor", "InlineExecutor", "backend_from_env", "make_executor"]



class Executor(Protocol):
    """Runs registered programs over batches of calls."""

    @property
    def replaced(self) -> int:
        """Workers killed and replaced so far (timeouts, crashes, memory)."""

    def register(self, key: str, program: Callable[[Any, Any], Any]) -> None:
        """Make ``program`` runnable under ``key``; ``LoadError`` when it cannot be sent."""

    def run(self, key: str, items: Sequence[Any], limits: Sequence[float], shared: Any = None,
            *, memory: Sequence[float] | None = None,
            concurrency: int = 0) -> Future[BatchResult]:
        """Run ``key`` on each item (see ``rewardsmith.workers.WorkerPool.run``)."""

    def close(self) -> None:
        """Stop everything this executor started."""


class InlineExecutor:
    """Runs programs in this process, one call after another, without hard limits."""

    def __init__(self) -> None:
        self._programs: dict[str, Callable[[Any, Any], Any]] = {}
        self.replaced = 0

    def register(self, key: str, program: Callable[[Any, Any], Any]) -> None:
        self._programs[key] = program

    def run(self, key: str, items: Sequence[Any], limits: Sequence[float], shared: Any = None,
            *, memory: Sequence[float] | None = None,
            concurrency: int = 0) -> Future[BatchResult]:
        program = self._programs[key]
        values: list[Any] = []
        failures: dict[int, Outcome] = {}
        for position, item in enumerate(items):
            try:
                values.append(program(item, shared))
            except LateResult as late:  # returned after its limit: a timeout, never a result
                values.append(None)
                failures[position] = (TIMEOUT, str(late))
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - a failure is data
                values.append(None)
                failures[position] = (ERROR, format_exception(exc))
        future: Future[BatchResult] = Future()
        future.set_result(BatchResult(values, failures))
        return future

    def close(self) -> None:
        self._programs.clear()


def backend_from_env() -> tuple[str, str | None]:
    """The backend and Ray address the environment asks for (for the trainer adapters and
    the server, which build their engine themselves)."""
    return (os.environ.get(BACKEND_ENV) or "local"), (os.environ.get(RAY_ADDRESS_ENV) or None)


def make_executor(backend: str, workers: int, ray_address: str | None = None,
                  ray_runtime_env: dict[str, Any] | None = None) -> Executor:
    """The executor for ``backend``: ``local`` (a worker pool of ``workers`` processes, or
    this process when ``workers`` is 0) or ``ray``."""
    if backend == "local":
        return WorkerPool(workers, preload=PROGRAM_MODULES) if workers > 0 else InlineExecutor()
    if backend == "ray":
        from .ray_backend import RayExecutor

        return RayExecutor(workers_per_node=workers or None, address=ray_address,
                           runtime_env=ray_runtime_env)
    raise ConfigError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
