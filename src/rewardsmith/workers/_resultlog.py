"""The result log: what a worker finished in its current batch, kept in memory it shares with
the parent, so that a crash or a kill never makes the parent run a finished call again.

Layout of the shared block (little-endian, native doubles)::

    [0:8)            bytes of records published in the record area (int64)
    [8:8+8n)         one double per call of the batch: its value when it was a finite float,
                     NOT_DONE before the call started, STARTED while an async call runs (so
                     that the parent knows which calls a kill cut off), IN_RECORDS when its
                     outcome is a record
    [8+8n:)          records: (call index: u32, size: u32, pickled outcome)

A record is published (the count at offset 0 moves past it) only once it is whole, so a worker
killed while writing one leaves the parent a log that is merely shorter. Calls past the first
``capacity`` of a batch, or records that do not fit, are not logged: after a crash those calls
run again (batches are far smaller in practice; see ``CAPACITY``).
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

__all__ = ["CAPACITY", "LOG_BYTES", "LogWriter", "read_log", "read_started"]

CAPACITY = 1 << 17  # calls logged per batch
_RECORDS = 8 << 20  # bytes of records per batch
LOG_BYTES = 8 + 8 * CAPACITY + _RECORDS
# NaN payloads that no float result takes: a NaN result is sent as a record, not a double.
NOT_DONE = 0x7FF8_DEAD_0000_0001
IN_RECORDS = 0x7FF8_DEAD_0000_0002
STARTED = 0x7FF8_DEAD_0000_0003
_MARKERS = (NOT_DONE, IN_RECORDS, STARTED)
_HEAD = struct.Struct("<II")
_NOT_DONE_BYTES = struct.pack("<Q", NOT_DONE)

Outcome = tuple[int, Any]  # (status, value or message), as in ``rewardsmith.workers._pool``


class LogWriter:
    """The worker's side: reset per batch, one write per finished call."""

    def __init__(self, block: Any):
        raw = memoryview(block).cast("B")
        self._raw = raw
        self.floats: Any = raw[8 : 8 + 8 * CAPACITY].cast("d")
        self._bits: Any = raw[8 : 8 + 8 * CAPACITY].cast("Q")
        self._count: Any = raw[0:8].cast("q")
        self._records = raw[8 + 8 * CAPACITY :]
        self._used = 0

    def reset(self, calls: int) -> None:
        """A new batch of ``calls`` calls: none is done."""
        self._used = 0
        self._count[0] = 0
        n = min(calls, CAPACITY)
        self._raw[8 : 8 + 8 * n] = _NOT_DONE_BYTES * n

    def start(self, index: int) -> None:
        """Mark a call as running (async calls, several of which run at once)."""
        if index < CAPACITY:
            self._bits[index] = STARTED

    def record(self, index: int, outcome: Outcome) -> None:
        """Log a call's outcome that is not a plain finite float."""
        if index >= CAPACITY:
            return
        try:
            blob = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - an unpicklable value is reported when sent back
            return
        end = self._used + _HEAD.size + len(blob)
        if end > len(self._records):
            return  # full: this call would run again after a crash
        _HEAD.pack_into(self._records, self._used, index, len(blob))
        self._records[self._used + _HEAD.size : end] = blob
        self._used = end
        self._count[0] = end
        self._bits[index] = IN_RECORDS


def read_log(block: Any, calls: int) -> dict[int, Outcome]:
    """The parent's side, once the worker is dead: the outcome of every logged call."""
    raw = memoryview(block).cast("B")
    bits = raw[8 : 8 + 8 * CAPACITY].cast("Q")
    floats = raw[8 : 8 + 8 * CAPACITY].cast("d")
    done: dict[int, Outcome] = {}
    for index in range(min(calls, CAPACITY)):
        pattern = bits[index]
        if pattern not in _MARKERS:
            done[index] = (0, floats[index])
    records = raw[8 + 8 * CAPACITY :]
    used = min(raw[0:8].cast("q")[0], len(records))
    offset = 0
    while offset + _HEAD.size <= used:
        index, size = _HEAD.unpack_from(records, offset)
        start = offset + _HEAD.size
        if start + size > used:
            break
        try:
            done[index] = pickle.loads(records[start : start + size])
        except Exception:  # noqa: BLE001 - a record we cannot read: that call runs again
            pass
        offset = start + size
    return done


def read_started(block: Any, calls: int) -> set[int]:
    """The parent's side, once the worker is dead: the calls that had started and not finished
    (marked by ``LogWriter.start``; a call whose outcome did not fit in the log counts too)."""
    bits = memoryview(block).cast("B")[8 : 8 + 8 * CAPACITY].cast("Q")
    return {index for index in range(min(calls, CAPACITY)) if bits[index] == STARTED}
