"""How many requests one client keeps in flight: at most what the server can serve at once.

A server with fewer slots than requests queues the rest, and a queued request's clock runs: a
timeout then fires on a healthy server, and each retry adds to the queue. So the client holds
its requests back instead. The ceiling is ``max_concurrency``, lowered to the server's slot
count where the server states it (llama.cpp's ``/props`` ``total_slots``); below it, the
window adapts (additive increase, multiplicative decrease):

- it halves on a 429, a 503 or a timeout (at most once per ``_CUT_SPACING`` seconds, so one
  burst of refusals is one cut);
- it shrinks when replies slow down as a queue forms: when the recent latency (a moving
  average of the last few replies) passes ``tolerance`` times the lowest that average has
  been over the last ``_BASELINE_REPLIES`` replies (what an unqueued reply takes). By Little's
  law the server then serves about ``window x lowest / recent`` requests at once, so the
  window is cut to that (with ``_HEADROOM`` to keep its slots busy), by at least a quarter.
  A server that does not say how many it serves (vLLM) and never refuses shows its queue
  only this way. At most one such cut per recent latency, so that the next is judged on
  replies sent after the cut. Comparing averages, not single replies, keeps a server whose
  latency is merely noisy (a hosted API) from being read as queueing;
- it grows by one request per window's worth of replies in time; until the first cut, by one
  request per reply (doubling each round trip, as TCP's slow start) from ``_START``
  requests: a window that starts at a large ``max_concurrency`` would queue its first burst
  on a small server, and the client would never see what an unqueued reply takes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator

__all__ = ["InFlight"]

_CUT_SPACING = 1.0  # seconds: refusals closer together than this are one signal
_SMOOTHING = 0.25  # weight of the newest reply in the recent latency (about the last 8)
_SLOW_SMOOTHING = 0.05  # the same for the typical latency the baseline is taken from
_BASELINE_REPLIES = 256  # how far back the lowest recent latency is looked for
_WARM_UP = 8  # replies seen before latency may cut the window
_LATENCY_CUT = 0.75  # the most of the window kept when replies slow down
_START = 16  # the first window, when max_concurrency is larger
_HEADROOM = 1.5  # requests kept per request the server is estimated to serve at once


class InFlight:
    """An adaptive bound on requests in flight (use on one event loop)."""

    def __init__(self, ceiling: int, tolerance: float | None = None):
        self.ceiling = max(1, ceiling)
        self.limit = float(min(self.ceiling, _START))
        self.starting = True  # slow start: grow by one a reply until the first cut
        self.tolerance = tolerance  # None: latency does not move the window
        self.active = 0
        self.peak = 0  # the most requests in flight at once (for usage and tests)
        self.cuts = 0  # after refusals and timeouts
        self.latency_cuts = 0  # after replies slowed down
        self.recent: float | None = None  # the moving average of reply latency, in seconds
        self._typical: float | None = None  # the same, averaged over more replies
        self._replies = 0
        self._lows: deque[tuple[int, float]] = deque()  # ascending minima of ``recent``
        self._last_cut = -_CUT_SPACING
        self._last_latency_cut = -1e9
        self._condition: asyncio.Condition | None = None

    def cap(self, slots: int) -> None:
        """The server serves at most ``slots`` requests at once: never send more."""
        self.ceiling = max(1, min(self.ceiling, slots))
        self.limit = min(self.limit, float(self.ceiling))

    @property
    def baseline(self) -> float | None:
        """The lowest recent latency over the last replies (what an unqueued reply takes)."""
        return self._lows[0][1] if self._lows else None

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

    def succeeded(self, latency: float | None = None) -> None:
        """A reply came back in time, after ``latency`` seconds. Call it before leaving
        ``slot()``: the release wakes the waiters, who then see the new window."""
        if latency is not None and self.tolerance is not None and self._queueing(latency):
            now = time.monotonic()
            recent, lowest = self.recent, self.baseline
            assert recent is not None and lowest is not None
            if now - self._last_latency_cut >= recent:
                self._last_latency_cut = now
                self.latency_cuts += 1
                keep = min(_LATENCY_CUT, _HEADROOM * lowest / recent)
                self.limit = max(1.0, self.limit * keep)
                self.starting = False
            return
        step = 1.0 if self.starting else 1.0 / max(1.0, self.limit)
        self.limit = min(float(self.ceiling), self.limit + step)

    def _queueing(self, latency: float) -> bool:
        """Take in one reply's latency; whether replies now wait in a queue."""
        recent = latency if self.recent is None else (
            self.recent + _SMOOTHING * (latency - self.recent))
        typical = latency if self._typical is None else (
            self._typical + _SLOW_SMOOTHING * (latency - self._typical))
        self.recent, self._typical = recent, typical
        self._replies += 1
        lows = self._lows  # a sliding-window minimum: O(1) per reply
        while lows and lows[-1][1] >= typical:
            lows.pop()
        lows.append((self._replies, typical))
        while lows[0][0] <= self._replies - _BASELINE_REPLIES:
            lows.popleft()
        assert self.tolerance is not None
        return self._replies > _WARM_UP and recent > self.tolerance * lows[0][1]

    def overloaded(self) -> None:
        """The server refused or ran late: halve the window (once per burst)."""
        now = time.monotonic()
        if now - self._last_cut < _CUT_SPACING:
            return
        self._last_cut = now
        self.cuts += 1
        self.limit = max(1.0, self.limit / 2)
        self.starting = False
