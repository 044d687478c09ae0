"""The Ray backend: batches of whole groups go to the nodes of a Ray cluster.

Each node runs one coordinating actor that owns a local ``WorkerPool``, so every guarantee of
the local engine holds on the cluster unchanged: hard per-call time and memory limits (a
looping reward is killed by the node's pool, never by a Ray cancel), crash isolation, a worker
death costing one rollout, finished calls never run twice. The unit of work is a batch, never
a rollout: one Ray call per rollout would cost far more than most rewards.

Judges stay on the driver (network I/O, one paid-once ledger); only CPU work goes to the
cluster. Rewards travel as the worker programs do: functions by value, import paths as text
(which each node must be able to import: the same files on every node, or Ray's
``runtime_env``, e.g. ``{"working_dir": "."}``, passed as ``ray_runtime_env``).

A dead node is not a lost run. A batch larger than ``_PART_CALLS`` calls goes out in parts (its
shared payload put in the object store once, owned by the driver), so the parts a node has
answered are kept whatever happens to it later. A part whose node actor dies (``kill -9`` of the
actor or of the node's raylet) is sent again to a node that is alive, after a fresh actor is
started on the dead actor's node when that node is still alive; only the calls of the parts the
dead node had not answered run again. The run fails only when no node is left.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import cloudpickle

from rewardsmith.workers import (
    BatchResult,
    WorkerPool,
    format_exception,
)

from ..errors import LoadError
from .backends import PROGRAM_MODULES

__all__ = ["RayExecutor"]


class _NodePool:
    """A Ray actor: the local worker pool of one node."""

    def __init__(self, size: int | None):
        self.pool = WorkerPool(size, preload=PROGRAM_MODULES)

    def register(self, key: str, blob: bytes) -> None:
        self.pool.register(key, cloudpickle.loads(blob))

    def run(self, key: str, items: Sequence[Any], limits: Sequence[float], shared: Any,
            memory: Sequence[float] | None, concurrency: int) -> tuple[BatchResult, int]:
        future = self.pool.run(key, items, limits, shared, memory=memory,
                               concurrency=concurrency)
        return future.result(), self.pool.replaced

    def close(self) -> None:
        self.pool.close()


class RayExecutor:
    """Runs programs on every alive node of a Ray cluster (see the module docstring).

    Connects to ``address`` when given; otherwise uses the cluster this process is already
    connected to, or starts a local one, which ``close`` stops again (only a cluster it
    started).
    """

    def __init__(self, *, workers_per_node: int | None = None, address: str | None = None,
                 runtime_env: dict[str, Any] | None = None):
        try:
            import ray as ray_module
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        except ImportError as exc:
            raise LoadError("the Ray backend needs Ray: pip install 'rewardsmith[ray]'") from exc
        ray: Any = ray_module  # Ray's own annotations cover only part of its API
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if runtime_env:
                options["runtime_env"] = runtime_env
            if address:
                ray.init(address=address, **options)
            else:
                ray.init(**options)
                self._started = True
        node_actor = ray.remote(num_cpus=0, max_concurrency=64)(_NodePool)
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        if not nodes:
            raise LoadError("the Ray cluster has no alive node to score on")
        self._node_actor = node_actor
        self._strategy = NodeAffinitySchedulingStrategy
        self._workers_per_node = workers_per_node
        self._programs: dict[str, bytes] = {}
        self._actors: list[Any] = []
        self._node_ids: list[str] = []
        self._alive: list[bool] = []
        for node in nodes:
            self._add_actor(node)
        self._in_flight = [0] * len(self._actors)
        self._replaced = [0] * len(self._actors)
        self._lock = threading.Lock()
        self.retried = 0  # parts sent again after their node died
        self._restarted: set[int] = set()  # dead actors whose replacement was tried

    def _add_actor(self, node: dict[str, Any]) -> Any:
        size = self._workers_per_node or max(1, int(node.get("Resources", {}).get("CPU", 1)))
        strategy = self._strategy(node["NodeID"], soft=False)
        actor = self._node_actor.options(scheduling_strategy=strategy).remote(size)
        self._actors.append(actor)
        self._node_ids.append(node["NodeID"])
        self._alive.append(True)
        return actor

    @property
    def nodes(self) -> int:
        return sum(self._alive)

    @property
    def replaced(self) -> int:
        return sum(self._replaced)

    def register(self, key: str, program: Callable[[Any, Any], Any]) -> None:
        try:
            blob = cloudpickle.dumps(program)
        except Exception as exc:
            raise LoadError(f"the reward cannot be sent to the Ray cluster "
                            f"({format_exception(exc)}): define it as a plain function at the "
                            f"top level of a module") from exc
        self._programs[key] = blob  # a fresh actor that replaces a dead one gets them all
        self._ray.get([actor.register.remote(key, blob)
                       for actor, alive in zip(self._actors, self._alive) if alive])

    def run(self, key: str, items: Sequence[Any], limits: Sequence[float], shared: Any = None,
            *, memory: Sequence[float] | None = None,
            concurrency: int = 0) -> Future[BatchResult]:
        answer: Future[BatchResult] = Future()
        size = len(items)
        if size <= _PART_CALLS:
            parts = [(0, items, limits, memory)]
        else:
            shared = self._ray.put(shared)  # sent to each node once, for all its parts
            parts = [(start, items[start : start + _PART_CALLS],
                      [limits[i] for i in range(start, min(size, start + _PART_CALLS))],
                      None if memory is None else
                      [memory[i] for i in range(start, min(size, start + _PART_CALLS))])
                     for start in range(0, size, _PART_CALLS)]
        batch = _Batch(answer, size, len(parts))
        for part in parts:
            self._send(key, part, shared, concurrency, batch, tries=0)
        return answer

    def _send(self, key: str, part: _Part, shared: Any, concurrency: int, batch: _Batch,
              tries: int) -> None:
        start, items, limits, memory = part
        with self._lock:  # the live node with the fewest batches in flight
            live = [i for i, alive in enumerate(self._alive) if alive]
            if not live:
                batch.fail(RuntimeError("every node of the Ray cluster has died"))
                return
            index = min(live, key=self._in_flight.__getitem__)
            self._in_flight[index] += 1
            actor = self._actors[index]
        ref = actor.run.remote(key, items, limits, shared, memory, concurrency)

        def finished(done: Future[Any]) -> None:
            with self._lock:
                self._in_flight[index] -= 1
            try:
                result, replaced = done.result()
            except Exception as exc:  # noqa: BLE001 - the cause, as the local pool raises it
                if _node_died(exc) and tries < _MAX_TRIES:
                    # Sent again from a thread of our own: starting a fresh actor waits on Ray,
                    # which this callback's thread must not do.
                    threading.Thread(target=self._again, name="rewardsmith-ray-retry",
                                     args=(index, actor, key, part, shared, concurrency, batch,
                                           tries), daemon=True).start()
                    return
                cause = getattr(exc, "cause", None)
                batch.fail(cause if isinstance(cause, Exception) else exc)
                return
            self._replaced[index] = replaced
            batch.done(start, result)

        ref.future().add_done_callback(finished)

    def _again(self, index: int, actor: Any, key: str, part: _Part, shared: Any,
               concurrency: int, batch: _Batch, tries: int) -> None:
        with self._lock:
            self.retried += 1
            first = self._alive[index] and self._actors[index] is actor  # first to hear of it
            self._alive[index] = False
            others = any(self._alive)
        if others:  # the live nodes take it now; a fresh actor joins them when it is ready
            self._send(key, part, shared, concurrency, batch, tries + 1)
        if first:
            try:
                self._restart(index)
            except Exception:  # noqa: BLE001 - the parts go to the nodes that are left
                pass
        if not others:
            self._wait_for_restart(index)
            self._send(key, part, shared, concurrency, batch, tries + 1)

    def _restart(self, index: int) -> None:
        """A fresh actor in place of dead actor ``index`` when its node is still alive."""
        node_id = self._node_ids[index]
        node = next((n for n in self._ray.nodes() if n["NodeID"] == node_id and n.get("Alive")),
                    None)
        if node is not None:
            with self._lock:
                fresh = self._add_actor(node)
                self._in_flight.append(0)
                self._replaced.append(0)
                self._alive[-1] = False  # until it has the programs
                position = len(self._alive) - 1
            self._ray.get([fresh.register.remote(k, blob) for k, blob in self._programs.items()],
                          timeout=_RESTART_SECONDS)
            with self._lock:
                self._alive[position] = True
        with self._lock:
            self._restarted.add(index)

    def _wait_for_restart(self, index: int) -> None:
        deadline = time.monotonic() + _RESTART_SECONDS + 10
        while time.monotonic() < deadline:
            with self._lock:
                if index in self._restarted or any(self._alive):
                    return
            time.sleep(0.05)

    def close(self) -> None:
        """Stop every node's workers; stop the cluster too when this executor started it."""
        ray = self._ray
        for actor, alive in zip(self._actors, self._alive):
            if alive:
                try:
                    ray.get(actor.close.remote(), timeout=30)
                except Exception:  # noqa: BLE001 - killed below all the same
                    pass
            try:
                ray.kill(actor)
            except Exception:  # noqa: BLE001 - a dead actor is gone already
                pass
        self._actors = []
        if self._started and ray.is_initialized():
            ray.shutdown()


