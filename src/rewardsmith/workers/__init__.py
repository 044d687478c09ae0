"""The process pool: reward calls in worker processes with hard time and memory limits.

- ``_pool``: ``WorkerPool``, the parent's side: batches, deadlines, kills, replacements.
- ``_batches``: what travels between the pool and a worker (jobs, results, programs).
- ``_processes``: how worker processes start; ``_spare``: a replacement started ahead of need.
- ``_health``: a worker near its memory limit, or frozen.
- ``_child``: what runs inside a worker process.
- ``_resultlog``: what a worker finished, in memory shared with the parent, so a crash never
  runs a finished call again.
- ``_proctree``: a process's descendants, killed together; their memory, read together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

if TYPE_CHECKING:
    from ._batches import BatchResult, CallTimeout, Outcome
    from ._child import ERROR, OK, TIMEOUT, LateResult, format_exception
    from ._pool import DEFAULT_MEMORY_LIMIT_MB, WorkerPool
    from ._processes import (
        FORKSERVER_PRELOAD,
        default_worker_count,
        dumps_fast,
        process_context,
        start_without_main,
    )

_HOMES = {
    "WorkerPool": "._pool", "DEFAULT_MEMORY_LIMIT_MB": "._pool",
    "BatchResult": "._batches", "CallTimeout": "._batches", "Outcome": "._batches",
    "ERROR": "._child", "OK": "._child", "TIMEOUT": "._child", "LateResult": "._child",
    "format_exception": "._child",
    "FORKSERVER_PRELOAD": "._processes", "default_worker_count": "._processes",
    "dumps_fast": "._processes", "process_context": "._processes",
    "start_without_main": "._processes",
}

__all__ = ["BatchResult", "CallTimeout", "DEFAULT_MEMORY_LIMIT_MB", "ERROR", "FORKSERVER_PRELOAD",
           "LateResult", "OK", "Outcome", "TIMEOUT", "WorkerPool", "default_worker_count",
           "dumps_fast", "format_exception", "process_context", "start_without_main"]

__getattr__ = lazy_getattr(__name__, _HOMES, globals())
