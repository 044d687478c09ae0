"""Judge limits shared by every process of a Ray job: one named limiter actor.

Every process that scores with a judge whose limits are shared (the driver, each trainer
rank's actor, each engine) finds the actor by name in its Ray namespace (each job has its
own unless one is named) or creates it (``get_if_exists``), and joins it as a member. The
actor is detached, so it outlives the process that happened to create it, and it stops itself
once no member has been left for ``IDLE_EXIT`` seconds: the budget covers the processes that
run at the same time, as in the store scope.

The actor holds, per limits key: the concurrency slots in flight and who holds them, the two
token buckets and the budget's running totals. A request for a slot waits in the actor until
one is free (at most ``_SLOT_WAIT`` seconds a call, then the member asks again). A member is
gone when its process is (checked by pid and start time when it runs on the actor's node), or
when its heartbeat (every ``HEARTBEAT`` seconds) is older than ``LEASE`` seconds; its slots
go back to the others then.

Ray is imported only here, and only when a judge's limits hold in the ``ray`` scope.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from rewardsmith._system.process_identity import ProcessIdentity

from ..errors import JudgeError
from .limit_settings import FULL, LimitSettings, bucket_reserve

__all__ = ["ACTOR_NAME", "HEARTBEAT", "LEASE", "LimiterActor", "RayLimits"]

ACTOR_NAME = "rewardsmith-judge-limits"
HEARTBEAT = 5.0
LEASE = 30.0
IDLE_EXIT = 60.0
REJOIN = "rejoin"  # the actor's answer to a process it does not know (taken for gone)
_SLOT_WAIT = 1.0  # seconds one acquire call waits in the actor for a free slot
_WATCH_EVERY = 1.0


@dataclass
class _Member:
    key: str
    identity: ProcessIdentity
    seen_at: float


@dataclass
class _KeyState:
    settings: LimitSettings
    slots: dict[str, str] = field(default_factory=dict)  # slot id -> member token
    freed: asyncio.Event = field(default_factory=asyncio.Event)
    buckets: dict[str, tuple[float, float]] = field(default_factory=dict)  # level, updated
    calls: int = 0
    tokens: int = 0
    cost: float = 0.0


class LimiterActor:
    """The actor's state and methods (async: every method runs on the actor's one loop, so
    no method sees another's half-done update)."""

    def __init__(self) -> None:
        self.host = socket.gethostname()
        self.keys: dict[str, _KeyState] = {}
        self.members: dict[str, _Member] = {}
        self.idle_since = time.time()
        self._watcher: asyncio.Task[None] | None = None

    async def join(self, token: str, identity: ProcessIdentity, settings: LimitSettings) -> None:
        if self._watcher is None:
            self._watcher = asyncio.get_running_loop().create_task(self._watch())
        self._reap(time.time())
        state = self.keys.get(settings.key)
        if state is None or not any(m.key == settings.key for m in self.members.values()):
            state = self.keys[settings.key] = _KeyState(settings)  # a new run: fresh budget
        state.settings = settings  # the latest member's limits stand
        self.members[token] = _Member(settings.key, identity, time.time())

    async def beat(self, token: str) -> bool:
        """Renew a member's heartbeat; False when it was taken for gone (it must join again)."""
        member = self.members.get(token)
        if member is None:
            return False
        member.seen_at = time.time()
        return True

    async def leave(self, token: str) -> None:
        member = self.members.pop(token, None)
        if member is not None:
            self._drop_slots(member.key, {token})

    async def acquire(self, token: str, key: str, want_slot: bool,
                      requests: float) -> tuple[str | None, str | None, float] | str:
        if token not in self.members:
            return REJOIN
        state = self.keys[key]
        deadline = time.monotonic() + _SLOT_WAIT
        while True:
            spent = state.settings.spent(state.calls, state.tokens, state.cost)
            if spent is not None:
                return None, spent, 0.0
            if not want_slot or len(state.slots) < state.settings.max_concurrency:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                return FULL
            state.freed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(state.freed.wait(), min(left, _WATCH_EVERY))
        slot = None
        if want_slot:
            slot = uuid.uuid4().hex
            state.slots[slot] = token
        if state.settings.has_budget:
            state.calls += 1
        return slot, None, self._reserve(state, requests, 0.0, 0.0)

    async def release(self, token: str, key: str, slot: str | None, tokens: int, cost: float,
                      token_debt: float) -> str | None:
        if token not in self.members:
            return REJOIN
        state = self.keys[key]
        if slot is not None and state.slots.pop(slot, None) is not None:
            state.freed.set()
        state.tokens += tokens
        state.cost += cost
        if token_debt and "tokens" in state.buckets:
            level, at = state.buckets["tokens"]
            state.buckets["tokens"] = (level - token_debt, at)
        return None

    async def pace(self, token: str, key: str, requests: float, tokens: float,
                   token_debt: float) -> float | str:
        if token not in self.members:
            return REJOIN
        return self._reserve(self.keys[key], requests, tokens, token_debt)

    @staticmethod
    def _reserve(state: _KeyState, requests: float, tokens: float, token_debt: float) -> float:
        """Take from the buckets now; the seconds the caller waits before sending."""
        now = time.time()
        wait = 0.0
        for name, per_minute, cost, debt in (
                ("requests", state.settings.requests_per_minute, requests, 0.0),
                ("tokens", state.settings.tokens_per_minute, tokens, token_debt)):
            if per_minute is None or (not cost and not debt):
                continue
            level, at = state.buckets.get(name, (max(1.0, per_minute / 60.0), now))
            level, seconds = bucket_reserve(level, at, now, per_minute, cost, debt)
            state.buckets[name] = (level, now)
            wait = max(wait, seconds)
        return wait

    async def held(self, key: str) -> int:
        """Slots in flight for ``key`` (for tests and diagnostics)."""
        state = self.keys.get(key)
        return 0 if state is None else len(state.slots)

    def _drop_slots(self, key: str, tokens: set[str]) -> None:
        state = self.keys.get(key)
        if state is None:
            return
        for slot in [s for s, owner in state.slots.items() if owner in tokens]:
            del state.slots[slot]
        state.freed.set()

    def _gone(self, member: _Member, now: float) -> bool:
        if member.identity.host == self.host:
            liveness = member.identity.liveness()
            if liveness != "unknown":
                return liveness == "gone"
        return member.seen_at < now - LEASE

    def _reap(self, now: float) -> None:
        gone = [t for t, m in self.members.items() if self._gone(m, now)]
        for token in gone:
            member = self.members.pop(token)
            self._drop_slots(member.key, {token})
        if self.members:
            self.idle_since = now

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(_WATCH_EVERY)
            now = time.time()
            self._reap(now)
            if not self.members and now - self.idle_since > IDLE_EXIT:
                import ray  # inside the actor, Ray is there

                ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
                return


