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
"""

from __future__ import annotations

import threading
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

__all__ = ["RayExecutor"]


class _NodePool:
    """A Ray actor: the local worker pool of one node."""

    def __init__(self, size: int | None):
        self.pool = WorkerPool(size)

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
        self._actors: list[Any] = []
        for node in nodes:
            size = workers_per_node or max(1, int(node.get("Resources", {}).get("CPU", 1)))
            strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            self._actors.append(node_actor.options(scheduling_strategy=strategy).remote(size))
        self._in_flight = [0] * len(self._actors)
        self._replaced = [0] * len(self._actors)
        self._lock = threading.Lock()

    @property
    def nodes(self) -> int:
        return len(self._actors)

    @property
    def replaced(self) -> int:
        return sum(self._replaced)

    def register(self, key: str, program: Callable[[Any, Any], Any]) -> None:
        try:
            blob = cloudpickle.dumps(program)
        except Exception as exc:  # noqa: BLE001 - named in a clear error
            raise LoadError(f"the reward cannot be sent to the Ray cluster "
                            f"({format_exception(exc)}): define it as a plain function at the "
                            f"top level of a module") from exc
        self._ray.get([actor.register.remote(key, blob) for actor in self._actors])

    def run(self, key: str, items: Sequence[Any], limits: Sequence[float], shared: Any = None,
            *, memory: Sequence[float] | None = None,
            concurrency: int = 0) -> Future[BatchResult]:
        with self._lock:  # the node with the fewest batches in flight
            index = min(range(len(self._actors)), key=self._in_flight.__getitem__)
            self._in_flight[index] += 1
        ref = self._actors[index].run.remote(key, items, limits, shared, memory, concurrency)
        answer: Future[BatchResult] = Future()

        def finished(done: Future[Any]) -> None:
            with self._lock:
                self._in_flight[index] -= 1
            try:
                result, replaced = done.result()
            except Exception as exc:  # noqa: BLE001 - the cause, as the local pool raises it
                cause = getattr(exc, "cause", None)
                answer.set_exception(cause if isinstance(cause, Exception) else exc)
                return
            self._replaced[index] = replaced
            answer.set_result(result)

        ref.future().add_done_callback(finished)
        return answer

    def close(self) -> None:
        """Stop every node's workers; stop the cluster too when this executor started it."""
        ray = self._ray
        for actor in self._actors:
            try:
                ray.get(actor.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - killed below all the same
                pass
            ray.kill(actor)
        self._actors = []
        if self._started and ray.is_initialized():
            ray.shutdown()
