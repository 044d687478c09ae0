"""A hard deadline for an awaitable, even one that swallows its own cancellation.

``asyncio.wait_for`` cancels at the timeout and then waits for the cancellation to finish. A
coroutine that catches ``CancelledError`` and goes on (a bare ``except:`` retry loop around a
hanging request) never finishes it, so ``wait_for`` waits forever. Here the caller gets its
``TimeoutError`` at the deadline (plus a short grace for a well-behaved cancellation); a
coroutine that is still running then is abandoned: left cancelled on the loop, and reported
so that its owner can end it for good (a worker process is replaced).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any

__all__ = ["CANCEL_GRACE", "Abandoned", "await_within"]

# How long a cancelled call may take to finish its cancellation before it is abandoned.
CANCEL_GRACE = 0.1


class Abandoned(asyncio.TimeoutError):
    """The call ran past its deadline and did not stop when cancelled: it still runs."""


async def await_within(awaitable: Awaitable[Any], timeout: float,
                       abandoned: set[asyncio.Future[Any]] | None = None) -> Any:
    """``await awaitable`` for at most ``timeout`` seconds.

    Raises ``asyncio.TimeoutError`` past the deadline once the call has stopped, and
    ``Abandoned`` (a ``TimeoutError``) when it is still running ``CANCEL_GRACE`` seconds after
    its cancellation; it is then kept in ``abandoned`` until it ends on its own.
    """
    task = asyncio.ensure_future(awaitable)
    if timeout == float("inf"):
        return await task
    try:
        done, _ = await asyncio.wait((task,), timeout=timeout)
    except asyncio.CancelledError:  # the caller itself is cancelled: pass it on
        task.cancel()
        raise
    if done:
        return task.result()
    task.cancel()
    done, _ = await asyncio.wait((task,), timeout=CANCEL_GRACE)
    if done:
        with contextlib.suppress(BaseException):
            task.result()  # read, so that asyncio does not report it as never retrieved
        raise asyncio.TimeoutError
    if abandoned is not None:
        abandoned.add(task)
        task.add_done_callback(abandoned.discard)
    task.add_done_callback(_retrieve)
    raise Abandoned


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        with contextlib.suppress(BaseException):
            task.exception()
