"""Groups of concurrent requests scored together: one engine call for many requests.

Each request's groups would otherwise be one engine call each, and for a reward that takes
microseconds the call's fixed cost (hops between threads, a job to a worker process and back) is
most of the work. Here a request's groups join a queue; up to ``parallel`` engine calls run at a
time, and each takes everything queued when it starts (up to ``max_rollouts``). Under light load
a request starts its own call on the event loop's next turn, so nothing waits for company; under
heavy load the queue fills while calls run and each call carries many requests.

A call that is slow (a reward near its time limit, say) holds its place for ``patience`` seconds
at most: after that the next call starts beside it, so one slow request holds up the requests
that arrive after it for that long at most. The requests inside one call are answered together,
when its last rollout is scored.

Groups keep their boundaries, each request gets its own groups' scores in its own order, and the
engine's limits (hard timeouts, memory, a crashed worker) apply to every call as before.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..engine import Engine
from ..types import Rollout, Score
from ._watch import StallWatch

__all__ = ["GroupBatcher"]

# Below this many rollouts a call goes to one worker: splitting it would cost more than it saves.
_SPLIT_ROLLOUTS = 128


# After a call, its requests' scores and tags -> one outcome per request (None: fine).
Finish = Callable[[list[list[list[Score]]], list[Hashable]], list[Exception | None]]
Outcome = tuple[list[list[Score]], Exception | None]


@dataclass
class _Waiting:
    groups: Sequence[Sequence[Rollout]]
    size: int
    tag: Hashable
    future: asyncio.Future[Outcome] = field(repr=False)


class GroupBatcher:
    """Scores the groups of concurrent requests in shared engine calls (see the module)."""

    def __init__(self, engine: Engine, *, parallel: int, max_rollouts: int,
                 finish: Finish | None = None, on_call: Callable[[int], None] | None = None,
                 patience: float = 0.05, watch: StallWatch | None = None):
        self.engine = engine
        self.parallel = max(1, parallel)
        self.max_rollouts = max(1, max_rollouts)
        self.patience = patience
        self.finish = finish
        self.on_call = on_call  # told each call's number of requests (metrics)
        self.watch = watch  # told when each call begins and ends (``/health``)
        rubric = engine.rubric
        # When no reward looks at a group as a whole, the engine scores each rollout on its own:
        # the groups of a call can go to it as one list (no thread to wait on the engine).
        self._flat = not any(c.group or c.evaluator is not None for c in rubric.components)
        self._queue: deque[_Waiting] = deque()
        self._running: dict[asyncio.Task[None], list[_Waiting]] = {}  # calls: their requests
        self._fresh: set[asyncio.Task[None]] = set()  # running for less than ``patience``
        self._kick: asyncio.Handle | None = None
        # Threads that wait on the engine for calls with group rewards or judges: a pool of
        # their own, so calls held up by a slow judge never keep the loop's default pool (and
        # the engine's shutdown, which runs there) waiting.
        self._threads = ThreadPoolExecutor(32, thread_name_prefix="rewardsmith-calls")

    async def score(self, groups: Sequence[Sequence[Rollout]], tag: Hashable = None) -> Outcome:
        """The scores of ``groups`` (one list per group, in order) and what ``finish`` said of
        them (it sees the scores of every request in the call with its ``tag``)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Outcome] = loop.create_future()
        waiting = _Waiting(groups, sum(len(g) for g in groups), tag, future)
        self._queue.append(waiting)
        if self._kick is None:
            # On the loop's next turn: the requests read in this turn share the call.
            self._kick = loop.call_soon(self._start_calls)
        try:
            return await future
        except asyncio.CancelledError:
            self._forsake(waiting)
            raise

    def _forsake(self, waiting: _Waiting) -> None:
        """Its request is gone (the client left, the server stops): a queued request leaves the
        queue (``_start_calls`` skips it); a call whose requests are all gone is cancelled."""
        waiting.future.cancel()
        for task, members in self._running.items():
            if waiting in members:
                if all(member.future.done() for member in members):
                    task.cancel()
                return

    def _start_calls(self) -> None:
        self._kick = None
        loop = asyncio.get_running_loop()
        while self._queue and len(self._fresh) < self.parallel:
            taken: list[_Waiting] = []
            size = 0
            while self._queue and (not taken or size + self._queue[0].size <= self.max_rollouts):
                waiting = self._queue.popleft()
                if waiting.future.done():
                    continue  # its request timed out or was cancelled while it queued
                taken.append(waiting)
                size += waiting.size
            if not taken:
                return
            if self.on_call is not None:
                self.on_call(len(taken))
            task = asyncio.ensure_future(self._call(taken))
            self._running[task] = taken
            self._fresh.add(task)
            if self.watch is not None:
                self.watch.begin(task, size)
            task.add_done_callback(self._finished)
            loop.call_later(self.patience, self._stale, task)

    def _stale(self, task: asyncio.Task[None]) -> None:
        if task in self._fresh:
            self._fresh.discard(task)
            self._start_calls()

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.pop(task, None)
        self._fresh.discard(task)
        if self.watch is not None:
            self.watch.end(task)
        if not task.cancelled():
            task.exception()  # retrieved: _call has handed any error to its requests
        self._start_calls()

    async def _call(self, taken: list[_Waiting]) -> None:
        groups = [group for waiting in taken for group in waiting.groups]
        try:
            scored = await self._score(groups)
            parts = []
            start = 0
            for waiting in taken:
                parts.append(scored[start : start + len(waiting.groups)])
                start += len(waiting.groups)
            outcomes: list[Exception | None] = (
                self.finish(parts, [waiting.tag for waiting in taken])
                if self.finish is not None else [None] * len(taken))
        except BaseException as exc:
            for waiting in taken:
                if not waiting.future.done():
                    if isinstance(exc, asyncio.CancelledError):
                        waiting.future.cancel()
                    else:
                        waiting.future.set_exception(exc)
            raise
        for waiting, part, outcome in zip(taken, parts, outcomes):
            if not waiting.future.done():
                waiting.future.set_result((part, outcome))

    async def _score(self, groups: list[Sequence[Rollout]]) -> list[list[Score]]:
        if len(groups) == 1:
            return [await self.engine.ascore_group(groups[0])]
        if not self._flat:
            # Group rewards or judges: the engine spreads whole groups over its workers.
            return await asyncio.get_running_loop().run_in_executor(
                self._threads, lambda: list(self.engine.stream(groups, coalesce=True)))
        rollouts = [rollout for group in groups for rollout in group]
        if not rollouts:
            return [[] for _ in groups]
        parts = max(1, min(self.engine.workers, len(rollouts) // _SPLIT_ROLLOUTS))
        step = -(-len(rollouts) // parts)
        chunks = await asyncio.gather(*(self.engine.ascore_group(rollouts[at : at + step])
                                        for at in range(0, len(rollouts), step)))
        scores = [score for chunk in chunks for score in chunk]
        out = []
        start = 0
        for group in groups:
            out.append(scores[start : start + len(group)])
            start += len(group)
        return out

    async def abandon(self) -> None:
        """Cancel every call and every queued request (at shutdown, before the engine closes)."""
        while self._queue:
            self._queue.popleft().future.cancel()
        running = list(self._running)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        # Threads still waiting end when the engine closes (it answers every caller).
        self._threads.shutdown(wait=False)
