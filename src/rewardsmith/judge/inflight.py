"""How many requests one client keeps in flight: at most what the server can serve at once.

A server with fewer slots than requests queues the rest, and a queued request's clock runs: a
timeout then fires on a healthy server, and each retry adds to the queue. So the client holds
its requests back instead. The ceiling is ``max_concurrency``, lowered to the server's slot
count where the server states it (llama.cpp's ``/props`` ``total_slots``); below it, the
window adapts:

- it halves on a 429, a 503 or a timeout (at most once per ``_CUT_SPACING`` seconds, so one
  burst of refusals is one cut);
- it follows the replies' latency, for servers that queue without saying how many they serve
  (vLLM) and never refuse. ``baseline`` is what an unqueued reply takes (the lowest a slow
  moving average of latency has been over the last ``_BASELINE_REPLIES`` replies); ``recent`` is
  a moving average of the last few. While ``recent`` stays within ``tolerance`` times the
  baseline (plus ``_SLACK``: on a server answering in milliseconds, the scheduling noise of a
  busy machine is no queue) the window grows; past it, the window shrinks in proportion (the
  gradient ``(tolerance x baseline + slack) / recent``, as Netflix's concurrency-limits
  "gradient" limiter does), by at most half and at most once per round trip. By Little's law a
  server serving C at once answers W requests in flight in about ``W / C`` times the unqueued
  latency, so the window settles near ``tolerance x C``: with 2, about as many requests wait as
  are served. Averages, not single replies, are compared, so a server whose latency merely
  varies is not read as queueing;
- it starts at ``_START`` requests (or the ceiling, if lower), holds there for the first
  ``_WARM_UP`` replies, then grows by one a reply, as TCP's slow start, while replies stay
  nearer the unqueued latency than the tolerance, until the first sign of a queue: a first burst
  as large as a big ``max_concurrency`` would queue on a small server, and no reply would show
  what an unqueued one takes. After that it grows by ``_GROWTH`` a reply (by one a window's
  worth of replies when the latency is not followed).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator

__all__ = ["InFlight"]

_CUT_SPACING = 1.0  # seconds: refusals closer together than this are one signal
_START = 16  # the first window, when max_concurrency is larger
_SMOOTHING = 0.25  # weight of the newest reply in the recent latency (about the last 8)
_SLOW_SMOOTHING = 0.05  # the same for the typical latency the baseline is taken from
_BASELINE_REPLIES = 256  # how far back the lowest typical latency is looked for
_WARM_UP = 8  # replies seen before the latency moves the window
_SLACK = 0.02  # seconds: a slowdown smaller than this is not a queue worth shrinking for
_MIN_GRADIENT = 0.5  # one cut keeps at least half the window
_GROWTH = 0.2  # requests the window grows by a reply in time, once the latency is followed


class InFlight:
    """An adaptive bound on requests in flight (use on one event loop)."""

    def __init__(self, ceiling: int, tolerance: float | None = None):
        self.ceiling = max(1, ceiling)
        self.limit = float(min(self.ceiling, _START))
        self.starting = True  # slow start: grow by one a reply until the first sign of a queue
        self.tolerance = tolerance  # None: latency does not move the window
        self.active = 0
        self.peak = 0  # the most requests in flight at once (for usage and tests)
        self.cuts = 0  # halvings after refusals and timeouts
        self.latency_cuts = 0  # replies whose latency shrank the window
        self.recent: float | None = None  # the moving average of reply latency, in seconds
        self._typical: float | None = None  # the same over more replies
        self._first: list[float] = []  # the first replies' latencies, until there are enough
        self._replies = 0
        self._lows: deque[tuple[int, float]] = deque()  # ascending minima of ``_typical``
        self._last_cut = -_CUT_SPACING
        self._last_latency_cut = -1e9
        self._condition: asyncio.Condition | None = None

    def cap(self, slots: int) -> None:
        """The server serves at most ``slots`` requests at once: never send more."""
        self.ceiling = max(1, min(self.ceiling, slots))
        self.limit = min(self.limit, float(self.ceiling))

    @property
    def baseline(self) -> float | None:
        """What an unqueued reply takes, in seconds (None until enough replies came)."""
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
        gradient = 1.0
        if latency is not None and self.tolerance is not None:
            self._observe(latency)
            if self.baseline is not None and self.recent:
                allowed = self.tolerance * self.baseline + _SLACK
                gradient = min(1.0, allowed / self.recent)
        if gradient < 1.0:
            self.starting = False
            # Once per round trip: the replies of requests sent before a cut still carry the
            # old queue, and cutting again for each of them would shrink the window to nothing.
            now = time.monotonic()
            if now - self._last_latency_cut >= (self.recent or 0.0):
                self._last_latency_cut = now
                self.latency_cuts += 1
                self.limit = max(1.0, self.limit * max(_MIN_GRADIENT, gradient))
            return
        followed = latency is not None and self.tolerance is not None
        if self.starting and not followed:
            step = 1.0
        elif self.starting:
            # Held until the first replies tell what an unqueued one takes (growing blind
            # would add to a queue the latency is about to show); then doubled each round
            # trip while replies stay near that, and grown gently once they slow down.
            step = 0.0 if self.baseline is None else 1.0 if self._brisk() else _GROWTH
        elif self.tolerance is None or latency is None:
            step = 1.0 / max(1.0, self.limit)
        else:
            step = _GROWTH
        self.limit = min(float(self.ceiling), self.limit + step)

    def _brisk(self) -> bool:
        """Whether recent replies are nearer the unqueued latency than the tolerance."""
        assert self.tolerance is not None and self.baseline is not None
        allowed = self.baseline * (1.0 + 3.0 * self.tolerance) / 4 + _SLACK
        return (self.recent or 0.0) <= allowed

    def _observe(self, latency: float) -> None:
        """Take in one reply's latency: the recent and the typical latency, the baseline."""
        self.recent = latency if self.recent is None else (
            self.recent + _SMOOTHING * (latency - self.recent))
        self._replies += 1
        if self._typical is None:
            # The first replies of a burst include unqueued ones (a server serves at least
            # one at once): the typical latency starts from the fastest of them but one (a
            # lone fast reply of a server whose latency varies is not the rule).
            self._first.append(latency)
            if len(self._first) < _WARM_UP:
                return
            typical = sorted(self._first)[1]
        else:
            typical = self._typical + _SLOW_SMOOTHING * (latency - self._typical)
        self._typical = typical
        lows = self._lows  # a sliding-window minimum: O(1) per reply
        while lows and lows[-1][1] >= typical:
            lows.pop()
        lows.append((self._replies, typical))
        while lows[0][0] <= self._replies - _BASELINE_REPLIES:
            lows.popleft()

    def overloaded(self) -> None:
        """The server refused or ran late: halve the window (once per burst)."""
        now = time.monotonic()
        if now - self._last_cut < _CUT_SPACING:
            return
        self._last_cut = now
        self.cuts += 1
        self.limit = max(1.0, self.limit / 2)
        self.starting = False
