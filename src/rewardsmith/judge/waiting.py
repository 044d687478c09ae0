"""Waiting for grades another process is paying for: one poller for every waited key."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

from ..errors import StoreError
from .ledger import Ledger, Owner, Record

__all__ = ["Watcher"]

_FIRST_INTERVAL = 0.05  # seconds between polls at first; grows to _MAX_INTERVAL while nothing moves
_MAX_INTERVAL = 0.5
_MAX_FAILURES = 20  # consecutive store errors before the waiters are told


class Watcher:
    """Resolves each waited key once its claim ends: graded, failed, released or abandoned.

    ``wait`` returns the key's record then (None when the claim was released); a record still
    ``claimed`` means its owner is gone or its lease ran out, and the caller may take it over.
    """

    def __init__(self, ledger: Ledger, owner: Owner):
        self.ledger = ledger
        self.owner = owner
        self._waiting: dict[str, list[asyncio.Future[Record | None]]] = {}
        self._task: asyncio.Task[None] | None = None

    async def wait(self, keys: Sequence[str]) -> dict[str, Record | None]:
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[Record | None]] = []
        for key in keys:
            future: asyncio.Future[Record | None] = loop.create_future()
            self._waiting.setdefault(key, []).append(future)
            futures.append(future)
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._poll())
        results = await asyncio.gather(*futures)
        return dict(zip(keys, results, strict=True))

    async def _poll(self) -> None:
        interval = _FIRST_INTERVAL
        failures = 0
        while self._waiting:
            await asyncio.sleep(interval)
            keys = list(self._waiting)
            try:
                records = self.ledger.lookup(keys)
            except StoreError as exc:
                failures += 1
                if failures >= _MAX_FAILURES:
                    self._fail_all(exc)
                    return
                continue
            failures = 0
            now = time.time()
            moved = False
            for key in keys:
                record = records.get(key)
                if (record is not None and record.state == "claimed"
                        and not self.ledger.is_stale(record, self.owner, now)):
                    continue
                moved = True
                for future in self._waiting.pop(key, []):
                    if not future.done():
                        future.set_result(record)
            interval = _FIRST_INTERVAL if moved else min(_MAX_INTERVAL, interval * 1.5)

    def _fail_all(self, exc: Exception) -> None:
        waiting, self._waiting = self._waiting, {}
        for futures in waiting.values():
            for future in futures:
                if not future.done():
                    future.set_exception(exc)

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._task = None
