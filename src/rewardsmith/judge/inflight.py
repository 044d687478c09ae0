"""How many requests one client keeps in flight: at most what the server can serve at once.

A server with fewer slots than requests queues the rest, and a queued request's clock runs: a
timeout then fires on a healthy server, and each retry adds to the queue. So the client holds
its requests back instead. The ceiling is ``max_concurrency``, lowered to the server's slot
count where the server states it (llama.cpp's ``/props`` ``total_slots``); below it, the
window adapts (additive increase, multiplicative decrease): it halves on a 429, a 503 or a
timeout (at most once per ``_CUT_SPACING`` seconds, so one burst of refusals is one cut) and
grows by one request per window's worth of successes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

__all__ = ["InFlight"]

_CUT_SPACING = 1.0  # seconds: refusals closer together than this are one signal


class InFlight:
    """An adaptive bound on requests in flight (use on one event loop)."""

    def __init__(self, ceiling: int):
        self.ceiling = max(1, ceiling)
        self.limit = float(self.ceiling)
        self.active = 0
        self.peak = 0  # the most requests in flight at once (for usage and tests)
        self.cuts = 0
        self._last_cut = -_CUT_SPACING
        self._condition: asyncio.Condition | None = None

    def cap(self, slots: int) -> None:
        """The server serves at most ``slots`` requests at once: never send more."""
        self.ceiling = max(1, min(self.ceiling, slots))
        self.limit = min(self.limit, float(self.ceiling))

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self._condition is None:
            self._condition = asyncio.Condition()
        condition = self._condition
        async with condition:
            await condition.wait_for(lambda: self.active < max(1, int(self.limit)))
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            yield
        finally:
            async with condition:
                self.active -= 1
                condition.notify_all()

    def succeeded(self) -> None:
        """A reply came back in time. Call it before leaving ``slot()``: the release wakes
        the waiters, who then see the grown window."""
        self.limit = min(float(self.ceiling), self.limit + 1.0 / max(1.0, self.limit))

    def overloaded(self) -> None:
        """The server refused or ran late: halve the window (once per burst)."""
        now = time.monotonic()
        if now - self._last_cut < _CUT_SPACING:
            return
        self._last_cut = now
        self.cuts += 1
        self.limit = max(1.0, self.limit / 2)
