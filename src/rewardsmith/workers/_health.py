"""Whether a worker is healthy: near its memory limit (and whether the memory was held before the call began), or stopped (SIGSTOP) for long enough to be treated as frozen."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rewardsmith.workers._batches import _Worker
from rewardsmith.workers._proctree import (
    resident_bytes,
)

_OVER_MEMORY = "exceeded the memory limit"


# Sync calls left in a batch after a kill are shared with other workers from this many on.
_SHARE_AT_LEAST = 64


# A worker that held this share of the limit when a call began had it from earlier calls.
_HELD_SHARE = 0.5


_HELD_BEFORE = ", most of it held before this call began"


# A worker holding this share of its calls' smallest memory limit after a batch is replaced.
_RECYCLE_SHARE = 0.75


def _near_memory_limit(worker: _Worker, memory: Sequence[float] | None) -> bool:
    if not memory:
        return False
    limits = getattr(memory, "_limits", memory)  # a ColumnLimits: its few distinct limits
    pid = worker.process.pid
    used = resident_bytes(pid) if pid is not None else None
    return used is not None and used > _RECYCLE_SHARE * min(limits) * (1 << 20)


# A batch whose worker was frozen before it began: it is sent to a fresh worker.
_NEVER_STARTED = -2


# How long a worker may sit stopped (SIGSTOP) before a batch it holds has begun. (Once a call
# has begun, its own time limit counts, stopped or not.)
_FROZEN_SECONDS = 2.0


class _FrozenWatch:
    """Whether a worker has been stopped for ``_FROZEN_SECONDS``; ``/proc`` is read at most
    every half second, so the wait for a reply stays cheap."""

    def __init__(self) -> None:
        self.checked = time.monotonic()
        self.since: float | None = None

    def frozen(self, pid: int | None) -> bool:
        now = time.monotonic()
        if pid is None or now - self.checked < 0.5:
            return False
        self.checked = now
        if not _stopped(pid):
            self.since = None
            return False
        self.since = self.since if self.since is not None else now
        return now - self.since >= _FROZEN_SECONDS


def _stopped(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] in (b"T", b"t")
    except (OSError, IndexError):
        return False
