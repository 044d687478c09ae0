"""A grade being settled: shared by everyone who asked for it, resolved exactly once.

Plain objects rather than asyncio futures: a replayed run resolves thousands of grades in one
go, and a future per grade would cost a scheduled callback per waiter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from ..types import ComponentResult

__all__ = ["Pending", "wait_all"]


class _Countdown:
    __slots__ = ("future", "left")

    def __init__(self, future: asyncio.Future[None], left: int):
        self.future = future
        self.left = left

    def tick(self) -> None:
        self.left -= 1
        if self.left == 0 and not self.future.done():
            self.future.set_result(None)


class Pending:
    """One grade: ``result`` is None until ``resolve`` sets it; later calls are ignored."""

    __slots__ = ("result", "_countdowns", "_callbacks")

    def __init__(self, result: ComponentResult | None = None):
        self.result = result
        self._countdowns: list[_Countdown] = []
        self._callbacks: list[Callable[[ComponentResult], None]] = []

    @property
    def done(self) -> bool:
        return self.result is not None

    def resolve(self, result: ComponentResult) -> None:
        if self.result is not None:
            return
        self.result = result
        countdowns, self._countdowns = self._countdowns, []
        callbacks, self._callbacks = self._callbacks, []
        for countdown in countdowns:
            countdown.tick()
        for callback in callbacks:
            callback(result)

    def then(self, callback: Callable[[ComponentResult], None]) -> None:
        """Call ``callback(result)`` once resolved (now, if it already is)."""
        if self.result is not None:
            callback(self.result)
        else:
            self._callbacks.append(callback)


async def wait_all(pendings: Sequence[Pending]) -> list[ComponentResult]:
    """Wait until every grade is resolved; their results, in order."""
    waiting = [p for p in pendings if p.result is None]
    if waiting:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        countdown = _Countdown(future, len(waiting))
        for pending in waiting:
            pending._countdowns.append(countdown)
        await future
    return [p.result for p in pendings if p.result is not None]
