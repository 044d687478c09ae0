"""A judge's limits on its calls, and the scope over which each holds.

The limits: ``max_concurrency`` (calls in flight), ``requests_per_minute``,
``tokens_per_minute`` and the ``budget`` (calls, tokens, cost). Their scope:

- ``process``: each process (each engine) counts alone, as a plain asyncio semaphore and token
  buckets. Eight trainer ranks on one endpoint then send eight times the limit.
- ``store``: every process that shares the judge's store file on one machine. The state lives
  in a SQLite file beside the store (``<store>-limits``; see ``limits_store``).
- ``ray``: every process of a Ray job, through one named limiter actor (see ``limits_ray``).

``limit_scope: auto`` (the default) shares the limits a judge sets (any of
``max_concurrency``, the two rates, a budget) with the Ray job when this process is connected
to Ray, else with the store's other processes; a judge that sets none stays per process and
never opens the limits file. The default ``max_concurrency`` (16, not set) is a per-process
bound in every scope: each process also keeps it locally, so a shared limit adds to it.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from dataclasses import dataclass
from typing import Literal, Protocol

from rewardsmith.judge.limit_settings import (  # re-exported: callers import them here
    FULL as FULL,
)
from rewardsmith.judge.limit_settings import (
    LimitSettings as LimitSettings,
)
from rewardsmith.judge.limit_settings import (
    bucket_reserve as bucket_reserve,
)
from rewardsmith.judge.limit_settings import (
    ray_connected,
)

from ..errors import JudgeError
from .config import LimitScope

__all__ = ["FULL", "LimitScope", "LimitSettings", "Limits", "RateLimiter", "SharedLimits",
           "Ticket", "limits_path"]

_FIRST_POLL = 0.002  # seconds between tries for a shared slot at first; doubles to _MAX_POLL
_MAX_POLL = 0.05


class RateLimiter:
    """A token bucket that may go into debt: a large request waits for the bucket, not forever.

    The bucket holds one second's worth of ``per_minute`` (at least 1); a request waits until
    the level is positive, then takes its cost.
    """

    def __init__(self, per_minute: float):
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self.updated = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
        self.updated = now

    async def acquire(self, cost: float = 1.0) -> None:
        async with self._lock:
            self._refill()
            while self.level <= 0:
                await asyncio.sleep(min(5.0, (1e-3 - self.level) / self.rate))
                self._refill()
            self.level -= cost

    def adjust(self, delta: float) -> None:
        """Charge (or give back) the difference between an estimate and the real cost."""
        self._refill()
        self.level -= delta


def limits_path(store_path: str) -> str:
    """The SQLite file beside a store that holds its judges' shared limits."""
    return f"{store_path}-limits"


@dataclass
class Ticket:
    """Leave to make one call (``spent`` is None), or the budget limit that refuses it.
    The caller charges what the call cost before giving the ticket back.

    In a shared scope with a requests-per-minute limit, taking the ticket also reserved the
    call's first request (one round trip instead of two): ``ready_at`` is when it may be sent,
    and ``prepaid_by`` the limits whose first ``pace`` inside the ticket uses it."""

    slot: str | None
    spent: str | None
    tokens: int = 0
    cost: float = 0.0
    ready_at: float = 0.0  # time.monotonic()
    prepaid_by: object | None = None

    def charge(self, tokens: int, cost: float) -> None:
        self.tokens += tokens
        self.cost += cost


class SharedLimits(Protocol):
    """The state a scope wider than the process keeps (a SQLite file, a Ray actor)."""

    async def join(self) -> None: ...

    async def acquire(self, want_slot: bool,
                      requests: float) -> tuple[str | None, str | None, float] | str:
        """(slot id or None, budget limit reached or None, seconds to wait before sending),
        or ``FULL``. With ``requests``, a granted call also reserves that many requests from
        the requests bucket (the seconds to wait are for them)."""
        ...

    async def release(self, slot: str | None, tokens: int, cost: float,
                      token_debt: float) -> None: ...

    async def pace(self, requests: float, tokens: float, token_debt: float) -> float:
        """Reserve from the shared buckets; the seconds to wait before sending."""
        ...

    async def close(self) -> None: ...


