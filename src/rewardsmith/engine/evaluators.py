"""What the engine asks of an evaluator (a judge, a reward model) beyond scoring, each a small protocol checked at run time, and the thread that runs the engine's own event loop for them."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class _Checked(Protocol):
    async def check(self) -> None: ...


@runtime_checkable
class _Metered(Protocol):
    def usage(self) -> dict[str, float]: ...

    def usage_key(self) -> str: ...


@runtime_checkable
class _Closable(Protocol):
    def close(self) -> Any: ...


@runtime_checkable
class _StoreAware(Protocol):
    def attach_store(self, path: str) -> None: ...


class _LoopThread:
    """A private event loop in a daemon thread: async rewards and judges always run here."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="rewardsmith-loop",
                                        daemon=True)
        self._thread.start()

    def submit(self, coro: Any) -> Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        """Cancel what still runs here (its callers get ``CancelledError`` instead of waiting
        for ever), then stop the loop."""
        if self.loop.is_closed():
            return

        async def cancel_the_rest() -> bool:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            # A task cancelled before and still running ignores its cancellation (an
            # abandoned call): it is not waited for.
            waited = [t for t in tasks if not _cancelling(t)]
            for task in tasks:
                task.cancel()
            if waited:
                await asyncio.wait(waited, timeout=5)
            return all(t.done() for t in tasks)

        try:
            stopped = self.submit(cancel_the_rest()).result(timeout=6)
        except Exception:  # noqa: BLE001 - stopping goes on whatever the tasks did
            stopped = False
        if not stopped:
            # A coroutine that will not stop would spin when its loop is closed under it (its
            # `except:` catches "Event loop is closed"): the loop is left running in its
            # daemon thread, which ends with the process.
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()


def _cancelling(task: asyncio.Task[Any]) -> int:
    """How many cancellations ``task`` has been asked for (0 before Python 3.11, which does
    not count them)."""
    count = getattr(task, "cancelling", None)
    return int(count()) if count is not None else 0