class RayLimits:
    """The ``SharedLimits`` of one judge's key in the job's limiter actor (see the module
    docstring). Calls the actor from the run's event loop without blocking it."""

    def __init__(self, settings: LimitSettings):
        self.settings = settings
        self.key = settings.key
        self.token = uuid.uuid4().hex
        self._actor: Any = None
        self._heartbeat: asyncio.Task[None] | None = None

    def _find_or_create(self) -> Any:
        try:
            import ray as ray_module
        except ImportError as exc:  # resolve() only picks this scope with Ray connected
            raise JudgeError("limit_scope: ray needs Ray: pip install 'rewardsmith[ray]'") from exc
        ray: Any = ray_module  # Ray's own annotations cover only part of its API
        remote: Any = ray.remote(num_cpus=0, max_concurrency=1000)(LimiterActor)
        return remote.options(name=ACTOR_NAME, get_if_exists=True, lifetime="detached").remote()

    async def _ask(self, method: str, *args: Any) -> Any:
        from ray.exceptions import RayActorError

        for attempt in (1, 2):
            rejoin = self._actor is None
            if rejoin:
                self._actor = self._find_or_create()
            try:
                if rejoin and method != "join":
                    await self._join_actor()
                answer = await self._await(getattr(self._actor, method).remote(*args))
            except RayActorError:
                # The actor stopped (idle, or its node died): a new one starts afresh.
                self._actor = None
                if attempt == 2:
                    raise
                continue
            if answer == REJOIN and attempt == 1:
                await self._join_actor()  # taken for gone while it stalled: join again
                continue
            return answer
        raise JudgeError(f"{self.key}: the Ray limiter actor keeps forgetting this process")

    async def _join_actor(self) -> None:
        await self._await(self._actor.join.remote(self.token, ProcessIdentity.current(),
                                                  self.settings))

    @staticmethod
    def _await(ref: Any) -> Awaitable[Any]:
        return asyncio.wrap_future(ref.future())

    async def join(self) -> None:
        await self._ask("join", self.token, ProcessIdentity.current(), self.settings)
        self._heartbeat = asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT)
            with contextlib.suppress(Exception):  # the next beat tries again
                if not await self._ask("beat", self.token):
                    await self._join_actor()

    async def acquire(self, want_slot: bool,
                      requests: float) -> tuple[str | None, str | None, float] | str:
        outcome = await self._ask("acquire", self.token, self.key, want_slot, requests)
        if isinstance(outcome, (tuple, list)):
            slot, spent, wait = outcome
            return slot, spent, float(wait)
        return str(outcome)

    async def release(self, slot: str | None, tokens: int, cost: float,
                      token_debt: float) -> None:
        await self._ask("release", self.token, self.key, slot, tokens, cost, token_debt)

    async def pace(self, requests: float, tokens: float, token_debt: float) -> float:
        return float(await self._ask("pace", self.token, self.key, requests, tokens, token_debt))

    async def close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
            self._heartbeat = None
        if self._actor is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._await(self._actor.leave.remote(self.token)), 10)
            self._actor = None

    def abandon(self) -> None:
        """Leave without awaiting (the run's event loop is gone): fire and forget."""
        if self._heartbeat is not None:
            with contextlib.suppress(RuntimeError):  # its loop may be closed already
                self._heartbeat.cancel()
            self._heartbeat = None
        if self._actor is not None:
            with contextlib.suppress(Exception):
                self._actor.leave.remote(self.token)
            self._actor = None