# Calls of a batch sent to a node in one Ray call: a larger batch is split, so that a node that
# dies costs only the calls of the parts it had not answered.
_PART_CALLS = 256
# How often one part is sent again after its node died.
_MAX_TRIES = 8
# How long a fresh actor may take to start and load the programs.
_RESTART_SECONDS = 120.0

# (first call's position in its batch, items, time limits, memory limits)
_Part = tuple[int, Sequence[Any], Sequence[float], Sequence[float] | None]


def _node_died(exc: BaseException) -> bool:
    """The error says the actor or its node is gone (not that the batch itself failed)."""
    from ray import exceptions

    return isinstance(exc, (exceptions.RayActorError, exceptions.NodeDiedError,
                            exceptions.WorkerCrashedError, exceptions.ObjectLostError,
                            exceptions.LocalRayletDiedError))


class _Batch:
    """A batch's parts coming back from the nodes: one answer once they all have."""

    def __init__(self, answer: Future[BatchResult], size: int, parts: int):
        self.answer = answer
        self.size = size
        self.results: list[tuple[int, BatchResult]] = []
        self.parts = parts
        self.lock = threading.Lock()

    def done(self, start: int, result: BatchResult) -> None:
        with self.lock:
            self.results.append((start, result))
            if len(self.results) < self.parts or self.answer.done():
                return
        if self.parts == 1:
            self.answer.set_result(result)
            return
        values: list[Any] = [None] * self.size
        failures: dict[int, Any] = {}
        for offset, part in self.results:
            values[offset : offset + len(part.values)] = list(part.values)
            for index, outcome in part.failures.items():
                failures[offset + index] = outcome
        self.answer.set_result(BatchResult(values, failures))

    def fail(self, exc: BaseException) -> None:
        with self.lock:
            if self.answer.done():
                return
            self.answer.set_exception(exc)
