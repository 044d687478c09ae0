"""The process pool: reward calls in worker processes with hard time and memory limits.

- ``_pool``: ``WorkerPool``, the parent's side: batches, deadlines, kills, replacements.
- ``_child``: what runs inside a worker process.
- ``_resultlog``: what a worker finished, in memory shared with the parent, so a crash never
  runs a finished call again.
- ``_proctree``: a process's descendants, killed together; their memory, read together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

if TYPE_CHECKING:
    from ._child import LateResult
    from ._pool import (
        DEFAULT_MEMORY_LIMIT_MB,
        ERROR,
        FORKSERVER_PRELOAD,
        OK,
        TIMEOUT,
        BatchResult,
        CallTimeout,
        Outcome,
        WorkerDied,
        WorkerPool,
        default_worker_count,
        dumps_fast,
        format_exception,
        process_context,
        start_without_main,
    )

__all__ = ["BatchResult", "CallTimeout", "WorkerDied", "WorkerPool", "Outcome", "OK", "ERROR",
           "TIMEOUT", "default_worker_count", "format_exception", "DEFAULT_MEMORY_LIMIT_MB",
           "FORKSERVER_PRELOAD", "dumps_fast", "process_context", "start_without_main",
           "LateResult"]

__getattr__ = lazy_getattr(__name__, {**dict.fromkeys(__all__, "._pool"),
                                       "LateResult": "._child"}, globals())
