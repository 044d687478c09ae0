"""A spare worker, started ahead of need by a driver that has had to replace one, so that the next replacement is at once."""

from __future__ import annotations

import contextlib
import pickle
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING

from rewardsmith.workers._batches import (
    _Worker,
)
from rewardsmith.workers._processes import WARM_UP_SECONDS

if TYPE_CHECKING:
    from rewardsmith.workers._pool import WorkerPool


class _Spare:
    """A worker started ahead of need, so that a killed worker is replaced at once.

    Only a driver that has had to replace a worker keeps one: a run without faults starts no
    extra process. The spare starts in a thread of its own and loads every registered program,
    so the time a replacement takes (a fork, loading the reward) is spent off the critical path.
    """

    def __init__(self, pool: WorkerPool):
        self.pool = pool
        self.future: Future[_Worker] | None = None
        self.free: list[_Worker] = []  # dead workers whose shared blocks can be used again

    def replace(self, dead: _Worker) -> _Worker:
        """A worker to take over from ``dead`` (killed and reaped)."""
        worker: _Worker | None = None
        if self.future is not None:
            try:
                worker = self.future.result()
            except Exception:  # noqa: BLE001 - start one the usual way below
                worker = None
            self.future = None
            if worker is not None and not worker.process.is_alive():
                self.pool._kill(worker, replaced=False)
                worker = None
        if worker is None:
            worker = self.pool._spawn(dead)
        else:
            self.free.append(dead)
        self._prepare_next()
        return worker

    def _prepare_next(self) -> None:
        future: Future[_Worker] = Future()
        dead = self.free.pop() if self.free else None
        programs = dict(self.pool._programs)

        def start() -> None:
            try:
                worker = self.pool._spawn(dead)
                for key, blob in programs.items():
                    worker.conn.send_bytes(pickle.dumps(("register", key, blob)))
                    if not worker.conn.poll(WARM_UP_SECONDS):
                        self.pool._kill(worker, replaced=False)
                        raise TimeoutError("loading the reward took too long")
                    reply = pickle.loads(worker.conn.recv_bytes())
                    if reply[2] is None:
                        worker.known.add(key)
                future.set_result(worker)
            except BaseException as exc:  # noqa: BLE001 - the driver starts one itself
                future.set_exception(exc)

        threading.Thread(target=start, name="rewardsmith-spare", daemon=True).start()
        self.future = future

    def close(self) -> None:
        if self.future is None:
            return
        try:
            worker = self.future.result(timeout=30)
        except Exception:  # noqa: BLE001 - nothing started, nothing to stop
            return
        with contextlib.suppress(Exception):
            worker.conn.send_bytes(pickle.dumps(("stop",)))
        worker.process.join(timeout=1)
        self.pool._kill(worker, replaced=False)