class Limits:
    """The limits of one judge in one run (one event loop), in whatever scope they hold.

    ``call()`` bounds calls in flight and checks the budget; ``pace(tokens)`` paces each HTTP
    attempt; ``adjust_tokens`` corrects a token estimate once the reply tells the real count.
    """

    def __init__(self, settings: LimitSettings, store_path: str):
        self.settings = settings
        self.store_path = store_path
        self.scope: Literal["process", "store", "ray"] | None = None  # set by open()
        self.exhausted: str | None = None  # the budget limit reached, once it is
        self._semaphore = asyncio.Semaphore(settings.max_concurrency)
        rpm, tpm = settings.requests_per_minute, settings.tokens_per_minute
        self._requests = RateLimiter(rpm) if rpm else None
        self._tokens = RateLimiter(tpm) if tpm else None
        self._calls = 0
        self._tokens_used = 0
        self._cost = 0.0
        self._shared: SharedLimits | None = None
        self._open_lock: asyncio.Lock | None = None
        self._door: asyncio.Lock | None = None  # one task at a time polls for a shared slot
        self._freed: asyncio.Event | None = None
        self._token_debt = 0.0  # estimate errors not yet charged to the shared bucket

    async def open(self) -> None:
        """Decide the scope and join it; raises ``JudgeError``/``StoreError`` if it cannot."""
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if self.scope is not None:
                return
            scope = self.settings.resolve()
            if scope == "store":
                from .limits_store import StoreLimits
                shared: SharedLimits = StoreLimits(limits_path(self.store_path), self.settings)
            elif scope == "ray":
                if not ray_connected():
                    raise JudgeError(f"{self.settings.key}: limit_scope: ray needs this process "
                                     f"to be connected to Ray (ray.init(), or the engine's "
                                     f"backend 'ray')")
                from .limits_ray import RayLimits
                shared = RayLimits(self.settings)
            else:
                self.scope = "process"
                return
            await shared.join()
            self._shared = shared
            self.scope = scope

    def spent(self) -> str | None:
        """The budget limit known to be reached, without asking the shared scope (a call's
        ticket asks): lets a run stop claiming work it could not pay for."""
        if self._shared is None and self.exhausted is None:
            return self.settings.spent(self._calls, self._tokens_used, self._cost)
        return self.exhausted

    def call(self) -> _Call:
        """``async with limits.call() as ticket``: a slot for one call (see ``Ticket``)."""
        return _Call(self)

    async def _acquire(self) -> Ticket:
        if self.scope is None:
            await self.open()
        await self._semaphore.acquire()
        try:
            shared = self._shared
            if shared is None:
                spent = self.settings.spent(self._calls, self._tokens_used, self._cost)
                if spent is None:
                    self._calls += 1
                ticket = Ticket(None, spent)
            elif not self.settings.shared_concurrency and not self.settings.has_budget:
                ticket = Ticket(None, None)  # only the rates are shared: nothing to hold
            else:
                requests = 1.0 if self.settings.requests_per_minute is not None else 0.0
                if self.settings.shared_concurrency:
                    slot, spent, wait = await self._wait_for_slot(shared, requests)
                else:
                    outcome = await shared.acquire(False, requests)
                    assert isinstance(outcome, tuple)  # FULL only answers a slot request
                    slot, spent, wait = outcome
                ticket = Ticket(slot, spent)
                if requests and spent is None:
                    ticket.ready_at = time.monotonic() + wait
                    ticket.prepaid_by = self
        except BaseException:
            self._semaphore.release()
            raise
        if ticket.spent is not None:
            self.exhausted = ticket.spent
        return ticket

    async def _wait_for_slot(self, shared: SharedLimits,
                             requests: float) -> tuple[str | None, str | None, float]:
        if self._door is None:
            self._door = asyncio.Lock()
            self._freed = asyncio.Event()
        assert self._freed is not None
        async with self._door:
            delay = _FIRST_POLL
            while True:
                outcome = await shared.acquire(True, requests)
                if isinstance(outcome, tuple):
                    return outcome
                # Every slot is taken: wait until one of ours is given back, or poll again
                # (a slot freed by another process is only seen by asking).
                self._freed.clear()
                try:
                    await asyncio.wait_for(self._freed.wait(), delay)
                except asyncio.TimeoutError:
                    delay = min(_MAX_POLL, delay * 2)
                else:
                    delay = _FIRST_POLL

    async def _release(self, ticket: Ticket) -> None:
        try:
            shared = self._shared
            if shared is None:
                self._tokens_used += ticket.tokens
                self._cost += ticket.cost
            elif ticket.slot is not None or (ticket.spent is None and self.settings.has_budget):
                debt, self._token_debt = self._token_debt, 0.0
                await shared.release(ticket.slot, ticket.tokens, ticket.cost, debt)
        finally:
            self._semaphore.release()
            if self._freed is not None:
                self._freed.set()

    async def pace(self, tokens: float) -> None:
        """Wait until one more request of about ``tokens`` tokens may be sent."""
        if self.scope is None:
            await self.open()
        shared = self._shared
        rpm, tpm = self.settings.requests_per_minute, self.settings.tokens_per_minute
        if shared is not None and (rpm is not None or tpm is not None):
            requests = 1.0 if rpm is not None else 0.0
            wait = 0.0
            ticket = _CURRENT_TICKET.get()
            if ticket is not None and ticket.prepaid_by is self:
                ticket.prepaid_by = None  # the first attempt's request was reserved with it
                wait, requests = ticket.ready_at - time.monotonic(), 0.0
            tokens = tokens if tpm is not None else 0.0
            if requests or tokens or self._token_debt:
                debt, self._token_debt = self._token_debt, 0.0
                wait = max(wait, await shared.pace(requests, tokens, debt))
            if wait > 0:
                await asyncio.sleep(wait)
            return
        if self._requests is not None:
            await self._requests.acquire(1.0)
        if self._tokens is not None:
            await self._tokens.acquire(tokens)

    def adjust_tokens(self, delta: float) -> None:
        """Charge (or give back) the difference between a token estimate and the real count."""
        if self._shared is not None:
            if self.settings.tokens_per_minute is not None:
                self._token_debt += delta  # charged with this process's next shared write
        elif self._tokens is not None:
            self._tokens.adjust(delta)

    async def close(self) -> None:
        """Leave the shared scope: slots still held by this run are given back."""
        shared, self._shared = self._shared, None
        if shared is not None:
            await shared.close()

    def abandon(self) -> None:
        """Let go without an event loop (the loop that used these limits is gone)."""
        shared, self._shared = self._shared, None
        leave = getattr(shared, "abandon", None)
        if leave is not None:
            leave()


# The ticket of the call the running task is making: its first pacing may be paid already.
_CURRENT_TICKET: contextvars.ContextVar[Ticket | None] = contextvars.ContextVar(
    "rewardsmith_judge_ticket", default=None)


class _Call:
    __slots__ = ("limits", "ticket", "_context")

    def __init__(self, limits: Limits):
        self.limits = limits
        self.ticket: Ticket | None = None
        self._context: contextvars.Token[Ticket | None] | None = None

    async def __aenter__(self) -> Ticket:
        self.ticket = await self.limits._acquire()
        self._context = _CURRENT_TICKET.set(self.ticket)
        return self.ticket

    async def __aexit__(self, *exc: object) -> None:
        assert self.ticket is not None
        if self._context is not None:
            _CURRENT_TICKET.reset(self._context)
        await self.limits._release(self.ticket)
