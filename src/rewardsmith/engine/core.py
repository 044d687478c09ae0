"""The engine: its lifecycle and public API, and the steps of scoring one batch.

A batch of whole groups is scored in four steps: cells come from the cache
(``caching.look_up``), the missing calls are planned (``plan``) and run by an executor
(``executors``: in-process, the local worker pool, or Ray) or, for judges, on this engine's
event loop (``onloop``), their results become cells (``assemble.store_plan``), and the cells
become scores (``assemble.combine``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import math
import threading
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any

from rewardsmith._system.gcpause import gc_paused
from rewardsmith._system.isolation import (
    guard_process,
    restore_streams,
    saved_streams,
)
from rewardsmith.engine.columns import ScoreColumns
from rewardsmith.engine.evaluators import (
    _Checked,
    _Closable,
    _LoopThread,
    _Metered,
    _StoreAware,
)
from rewardsmith.rubric import (
    Component,
    Rubric,
)
from rewardsmith.rubric.calling import (
    make_binder,
    to_component_result,
)
from rewardsmith.workers import (
    default_worker_count,
    format_exception,
)

from ..types import ComponentResult, Rollout, Score, Status
from .assemble import SystematicWatch, combine, store_plan
from .caching import Cached, ResultCache, look_up, record
from .cells import Cell, as_tuple, floats_only, store_columns
from .executors import BACKENDS, Executor, backend_from_env, make_executor
from .gated_calls import gated_evaluators, mark_skipped, run_gated
from .onloop import LoopRewards
from .plan import (
    Batch,
    batches_of,
    column_plan,
    contiguous_sizes,
    missing_block,
    plan_calls,
    slices,
    split,
)
from .programs import AsyncProgram, SyncProgram, column_of, row_layout
from .timing import timed

__all__ = ["Engine", "score_rollouts"]

# Rollouts one batch holds at most (whole groups); small inputs are cut finer (``slices``).
DEFAULT_BATCH_ROLLOUTS = 2048


class Engine:
    """Scores groups of rollouts with a rubric.

    ``workers`` sets the number of worker processes (default: the cores this process may use;
    with ``backend="ray"``, per node). ``workers=0`` runs rewards in this process: faster to
    start, but with no hard limits, so only for trusted, quick rewards. ``backend`` is
    ``"local"`` or ``"ray"`` (default: ``$REWARDSMITH_BACKEND``, else local); ``ray_address``
    names a running Ray cluster (default: ``$REWARDSMITH_RAY_ADDRESS``; without one, a local
    cluster is started for the engine and stopped with it). ``max_concurrency`` bounds async calls (split
    between the workers for a user's async rewards). ``stop_on_systematic`` raises
    ``SystematicFailure`` when a reward fails the same way on each of its first calls (see
    ``_check_systematic``) instead of returning a run of failures.
    """

    def __init__(
        self,
        rubric: Rubric,
        *,
        workers: int | None = None,
        max_concurrency: int = 64,
        batch_rollouts: int = DEFAULT_BATCH_ROLLOUTS,
        cache: ResultCache | None = None,
        store_path: str | None = None,
        stop_on_systematic: bool = True,
        backend: str | None = None,
        ray_address: str | None = None,
        ray_runtime_env: dict[str, Any] | None = None,
        timing: bool = False,
    ):
        rubric.resolve()
        self.timing = timing
        env_backend, env_address = backend_from_env()
        self.backend = backend or env_backend
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown backend {self.backend!r}: choose one of "
                             f"{', '.join(BACKENDS)}")
        self.ray_address = ray_address or env_address
        self._ray_runtime_env = ray_runtime_env
        self.rubric = rubric
        self._workers_asked = workers
        self.workers = default_worker_count() if workers is None else workers
        if self.workers < 0:
            raise ValueError(f"workers must be >= 0, not {self.workers}")
        sync = [c for c in rubric.components if not c.is_async]
        if (workers is None and self.workers == 1 and sync and all(c.bounded for c in sync)
                and self.backend == "local"):
            # One core and only built-ins that cannot hang: a worker process would add
            # pickling and context switches, and no parallelism. Run them here.
            self.workers = 0
        self.max_concurrency = max_concurrency
        self.batch_rollouts = max(1, batch_rollouts)
        self.cache = cache
        # How a rollout's content key is found for the cache (a recorder that already hashed
        # every rollout of its run answers without hashing again).
        self.content_key: Callable[[Rollout], str] | None = None
        self._sync = [c for c in rubric.components if not c.is_async]
        self._async = [c for c in rubric.components if c.is_async]
        # A user's async rewards run in the workers, where a blocked event loop can be killed;
        # judges (network I/O with limits of their own) stay on this engine's loop.
        self._async_work = ([c for c in self._async if c.evaluator is None]
                            if self.workers > 0 else [])
        self._async_local = [c for c in self._async if c not in self._async_work]
        # Judges behind a gate run after it, only where it opened (see engine.gated_calls).
        self._gated = gated_evaluators(rubric)
        self._async_program = AsyncProgram([c for c in self._async_work if not c.group],
                                            [c for c in self._async_work if c.group],
                                            timing=timing)
        self._async_key = f"async:{rubric.id}:{id(self)}"
        self._watch = SystematicWatch(rubric) if stop_on_systematic else None
        self._on_loop = LoopRewards(rubric, max_concurrency, timing=timing)
        if self.workers == 0:
            guard_process()  # rewards run in this process: a fork or chdir stays in its call
        self._singles = [c for c in self._sync if not c.group]
        self._sync_groups = [c for c in self._sync if c.group]
        self._layout = row_layout(self._singles)
        # Group rewards and judges see a group at a time; other rewards, one rollout.
        self._needs_groups = any(c.group or c.evaluator is not None for c in rubric.components)
        self._program = SyncProgram(self._singles, self._sync_groups, self._layout,
                                    timing=timing)
        self._inline_binders: list[Callable[[Rollout], Any]] | None = None
        self._program_key = f"rubric:{rubric.id}:{id(self)}"
        self._executor: Executor | None = None
        self._loop: _LoopThread | None = None
        self._lock = threading.Lock()
        self._calls = 0  # reward calls made through executors
        self.store_path = store_path
        self._evaluators = [c.evaluator for c in rubric.components if c.evaluator is not None]
        self._metered: list[tuple[str, str]] = []  # component, its evaluator's usage key
        for component in rubric.components:
            evaluator: Any = component.evaluator
            if isinstance(evaluator, _Metered):
                self._metered.append((component.name, evaluator.usage_key()))
        self._reused: dict[str, int] = {}  # usage key -> grades taken from the result cache
        self._checked = False
        if store_path is not None:
            for evaluator in self._evaluators:
                if isinstance(evaluator, _StoreAware):
                    evaluator.attach_store(store_path)

    # ------------------------------------------------------------ lifecycle

    def _ensure_started(self) -> _LoopThread:
        with self._lock:
            if self._loop is None:
                self._loop = _LoopThread()
            return self._loop

    def check(self) -> None:
        """Check every evaluator (judge endpoints) now; raise before anything is scored."""
        if self._checked:
            return
        if self.backend == "ray" and self._evaluators:
            # Connect first, so that the judges' shared limits are the whole Ray job's.
            self._executor_for_work()
        loop = self._ensure_started()
        loop.submit(self._check_all()).result()
        self._checked = True

    async def _check_all(self) -> None:
        for evaluator in self._evaluators:
            if isinstance(evaluator, _Checked):
                await evaluator.check()

    @property
    def calls(self) -> int:
        """Reward calls made (not replayed from the cache)."""
        return self._calls + self._on_loop.calls

    def usage(self) -> dict[str, dict[str, float]]:
        """Usage of every evaluator that reports it (judge calls, tokens, cost), by client."""
        out: dict[str, dict[str, float]] = {}
        for evaluator in self._evaluators:
            if isinstance(evaluator, _Metered):
                out[evaluator.usage_key()] = dict(evaluator.usage())
        for key, reused in self._reused.items():  # grades the result cache gave: replayed too
            if key in out:
                out[key]["replayed"] = out[key].get("replayed", 0.0) + reused
        return out

    def _executor_for_work(self) -> Executor:
        # Started on first use: a batch answered entirely from the cache starts no process.
        with self._lock:
            if self._executor is None:
                # On Ray, workers are per node: by default each node's own CPUs.
                count = self.workers if self.backend == "local" else (self._workers_asked or 0)
                executor = make_executor(self.backend, count, self.ray_address,
                                         self._ray_runtime_env)
                executor.register(self._program_key, self._program)
                if self._async_work:
                    executor.register(self._async_key, self._async_program)
                self._executor = executor
            return self._executor

    def close(self) -> None:
        """Stop worker processes (and a Ray cluster the engine started) and the event loop."""
        if self._loop is not None:
            closers = [e.close for e in self._evaluators if isinstance(e, _Closable)]
            if closers:
                async def close_all() -> None:
                    for closer in closers:
                        result = closer()
                        if asyncio.iscoroutine(result):
                            await result
                try:
                    self._loop.submit(close_all()).result(timeout=10)
                except Exception:  # noqa: BLE001 - closing must not raise over a real error
                    pass
        with self._lock:
            if self._executor is not None:
                self._executor.close()
                self._executor = None
            if self._loop is not None:
                self._loop.close()
                self._loop = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def workers_replaced(self) -> int:
        return self._executor.replaced if self._executor is not None else 0

    # ------------------------------------------------------------ public API

    def score_group(self, rollouts: Sequence[Rollout]) -> list[Score]:
        """Score one group (sync); scores come back in the group's order."""
        loop = self._ensure_started()
        columns: ScoreColumns = loop.submit(self._score_batch(Batch.of([rollouts]))).result()
        return columns.scores()

    async def ascore_group(self, rollouts: Sequence[Rollout]) -> list[Score]:
        """Score one group (async); safe to call from any event loop."""
        loop = self._ensure_started()
        columns: ScoreColumns = await asyncio.wrap_future(
            loop.submit(self._score_batch(Batch.of([rollouts]))))
        return columns.scores()

    def score(self, rollouts: Iterable[Rollout]) -> list[Score]:
        """Score rollouts given in any order; scores come back in the same order."""
        return self._score_all(list(rollouts), build=True).scores()

    def score_columns(self, rollouts: Iterable[Rollout]) -> ScoreColumns:
        """``score``, with the results as columns: ``.rewards`` is what a training loop reads,
        and no ``Score`` object is built for a rollout whose components all returned plain
        numbers unless ``.scores()`` asks for them."""
        return self._score_all(list(rollouts), build=False)

    def _score_all(self, items: list[Rollout], build: bool) -> ScoreColumns:
        names = self.rubric.names
        if not self._needs_groups:
            # No reward looks at a group as a whole: any slice of the input is a batch.
            batches = self._slices(items)
        else:
            sizes = contiguous_sizes(items)
            if sizes is None:
                return self._score_regrouped(items, build)
            batches = self._slices(items, sizes)  # each group in one run: no reordering
        return ScoreColumns.joined(names, [columns for _batch, columns in self._run_batches(
            batches, True, 8, None, build)])

    def _score_regrouped(self, items: list[Rollout], build: bool) -> ScoreColumns:
        """Score rollouts whose groups are not each in one run: in group order, then back."""
        groups: dict[str, list[int]] = {}
        for index, rollout in enumerate(items):
            groups.setdefault(rollout.group, []).append(index)
        positions = [index for indices in groups.values() for index in indices]
        batches = self._slices([items[index] for index in positions],
                               [len(indices) for indices in groups.values()])
        joined = ScoreColumns.joined(self.rubric.names, [
            columns for _batch, columns in self._run_batches(batches, True, 8, None, build)])
        back = [0] * len(positions)  # where each input rollout landed in group order
        for landed, index in enumerate(positions):
            back[index] = landed
        return joined.reordered(back)

    def stream(
        self, groups: Iterable[Sequence[Rollout]], *, ordered: bool = True, coalesce: bool = False,
        max_in_flight: int | None = None,
    ) -> Iterator[list[Score]]:
        """Yield each group's scores as soon as it is done, while later groups are scored.

        ``ordered=False`` yields groups as they finish. ``coalesce=True`` sends several
        consecutive groups to a worker at once (for input that is already in memory).
        """
        batches: Iterable[Batch]
        if coalesce and isinstance(groups, Sequence):
            # All in memory: batches shrink towards the end so every worker finishes at about
            # the same time, also when some batches meet slow or failing calls.
            flat = [r for group in groups for r in group]
            batches = self._slices(flat, [len(group) for group in groups])
        elif coalesce:
            batches = batches_of(groups, self.batch_rollouts)
        else:
            batches = (Batch.of([group]) for group in groups)
        # In-memory input keeps more batches queued so no worker waits between two of them.
        finished = self._run_batches(batches, ordered, 8 if coalesce else 2, max_in_flight)
        return (scores for batch, columns in finished
                for scores in split(columns.scores(), batch.sizes))

    def _run_batches(self, batches: Iterable[Batch], ordered: bool, depth: int,
                     max_in_flight: int | None, build: bool = True
                     ) -> Iterator[tuple[Batch, ScoreColumns]]:
        """Each batch with its scores, in order or as they finish."""
        loop = self._ensure_started()
        in_flight_limit = max_in_flight or max(2, depth * max(1, self.workers))
        if self.workers == 0 and not self._async:
            # Everything runs in this process and nothing awaits: no thread hand-off needed.
            for batch in batches:
                yield batch, _now(self._score_batch(batch, build))
            return
        pending: list[tuple[Batch, Future[ScoreColumns]]] = []
        for batch in batches:
            pending.append((batch, loop.submit(self._score_batch(batch, build))))
            while len(pending) >= in_flight_limit:
                yield from self._drain(pending, ordered, block=True)
            yield from self._drain(pending, ordered, block=False)
        while pending:
            yield from self._drain(pending, ordered, block=True)

    async def astream(
        self, groups: AsyncIterable[Sequence[Rollout]] | Iterable[Sequence[Rollout]], *,
        ordered: bool = True, max_in_flight: int | None = None,
    ) -> AsyncIterator[list[Score]]:
        """Async version of ``stream``: groups may come from an async generator."""
        loop = self._ensure_started()
        limit = max_in_flight or max(2, 2 * max(1, self.workers))
        pending: list[asyncio.Future[ScoreColumns]] = []

        async def drain(block: bool) -> AsyncIterator[list[Score]]:
            while pending:
                if ordered:
                    if not pending[0].done() and not block:
                        return
                    yield (await pending.pop(0)).scores()
                else:
                    done = [f for f in pending if f.done()]
                    if not done:
                        if not block:
                            return
                        await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                        continue
                    for future in done:
                        pending.remove(future)
                        yield (await future).scores()
                block = block and len(pending) >= limit

        async def source() -> AsyncIterator[Sequence[Rollout]]:
            if isinstance(groups, AsyncIterable):
                async for group in groups:
                    yield group
            else:
                for group in groups:
                    yield group

        async for group in source():
            pending.append(asyncio.wrap_future(loop.submit(self._score_batch(Batch.of([group])))))
            async for scores in drain(block=len(pending) >= limit):
                yield scores
        while pending:
            async for scores in drain(block=True):
                yield scores

    # ------------------------------------------------------------ internals

    def _slices(self, items: list[Rollout], sizes: list[int] | None = None
                ) -> Iterator[Batch]:
        return slices(items, sizes, batch_rollouts=self.batch_rollouts,
                      workers=max(1, self.workers))

    @staticmethod
    def _drain(pending: list[tuple[Batch, Future[ScoreColumns]]], ordered: bool,
               block: bool) -> Iterator[tuple[Batch, ScoreColumns]]:
        if ordered:
            while pending and (block or pending[0][1].done()):
                batch, future = pending.pop(0)
                yield batch, future.result()
                block = False
        else:
            done = [entry for entry in pending if entry[1].done()]
            if not done and block:
                concurrent.futures.wait([f for _, f in pending],
                                        return_when=concurrent.futures.FIRST_COMPLETED)
                done = [entry for entry in pending if entry[1].done()]
            for entry in done:
                pending.remove(entry)
                yield entry[0], entry[1].result()

    async def _score_batch(self, batch: Batch, build: bool = True) -> ScoreColumns:
        """Score one batch of whole groups; scores in the batch's order. ``build`` makes
        the ``Score`` objects here, on the engine's thread, while the workers go on with
        later batches (rather than all at the end in the caller's)."""
        rollouts = batch.rollouts
        # The collector pauses around the allocation-heavy steps, never across an await.
        with gc_paused():
            results: dict[str, list[Cell]] = {
                c.name: [None] * len(rollouts) for c in self.rubric.components
            }
            cached: Cached | None = (
                look_up(self.cache, self.rubric.components, rollouts, results, self.content_key)
                if self.cache is not None else None)
            if cached is not None and self._metered:
                for name, key in self._metered:
                    missing = cached[1].get(name)
                    if missing is not None and len(missing) < len(rollouts):
                        self._reused[key] = self._reused.get(key, 0) + len(rollouts) - len(missing)
        plain: set[str] = set()  # components known to hold finite floats only
        work = []
        if self._sync:
            work.append(self._run_sync(batch, results, plain))
        if self._async_work:
            work.append(self._run_async_workers(batch, results))
        for component in self._async_local:
            if component not in self._gated:
                work.append(self._on_loop.run(component, batch, results))
        streams = saved_streams()
        if len(work) == 1:
            await work[0]  # no gather: the in-process path then never suspends (see _now)
        elif work:
            await asyncio.gather(*work)
        restore_streams(streams)  # a reward in this process replaced sys.stdout
        skipped = await run_gated(self._on_loop, self._gated, batch, results) if self._gated \
            else None
        if self._watch is not None:
            self._watch.check(rollouts, results)
        with gc_paused():
            if cached is not None and self.cache is not None:
                record(self.cache, self.rubric.components, cached, results, rollouts)
            if skipped:
                mark_skipped(results, skipped)
            columns = combine(self.rubric, rollouts,
                              [results[name] for name in self.rubric.names],
                              [name in plain for name in self.rubric.names])
            if build:
                columns.scores()
            return columns

    def _payload(self, rollouts: list[Rollout]) -> list[Any]:
        """What the sync program reads (see ``SyncProgram``): field columns or rollout tuples."""
        if self._layout is None:
            return [as_tuple(r) for r in rollouts]
        return [column_of(name, rollouts) for name in self._layout]

    async def _run_sync(self, batch: Batch, results: dict[str, list[Cell]],
                        plain: set[str]) -> None:
        rollouts = batch.rollouts
        singles = self._singles
        size = len(rollouts)
        columns = [results[c.name] for c in singles]
        # Rewards k0..k1-1 need every call and the others none: all of them in the usual case,
        # the changed ones when a rescore found the others stored.
        block = None if self._sync_groups else missing_block(columns)
        if self.workers == 0 and block is not None:
            self._calls += size * (block[1] - block[0])
            with gc_paused():
                self._run_columns_inline(rollouts, columns, plain, block)
            return
        if block is not None:
            plan = column_plan(size, block, [self._time_limit(c) for c in singles],
                               [self._memory_limit(c) for c in singles])
        else:
            plan = plan_calls(batch, singles, self._sync_groups, columns, self._time_limit,
                              self._memory_limit)
        if not plan.items:
            return
        self._calls += len(plan.items)
        with gc_paused():
            shared = self._payload(rollouts) if singles else []
        future = self._executor_for_work().run(
            self._program_key, plan.items, plan.limits, shared, memory=plan.memory)
        # An in-process batch is done already: taken as it is, it never suspends (see _now).
        done = future.result() if future.done() else await asyncio.wrap_future(future)
        with gc_paused():
            if block is not None:
                if store_columns(done, size, columns[block[0] : block[1]]):
                    plain.update(c.name for c in singles[block[0] : block[1]])
            else:
                store_plan(done, plan, size, columns, results)

    def _time_limit(self, component: Component) -> float:
        return float(component.timeout or self.rubric.timeout)

    def _memory_limit(self, component: Component) -> float:
        return float(component.memory_limit or self.rubric.memory_limit)

    async def _run_async_workers(self, batch: Batch, results: dict[str, list[Cell]]) -> None:
        """The user's async rewards, in the workers: each batch's calls run concurrently on a
        worker's event loop, each under its own hard time and memory limits."""
        singles = [c for c in self._async_work if not c.group]
        groups = [c for c in self._async_work if c.group]
        columns = [results[c.name] for c in singles]
        plan = plan_calls(batch, singles, groups, columns, self._time_limit, self._memory_limit)
        if not plan.items:
            return
        self._calls += len(plan.items)
        shared = [as_tuple(r) for r in batch.rollouts] if singles else []
        per_worker = max(1, self.max_concurrency // max(1, self.workers))
        done = await asyncio.wrap_future(self._executor_for_work().run(
            self._async_key, plan.items, plan.limits, shared, memory=plan.memory,
            concurrency=per_worker))
        store_plan(done, plan, len(batch.rollouts), columns, results)

    def _run_columns_inline(self, rollouts: list[Rollout], columns: list[list[Cell]],
                            plain: set[str], block: tuple[int, int]) -> None:
        """In-process, one column at a time (rewards ``block[0]`` to ``block[1] - 1``): no
        per-call bookkeeping unless a call fails."""
        first, end = block
        size = len(rollouts)
        runs: list[tuple[Callable[..., Any], list[Sequence[Any]]]]
        if self._layout is not None:
            # The fields every reward reads are taken once per rollout, not once per reward.
            runs = [(call, args) for call, args, _fix, _limit in self._program.runs(
                range(first * size, end * size), self._payload(rollouts))]
        else:
            if self._inline_binders is None:
                binders = [make_binder(c.func, c.params,  # type: ignore[arg-type]
                                       what=f"component {c.name!r}") for c in self._singles]
                self._inline_binders = ([timed(b, c.reward_key)
                                         for b, c in zip(binders, self._singles)]
                                        if self.timing else binders)
            runs = [(binder, [rollouts]) for binder in self._inline_binders[first:end]]
        for component, (call, args), column in zip(self._singles[first:end], runs,
                                                   columns[first:end]):
            values: list[Any] = []
            extend = values.extend
            while len(values) < size:
                # One try per run of successful calls, not per call: ``extend`` keeps what
                # the calls before a failing one returned; the failure is recorded and the
                # calls resume right after it (nothing is called twice).
                done = len(values)
                try:
                    extend(map(call, *[itertools.islice(a, done, None) if done else a
                                       for a in args]))
                except (Exception, SystemExit) as exc:  # noqa: BLE001 - a failure is data
                    values.append(ComponentResult.failed(Status.ERROR, format_exception(exc)))
            if floats_only(values) and math.isfinite(sum(values)):
                column[:] = values  # plain finite floats: the usual case
                plain.add(component.name)
                continue
            for index, value in enumerate(values):
                if type(value) is float and value - value == 0.0:
                    column[index] = value
                elif isinstance(value, ComponentResult) and value.error is not None:
                    column[index] = value
                else:
                    column[index] = to_component_result(value, component.reward_key)


def _now(coroutine: Any) -> Any:
    """Run a coroutine that never suspends to completion, here, without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("internal error: an in-process batch tried to wait")


def score_rollouts(rubric: Rubric, rollouts: Iterable[Rollout], **options: Any) -> list[Score]:
    """Score rollouts with ``rubric`` in one call (starts and stops an engine)."""
    with Engine(rubric, **options) as engine:
        return engine.score(rollouts)
