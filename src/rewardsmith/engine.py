"""The scoring engine: one call per group, hard timeouts, crash isolation, async rewards.

Rewards run in worker processes (``rewardsmith.workers``) so a call past its timeout, or past
its memory limit, is killed for real. A user's async rewards run there too, concurrently on
each worker's own event loop: an async reward that blocks its loop (``time.sleep``, a busy
loop) is killed like a sync one. Judges (network I/O only, with their own limits) run on the
engine's own event loop, under ``max_concurrency``. Results always come back in input order.
"""

from __future__ import annotations

import array
import asyncio
import functools
import itertools
import math
import operator
import threading
import time
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from concurrent.futures import Future
from typing import Any, NamedTuple, Protocol, cast

from .calling import (
    ROW_FIELDS,
    make_binder,
    make_group_binder,
    make_row_binder,
    row_fields,
    to_component_result,
)
from .errors import SystematicFailure
from .loading import load_reward
from .rubric import DEFAULT_TIMEOUT, Component, Rubric
from .types import ComponentResult, Rollout, Score, Status, message_text
from .worker_process import LateResult
from .workers import (
    ERROR,
    BatchResult,
    Outcome,
    WorkerPool,
    default_worker_count,
    format_exception,
    gc_paused,
)

__all__ = ["Engine", "ResultCache", "score_rollouts"]

_STATUS_CODES = (Status.OK, Status.ERROR, Status.TIMEOUT, Status.MASKED)
_CODE_OF = {status: code for code, status in enumerate(_STATUS_CODES)}
RolloutTuple = tuple[str, str, Any, Any, Any, dict[str, Any], bool]
Compact = tuple[float | None, int, str | None, dict[str, float] | None]
Cell = float | ComponentResult | None  # a bare float is an ok result without metrics


class ResultCache(Protocol):
    """Where component results are kept between runs (see ``rewardsmith.store``)."""

    def lookup(self, component_id: str, keys: Sequence[str]) -> dict[str, ComponentResult]: ...

    def record(self, component_id: str, results: Mapping[str, ComponentResult]) -> None: ...


def _compact(result: ComponentResult) -> float | Compact:
    # The common case (ok, no metrics) travels as a bare float: cheap to pickle and to combine.
    if result.status is Status.OK and not result.metrics and type(result.value) is float:
        return result.value
    return (result.value, _CODE_OF[result.status], result.error, result.metrics or None)


def _expand(compact: float | Compact) -> ComponentResult:
    if type(compact) is float:
        return ComponentResult(compact)
    value, code, error, metrics = compact  # type: ignore[misc]
    return ComponentResult(value, _STATUS_CODES[code], error, metrics or {})


def _as_tuple(rollout: Rollout) -> RolloutTuple:
    return (rollout.id, rollout.group, rollout.prompt, rollout.completion, rollout.answer,
            rollout.metadata, rollout.truncated)


class _SyncProgram:
    """Runs the rubric's sync rewards inside a worker process; built lazily there.

    A batch's shared payload holds its rows: one list per field of ``layout``, or whole
    rollout tuples when some reward needs the whole rollout (``layout`` is None). Items are
    numbered component-major: int ``k * rows + row`` is single reward ``k`` on that row;
    ``(k, tuples)`` is group reward ``k`` on a group's rollout tuples.
    """

    def __init__(self, singles: Sequence[Component], groups: Sequence[Component],
                 layout: Sequence[str] | None):
        # Import paths travel as text and are imported in the worker exactly as in the parent;
        # Python callables travel by value (cloudpickle).
        def spec(c: Component) -> tuple[Any, dict[str, Any], str, str]:
            return (c.reward if isinstance(c.reward, str) else c.func, c.params, c.reward_key,
                    c.name)

        self.singles = [spec(c) for c in singles]
        self.groups = [spec(c) for c in groups]
        # Each reward's time limit: a call that returns after it counts as a timeout.
        self.limits = [float(c.timeout or DEFAULT_TIMEOUT) for c in singles]
        self.group_limits = [float(c.timeout or DEFAULT_TIMEOUT) for c in groups]
        self.layout = list(layout) if layout is not None else None
        self._calls: list[Callable[[Any], Any]] | None = None
        self._group_calls: list[Callable[[Any], Any]] = []
        self._shared: Any = None
        self._args: list[Any] = []

    def __getstate__(self) -> dict[str, Any]:
        return {"singles": self.singles, "groups": self.groups, "layout": self.layout,
                "limits": self.limits, "group_limits": self.group_limits}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.singles, self.groups, self.layout = state["singles"], state["groups"], state["layout"]
        self.limits, self.group_limits = state["limits"], state["group_limits"]
        self._calls = None
        self._group_calls = []
        self._shared = None
        self._args = []

    def calls(self) -> list[Callable[[Any], Any]]:
        """One callable per single reward, taking one row (see ``build_rows``)."""
        if self._calls is None:
            calls: list[Callable[[Any], Any]] = []
            group_calls: list[Callable[[Any], Any]] = []
            for reward, params, _key, name in self.singles:
                func = load_reward(reward).func if isinstance(reward, str) else reward
                what = f"component {name!r}"
                if self.layout is not None:
                    calls.append(make_row_binder(func, params, self.layout, what=what))
                else:
                    calls.append(make_binder(func, params, what=what))
            for reward, params, _key, name in self.groups:
                func = load_reward(reward).func if isinstance(reward, str) else reward
                group_calls.append(make_group_binder(func, params, what=f"component {name!r}"))
            self._group_calls = group_calls
            self._calls = calls
        return self._calls

    def prepare(self) -> None:
        """Load every reward (in the worker, when the program arrives)."""
        self.calls()

    def build_rows(self, shared: Any) -> list[Any]:
        """The rows a payload holds: tuples of layout fields, or rollouts."""
        if self.layout is None:
            return [Rollout(*data) for data in shared]
        return list(zip(*shared)) if shared else []

    def _rows(self, shared: Any) -> list[Any]:
        # In a worker, where batches run one at a time: the rows are built once per batch.
        # Holding the payload keeps its identity from being reused by a later one.
        if shared is not self._shared:
            self._args = self.build_rows(shared)
            self._shared = shared
        return self._args

    def runs(self, items: range, rows: list[Any]
             ) -> Iterator[tuple[Callable[[Any], Any], list[Any], Callable[[Any], Any], float]]:
        """The calls of a range of items: one run of rows per reward, with how to read a
        value that is not a finite float, and the reward's time limit."""
        calls = self.calls()
        count = len(rows)
        for k, call in enumerate(calls):
            low = max(items.start, k * count) - k * count
            high = min(items.stop, (k + 1) * count) - k * count
            if low < high:
                yield (call, rows[low:high], functools.partial(_read_value, self.singles[k][2]),
                       self.limits[k])

    def segments(self, items: range, shared: Any
                 ) -> Iterator[tuple[Callable[[Any], Any], list[Any], Callable[[Any], Any],
                                     float]]:
        """The worker's fast path (see ``rewardsmith.workers``)."""
        return self.runs(items, self._rows(shared))

    def call_item(self, item: Any, rows: list[Any]) -> Any:
        """Make one call: an int item on ``rows``, or a group item."""
        calls = self.calls()
        started = time.monotonic()
        if type(item) is int:
            k, row = divmod(item, len(rows))
            value = calls[k](rows[row])
            _in_time(started, self.limits[k])
            if type(value) is float and value - value == 0.0:  # finite float: the fast path
                return value
            return _compact(to_component_result(value, self.singles[k][2]))
        k, tuples = item
        rollouts = [Rollout(*data) for data in tuples]
        raw = self._group_calls[k](rollouts)
        _in_time(started, self.group_limits[k])
        results = _group_results(raw, len(rollouts), self.groups[k][2])
        return [_compact(r) for r in results]

    def __call__(self, item: Any, shared: Any) -> Any:
        return self.call_item(item, self._rows(shared) if type(item) is int else [])


def _in_time(started: float, limit: float) -> None:
    if time.monotonic() - started > limit:
        raise LateResult(f"timed out after {limit:g} s (returned too late)")


class _AsyncProgram:
    """Runs a user's async rewards inside a worker process (see ``AsyncProgram``).

    Items are numbered as for ``_SyncProgram``: ``k * rows + row`` is single reward ``k`` on a
    row (a rollout tuple), ``(k, tuples)`` is group reward ``k`` on a group.
    """

    def __init__(self, singles: Sequence[Component], groups: Sequence[Component]):
        def spec(c: Component) -> tuple[Any, dict[str, Any], str, str]:
            return (c.reward if isinstance(c.reward, str) else c.func, c.params, c.reward_key,
                    c.name)

        self.singles = [spec(c) for c in singles]
        self.groups = [spec(c) for c in groups]
        self._binders: list[Callable[[Any], Any]] | None = None
        self._group_binders: list[Callable[[Any], Any]] = []
        self._rows = 1  # rows in the current batch

    def __getstate__(self) -> dict[str, Any]:
        return {"singles": self.singles, "groups": self.groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.singles, self.groups = state["singles"], state["groups"]
        self._binders = None
        self._group_binders = []
        self._rows = 1

    def _load(self) -> list[Callable[[Any], Any]]:
        if self._binders is None:
            binders = []
            for reward, params, _key, name in self.singles:
                func = load_reward(reward).func if isinstance(reward, str) else reward
                binders.append(make_binder(func, params, what=f"component {name!r}"))
            for reward, params, _key, name in self.groups:
                func = load_reward(reward).func if isinstance(reward, str) else reward
                self._group_binders.append(
                    make_group_binder(func, params, what=f"component {name!r}"))
            self._binders = binders
        return self._binders

    def prepare(self) -> None:
        """Load every reward (in the worker, when the program arrives)."""
        self._load()

    def rows(self, shared: Any) -> list[Rollout]:
        self._rows = max(1, len(shared))
        return [Rollout(*data) for data in shared]

    def start(self, item: Any, rows: list[Rollout]) -> Any:
        binders = self._load()
        if type(item) is int:
            k, row = divmod(item, len(rows))
            return binders[k](rows[row])
        k, tuples = item
        return self._group_binders[k]([Rollout(*data) for data in tuples])

    def finish(self, item: Any, value: Any) -> Any:
        if type(item) is int:
            if type(value) is float and value - value == 0.0:
                return value
            return _compact(to_component_result(value, self.singles[item // self._rows][2]))
        k, tuples = item
        results = _group_results(value, len(tuples), self.groups[k][2])
        return [_compact(r) for r in results]

    def __call__(self, item: Any, shared: Any) -> Any:
        raise RuntimeError("async rewards run through the worker's event loop")


def _read_value(reward_key: str, value: Any) -> float | Compact:
    return _compact(to_component_result(value, reward_key))


def _row_layout(components: Sequence[Component]) -> list[str] | None:
    """The fields every single sync reward reads, in a fixed order; None means whole rollouts."""
    needed: set[str] = set()
    for component in components:
        fields = row_fields(component.func, component.params)  # type: ignore[arg-type]
        if fields is None:
            return None
        needed |= fields
    return [name for name in ROW_FIELDS if name in needed]


def _group_results(values: Any, size: int, reward_key: str) -> list[ComponentResult]:
    """A group reward's return value as one result per rollout (a wrong length is an error)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        message = f"group reward returned {type(values).__name__}, expected a list of {size}"
        return [ComponentResult.failed(Status.ERROR, message) for _ in range(size)]
    items = list(values)
    if len(items) != size:
        message = f"group reward returned {len(items)} values for a group of {size}"
        return [ComponentResult.failed(Status.ERROR, message) for _ in range(size)]
    return [to_component_result(v, reward_key) for v in items]


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
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()


class Engine:
    """Scores groups of rollouts with a rubric.

    ``workers`` sets the number of worker processes for sync rewards (default: the cores this
    process may use). ``workers=0`` runs them in this process: faster to start, but with no hard
    timeouts, so only for trusted, quick rewards. ``max_concurrency`` bounds async calls (split
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
        batch_rollouts: int = 2048,
        cache: ResultCache | None = None,
        store_path: str | None = None,
        stop_on_systematic: bool = True,
    ):
        rubric.resolve()
        self.rubric = rubric
        self.workers = default_worker_count() if workers is None else workers
        if self.workers < 0:
            raise ValueError(f"workers must be >= 0, not {self.workers}")
        sync = [c for c in rubric.components if not c.is_async]
        if workers is None and self.workers == 1 and sync and all(c.bounded for c in sync):
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
        self._async_program = _AsyncProgram([c for c in self._async_work if not c.group],
                                            [c for c in self._async_work if c.group])
        self._async_key = f"async:{rubric.id}:{id(self)}"
        # Consecutive failures with one message since the start, per component (see
        # ``_check_systematic``); None once a call of that component succeeded.
        self._same_failures: dict[str, tuple[str, int, set[str]] | None] = {}
        self.stop_on_systematic = stop_on_systematic
        self._singles = [c for c in self._sync if not c.group]
        self._sync_groups = [c for c in self._sync if c.group]
        self._layout = _row_layout(self._singles)
        # Group rewards and judges see a group at a time; other rewards, one rollout.
        self._needs_groups = any(c.group or c.evaluator is not None for c in rubric.components)
        self._program = _SyncProgram(self._singles, self._sync_groups, self._layout)
        self._inline_binders: list[Callable[[Rollout], Any]] | None = None
        self._program_key = f"rubric:{rubric.id}:{id(self)}"
        self._pool: WorkerPool | None = None
        self._loop: _LoopThread | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._lock = threading.Lock()
        self.calls = 0  # reward calls made (not replayed from the cache)
        self.store_path = store_path
        self._evaluators = [c.evaluator for c in rubric.components if c.evaluator is not None]
        self._checked = False
        if store_path is not None:
            for evaluator in self._evaluators:
                attach = getattr(evaluator, "attach_store", None)
                if attach is not None:
                    attach(store_path)

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
        loop = self._ensure_started()
        loop.submit(self._check_all()).result()
        self._checked = True

    async def _check_all(self) -> None:
        for evaluator in self._evaluators:
            check = getattr(evaluator, "check", None)
            if check is not None:
                await check()

    def usage(self) -> dict[str, dict[str, float]]:
        """Usage of every evaluator that reports it (judge calls, tokens, cost), by client."""
        out: dict[str, dict[str, float]] = {}
        for evaluator in self._evaluators:
            usage = getattr(evaluator, "usage", None)
            key = getattr(evaluator, "usage_key", None)
            if usage is not None:
                out[key() if key is not None else type(evaluator).__name__] = dict(usage())
        return out

    def _worker_pool(self) -> WorkerPool:
        # Started on first use: a batch answered entirely from the cache starts no process.
        with self._lock:
            if self._pool is None:
                self._pool = WorkerPool(self.workers)
                self._pool.register(self._program_key, self._program)
                if self._async_work:
                    self._pool.register(self._async_key, self._async_program)
            return self._pool

    def close(self) -> None:
        """Stop worker processes and the event loop."""
        if self._loop is not None:
            found = [getattr(e, "close", None) for e in self._evaluators]
            closers: list[Callable[[], Any]] = [c for c in found if c is not None]
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
            if self._pool is not None:
                self._pool.close()
                self._pool = None
            if self._loop is not None:
                self._loop.close()
                self._loop = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def workers_replaced(self) -> int:
        return self._pool.replaced if self._pool is not None else 0

    # ------------------------------------------------------------ public API

    def score_group(self, rollouts: Sequence[Rollout]) -> list[Score]:
        """Score one group (sync); scores come back in the group's order."""
        loop = self._ensure_started()
        return loop.submit(self._score_batch(_Batch.of([rollouts]))).result()  # type: ignore[no-any-return]

    async def ascore_group(self, rollouts: Sequence[Rollout]) -> list[Score]:
        """Score one group (async); safe to call from any event loop."""
        loop = self._ensure_started()
        result = await asyncio.wrap_future(loop.submit(self._score_batch(_Batch.of([rollouts]))))
        return result  # type: ignore[no-any-return]

    def score(self, rollouts: Iterable[Rollout]) -> list[Score]:
        """Score rollouts given in any order; scores come back in the same order."""
        items = list(rollouts)
        if not self._needs_groups:
            # No reward looks at a group as a whole: any slice of the input is a batch.
            out: list[Score] = []
            for _batch, scores in self._run_batches(self._slices(items), True, 8, None):
                out.extend(scores)
            return out
        sizes = _contiguous_sizes(items)
        if sizes is not None:  # each group in one run, the usual layout: no reordering needed
            out = []
            for _batch, scores in self._run_batches(self._slices(items, sizes), True, 8, None):
                out.extend(scores)
            return out
        groups: dict[str, list[int]] = {}
        for index, rollout in enumerate(items):
            groups.setdefault(rollout.group, []).append(index)
        positions = [index for indices in groups.values() for index in indices]
        regrouped = [items[index] for index in positions]
        batches = self._slices(regrouped, [len(indices) for indices in groups.values()])
        scattered: list[Score | None] = [None] * len(items)
        done = 0
        for _batch, scores in self._run_batches(batches, True, 8, None):
            for index, score in zip(positions[done : done + len(scores)], scores):
                scattered[index] = score
            done += len(scores)
        return [s for s in scattered if s is not None]

    def stream(
        self, groups: Iterable[Sequence[Rollout]], *, ordered: bool = True, coalesce: bool = False,
        max_in_flight: int | None = None,
    ) -> Iterator[list[Score]]:
        """Yield each group's scores as soon as it is done, while later groups are scored.

        ``ordered=False`` yields groups as they finish. ``coalesce=True`` sends several
        consecutive groups to a worker at once (for input that is already in memory).
        """
        batches: Iterable[_Batch]
        if coalesce and isinstance(groups, Sequence):
            # All in memory: batches shrink towards the end so every worker finishes at about
            # the same time, also when some batches meet slow or failing calls.
            flat = [r for group in groups for r in group]
            batches = self._slices(flat, [len(group) for group in groups])
        elif coalesce:
            batches = self._batches(groups)
        else:
            batches = (_Batch.of([group]) for group in groups)
        # In-memory input keeps more batches queued so no worker waits between two of them.
        finished = self._run_batches(batches, ordered, 8 if coalesce else 2, max_in_flight)
        return (scores for batch, flat in finished for scores in _split(flat, batch.sizes))

    def _run_batches(self, batches: Iterable[_Batch], ordered: bool, depth: int,
                     max_in_flight: int | None) -> Iterator[tuple[_Batch, list[Score]]]:
        """Each batch with its scores, in order or as they finish."""
        loop = self._ensure_started()
        in_flight_limit = max_in_flight or max(2, depth * max(1, self.workers))
        if self.workers == 0 and not self._async:
            # Everything runs in this process and nothing awaits: no thread hand-off needed.
            for batch in batches:
                yield batch, _now(self._score_batch(batch))
            return
        pending: list[tuple[_Batch, Future[list[Score]]]] = []
        for batch in batches:
            pending.append((batch, loop.submit(self._score_batch(batch))))
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
        pending: list[asyncio.Future[list[Score]]] = []

        async def drain(block: bool) -> AsyncIterator[list[Score]]:
            while pending:
                if ordered:
                    if not pending[0].done() and not block:
                        return
                    yield await pending.pop(0)
                else:
                    done = [f for f in pending if f.done()]
                    if not done:
                        if not block:
                            return
                        await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                        continue
                    for future in done:
                        pending.remove(future)
                        yield await future
                block = block and len(pending) >= limit

        async def source() -> AsyncIterator[Sequence[Rollout]]:
            if isinstance(groups, AsyncIterable):
                async for group in groups:
                    yield group
            else:
                for group in groups:
                    yield group

        async for group in source():
            pending.append(asyncio.wrap_future(loop.submit(self._score_batch(_Batch.of([group])))))
            async for scores in drain(block=len(pending) >= limit):
                yield scores
        while pending:
            async for scores in drain(block=True):
                yield scores

    # ------------------------------------------------------------ internals

    def _batches(self, groups: Iterable[Sequence[Rollout]]) -> Iterator[_Batch]:
        """Whole groups, about ``batch_rollouts`` rollouts at a time."""
        rollouts: list[Rollout] = []
        sizes: list[int] = []
        for group in groups:
            rollouts.extend(group)
            sizes.append(len(group))
            if len(rollouts) >= self.batch_rollouts:
                yield _Batch(rollouts, sizes)
                rollouts, sizes = [], []
        if sizes:
            yield _Batch(rollouts, sizes)

    def _slices(self, items: list[Rollout], sizes: list[int] | None = None
                ) -> Iterator[_Batch]:
        """Batches of ``items`` that shrink towards the end, so that every worker finishes at
        about the same time: whole groups when ``sizes`` (each group's, in order) is given."""
        if sizes is None:
            start = 0
            while start < len(items):
                end = min(len(items), start + self._batch_limit(len(items) - start))
                yield _Batch(items[start:end], [end - start])
                start = end
            return
        start = end = 0
        batch_sizes: list[int] = []
        for size in sizes:
            end += size
            batch_sizes.append(size)
            if end - start >= self._batch_limit(len(items) - start):
                yield _Batch(items[start:end], batch_sizes)
                start, batch_sizes = end, []
        if batch_sizes:
            yield _Batch(items[start:end], batch_sizes)

    def _batch_limit(self, remaining: int) -> int:
        # A share of what is left per worker (guided scheduling), never below a few groups.
        share = remaining // (2 * max(1, self.workers))
        return max(min(self.batch_rollouts, 64), min(self.batch_rollouts, share))

    @staticmethod
    def _drain(pending: list[tuple[_Batch, Future[list[Score]]]], ordered: bool,
               block: bool) -> Iterator[tuple[_Batch, list[Score]]]:
        if ordered:
            while pending and (block or pending[0][1].done()):
                batch, future = pending.pop(0)
                yield batch, future.result()
                block = False
        else:
            done = [entry for entry in pending if entry[1].done()]
            if not done and block:
                import concurrent.futures

                concurrent.futures.wait([f for _, f in pending],
                                        return_when=concurrent.futures.FIRST_COMPLETED)
                done = [entry for entry in pending if entry[1].done()]
            for entry in done:
                pending.remove(entry)
                yield entry[0], entry[1].result()

    async def _score_batch(self, batch: _Batch) -> list[Score]:
        """Score one batch of whole groups; scores in the batch's order."""
        rollouts = batch.rollouts
        # The collector pauses around the allocation-heavy steps, never across an await.
        with gc_paused():
            results: dict[str, list[Cell]] = {
                c.name: [None] * len(rollouts) for c in self.rubric.components
            }
            cached = self._cached(rollouts, results)
        plain: set[str] = set()  # components known to hold finite floats only
        work = []
        if self._sync:
            work.append(self._run_sync(batch, results, plain))
        if self._async_work:
            work.append(self._run_async_workers(batch, results))
        for component in self._async_local:
            work.append(self._run_async(component, batch, results))
        if len(work) == 1:
            await work[0]  # no gather: the in-process path then never suspends (see _now)
        elif work:
            await asyncio.gather(*work)
        self._check_systematic(rollouts, results)
        with gc_paused():
            if cached is not None:
                self._record(cached, results)
            return self._combine(rollouts, [results[name] for name in self.rubric.names],
                                 [name in plain for name in self.rubric.names])

    def _combine(self, rollouts: list[Rollout], columns: list[list[Cell]],
                 known_plain: list[bool]) -> list[Score]:
        rubric = self.rubric
        names = rubric.names
        weights = [c.weight for c in rubric.components]
        # Plain weighted sums of plain floats take a fast path, a whole batch at a time;
        # anything else goes through ``Rubric.combine`` (gates, formula, failures, quantize).
        simple = rubric.formula is None and rubric.quantize is None and not any(
            c.requires for c in rubric.components)
        ok = Status.OK
        if simple and all(known or _floats_only(column)
                          for known, column in zip(known_plain, columns)):
            floats = cast("list[list[float]]", columns)
            if len(floats) == 2:  # the common shape, spelled out: it runs once per rollout
                (n1, n2), (w1, w2), (c1, c2) = names, weights, floats
                return [Score(r.id, r.group, w1 * a + w2 * b, ok, {n1: a, n2: b}, {}, {}, None)
                        for r, a, b in zip(rollouts, c1, c2)]
            if len(floats) == 1:
                (n1,), (w1,), (c1,) = names, weights, floats
                return [Score(r.id, r.group, w1 * a, ok, {n1: a}, {}, {}, None)
                        for r, a in zip(rollouts, c1)]
            fsum = math.fsum  # the total does not depend on component order
            return [Score(r.id, r.group, fsum([w * v for w, v in zip(weights, row)]), ok,
                          dict(zip(names, row)), {}, {}, None)
                    for r, row in zip(rollouts, zip(*floats))]
        scores = []
        for rollout, cells in zip(rollouts, zip(*columns)):
            per = {name: _as_result(cell) for name, cell in zip(names, cells)}
            reward, status, components, errors, metrics = rubric.combine(per)
            scores.append(Score(rollout.id, rollout.group, reward, status, components, errors,
                                metrics))
        return scores

    def _cached(self, rollouts: list[Rollout], results: dict[str, list[Cell]]
                ) -> tuple[list[str], dict[str, list[int]]] | None:
        """Fill cells from the cache; return the keys and, per component, the cells to compute."""
        if self.cache is None:
            return None
        key_of = self.content_key
        keys = ([r.content_key() for r in rollouts] if key_of is None
                else [key_of(r) for r in rollouts])
        # A store hands back plain ok results as bare floats, with no object made per result.
        lookup_cells = getattr(self.cache, "lookup_cells", None)
        missing: dict[str, list[int]] = {}
        for component in self.rubric.components:
            if component.group:
                continue  # a group reward's value depends on the whole group: never reused alone
            found: Mapping[str, float | ComponentResult] = (
                lookup_cells(component.identity(), keys) if lookup_cells is not None
                else self.cache.lookup(component.identity(), keys))
            column = results[component.name]
            if found:
                for index, key in enumerate(keys):
                    hit = found.get(key)
                    if hit is None:
                        continue
                    if type(hit) is not float:
                        result = cast(ComponentResult, hit)
                        # A plain ok result becomes a bare float, as if just computed, so the
                        # batch keeps the fast path.
                        plain = (result.status is Status.OK and not result.metrics
                                 and type(result.value) is float)
                        hit = cast(float, result.value) if plain else result
                    column[index] = hit
                missing[component.name] = [i for i, cell in enumerate(column) if cell is None]
            else:
                missing[component.name] = list(range(len(rollouts)))
        return keys, missing

    def _record(self, cached: tuple[list[str], dict[str, list[int]]],
                results: dict[str, list[Cell]]) -> None:
        """Store the results computed in this batch (not those that came from the cache)."""
        assert self.cache is not None
        keys, missing = cached
        record_cells = getattr(self.cache, "record_cells", None)
        for component in self.rubric.components:
            indices = missing.get(component.name)
            if not indices:
                continue
            column = results[component.name]
            if record_cells is not None:  # the store keeps what it may reuse
                wanted = [(keys[i], column[i]) for i in indices if column[i] is not None]
                if wanted:
                    record_cells(component.identity(), [k for k, _ in wanted],
                                 [c for _, c in wanted])
                continue
            fresh = {}
            for index in indices:
                cell = column[index]
                if cell is None:
                    continue
                if type(cell) is float or cast(ComponentResult, cell).status in (
                        Status.OK, Status.MASKED):
                    fresh[keys[index]] = _as_result(cell)
            if fresh:
                self.cache.record(component.identity(), fresh)

    def _payload(self, rollouts: list[Rollout]) -> list[Any]:
        """What the sync program reads (see ``_SyncProgram``): field columns or rollout tuples."""
        if self._layout is None:
            return [_as_tuple(r) for r in rollouts]
        return [_column(name, rollouts) for name in self._layout]

    async def _run_sync(self, batch: _Batch, results: dict[str, list[Cell]],
                        plain: set[str]) -> None:
        rollouts = batch.rollouts
        singles = self._singles
        count = len(singles)
        size = len(rollouts)
        columns = [results[c.name] for c in singles]
        # Rewards k0..k1-1 need every call and the others none: all of them in the usual case,
        # the changed ones when a rescore found the others stored.
        block = None if self._sync_groups else _missing_block(columns)
        if self.workers == 0 and block is not None:
            self.calls += size * (block[1] - block[0])
            with gc_paused():
                self._run_columns_inline(rollouts, columns, plain, block)
            return
        limits_of = [float(c.timeout or self.rubric.timeout) for c in singles]
        memory_of = [self._memory_limit(c) for c in singles]
        items: Sequence[Any]
        limits: Sequence[float]
        memory: Sequence[float]
        if block is not None:
            # A range of calls, which workers run one reward at a time, and limits computed
            # from the position.
            items = range(block[0] * size, block[1] * size)
            limits = _ColumnLimits(limits_of[block[0] : block[1]], size)
            memory = _ColumnLimits(memory_of[block[0] : block[1]], size)
        else:
            listed = [k * size + row for k in range(count) for row in range(size)
                      if columns[k][row] is None]
            group_limits: list[float] = []
            group_memory: list[float] = []
            group_targets: list[tuple[str, list[int]]] = []
            start = 0
            for group_size in batch.sizes:
                span = list(range(start, start + group_size))
                start += group_size
                for k, component in enumerate(self._sync_groups):
                    listed.append((k, [_as_tuple(rollouts[i]) for i in span]))  # type: ignore[arg-type]
                    group_limits.append(float(component.timeout or self.rubric.timeout))
                    group_memory.append(self._memory_limit(component))
                    group_targets.append((component.name, span))
            items = listed
            singles_listed = listed[: len(listed) - len(group_limits)]
            limits = [limits_of[i // size] for i in singles_listed] + group_limits
            memory = [memory_of[i // size] for i in singles_listed] + group_memory
        if not items:
            return
        self.calls += len(items)
        with gc_paused():
            shared = self._payload(rollouts) if count else []
        if self.workers > 0:
            done = await asyncio.wrap_future(
                self._worker_pool().run(self._program_key, items, limits, shared,
                                        memory=memory))
        else:
            done = self._run_inline(items, shared)
        with gc_paused():
            if block is not None:
                if _store_columns(done, size, columns[block[0] : block[1]]):
                    plain.update(c.name for c in singles[block[0] : block[1]])
            else:
                self._store_batch(done, items, size, columns, group_targets, results)

    def _memory_limit(self, component: Component) -> float:
        return float(component.memory_limit or self.rubric.memory_limit)

    async def _run_async_workers(self, batch: _Batch, results: dict[str, list[Cell]]) -> None:
        """The user's async rewards, in the workers: each batch's calls run concurrently on a
        worker's event loop, each under its own hard time and memory limits."""
        rollouts = batch.rollouts
        size = len(rollouts)
        singles = [c for c in self._async_work if not c.group]
        groups = [c for c in self._async_work if c.group]
        columns = [results[c.name] for c in singles]
        items: list[Any] = []
        limits: list[float] = []
        memory: list[float] = []
        for k, component in enumerate(singles):
            column = columns[k]
            for row in range(size):
                if column[row] is None:
                    items.append(k * size + row)
                    limits.append(float(component.timeout or self.rubric.timeout))
                    memory.append(self._memory_limit(component))
        group_targets: list[tuple[str, list[int]]] = []
        start = 0
        for group_size in batch.sizes:
            span = list(range(start, start + group_size))
            start += group_size
            for k, component in enumerate(groups):
                items.append((k, [_as_tuple(rollouts[i]) for i in span]))
                limits.append(float(component.timeout or self.rubric.timeout))
                memory.append(self._memory_limit(component))
                group_targets.append((component.name, span))
        if not items:
            return
        self.calls += len(items)
        shared = [_as_tuple(r) for r in rollouts] if singles else []
        per_worker = max(1, self.max_concurrency // max(1, self.workers))
        done = await asyncio.wrap_future(self._worker_pool().run(
            self._async_key, items, limits, shared, memory=memory, concurrency=per_worker))
        self._store_batch(done, items, size, columns, group_targets, results)

    def _check_systematic(self, rollouts: list[Rollout], results: dict[str, list[Cell]]) -> None:
        """Raise when a reward has failed the same way on every call since the start.

        A reward that cannot work at all (a missing module inside it, a wrong signature, a
        sandbox that cannot start) would otherwise turn a whole run into masked rewards, which
        trainers read as zeros. Once a component has succeeded, or failed in two different
        ways, it is never checked again.
        """
        if not self.stop_on_systematic:
            return
        for component in self.rubric.components:
            if component.evaluator is not None:
                continue  # judges have budgets and their own start-up check
            state = self._same_failures.get(component.name, ("", 0, set()))
            if state is None:
                continue
            message, count, groups = state
            for rollout, cell in zip(rollouts, results[component.name]):
                if type(cell) is float or cell is None:
                    state = None
                    break
                result = cast(ComponentResult, cell)
                if result.status not in (Status.ERROR, Status.TIMEOUT):
                    state = None
                    break
                text = f"{result.status.value}: {result.error}"
                if count and text != message:
                    state = None
                    break
                message, count = text, count + 1
                groups.add(rollout.group)
                state = (message, count, groups)
            self._same_failures[component.name] = state
            if state is not None and count >= _SYSTEMATIC_CALLS and len(groups) >= 2:
                raise SystematicFailure(
                    f"component {component.name!r} failed the same way on each of its first "
                    f"{count} calls ({message}): the reward cannot work as set up; fix it "
                    f"before scoring (check it with `rewardsmith test`)")

    def _store_batch(self, batch: BatchResult, items: Sequence[Any], size: int,
                     columns: list[list[Cell]], group_targets: list[tuple[str, list[int]]],
                     results: dict[str, list[Cell]]) -> None:
        """Put a worker batch's values into the result columns, failures included."""
        values, failures = cast("list[Any]", batch.values), batch.failures
        singles_done = len(items) - len(group_targets)
        for position in range(singles_done):
            k, row = divmod(items[position], size)
            failed = failures.get(position)
            if failed is not None:
                columns[k][row] = _failure(*failed)
                continue
            value = values[position]
            columns[k][row] = value if type(value) is float else _expand(value)
        for offset, (name, span) in enumerate(group_targets):
            position = singles_done + offset
            column = results[name]
            failed = failures.get(position)
            if failed is not None:
                for index in span:
                    column[index] = _failure(*failed)
            else:
                for index, compact in zip(span, values[position]):
                    column[index] = _expand(compact)

    def _run_columns_inline(self, rollouts: list[Rollout], columns: list[list[Cell]],
                            plain: set[str], block: tuple[int, int]) -> None:
        """In-process, one column at a time (rewards ``block[0]`` to ``block[1] - 1``): no
        per-call bookkeeping unless a call fails."""
        first, end = block
        size = len(rollouts)
        if self._layout is not None:
            # The fields every reward reads are taken once per rollout, not once per reward.
            program = self._program
            rows = program.build_rows(self._payload(rollouts))
            runs: list[tuple[Callable[[Any], Any], Sequence[Any]]] = [
                (call, args) for call, args, _fix, _limit in program.runs(
                    range(first * size, end * size), rows)]
        else:
            if self._inline_binders is None:
                self._inline_binders = [make_binder(c.func, c.params,  # type: ignore[arg-type]
                                                    what=f"component {c.name!r}")
                                        for c in self._singles]
            runs = [(binder, rollouts) for binder in self._inline_binders[first:end]]
        for component, (call, args), column in zip(self._singles[first:end], runs,
                                                   columns[first:end]):
            values: list[Any] = []
            append = values.append
            while len(values) < len(args):
                # One try per run of successful calls, not per call; a failing call is
                # recorded and the loop resumes right after it (nothing is called twice).
                try:
                    for arg in itertools.islice(args, len(values), None):
                        append(call(arg))
                except Exception as exc:  # noqa: BLE001 - a failure is data
                    append(ComponentResult.failed(Status.ERROR, format_exception(exc)))
            if _floats_only(values) and math.isfinite(sum(values)):
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

    def _run_inline(self, items: Sequence[Any], shared: Any) -> BatchResult:
        values: list[Any] = []
        failures: dict[int, Outcome] = {}
        rows = self._program.build_rows(shared)
        for position, item in enumerate(items):
            try:
                values.append(self._program.call_item(item, rows))
            except Exception as exc:  # noqa: BLE001 - a failure is data
                values.append(None)
                failures[position] = (ERROR, format_exception(exc))
        return BatchResult(values, failures)

    async def _run_async(self, component: Component, batch: _Batch,
                         results: dict[str, list[Cell]]) -> None:
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.max_concurrency)
        column = results[component.name]
        timeout = float(component.timeout or self.rubric.timeout)
        offsets = list(itertools.accumulate([0, *batch.sizes]))
        tasks = []
        if component.evaluator is not None or component.group:
            for offset, group in zip(offsets, _split(batch.rollouts, batch.sizes)):
                tasks.append(self._async_group(component, group, offset, column, timeout))
        else:
            binder = make_binder(component.func, component.params,  # type: ignore[arg-type]
                                 what=f"component {component.name!r}")
            for index, rollout in enumerate(batch.rollouts):
                if column[index] is None:
                    tasks.append(self._async_one(component, binder, rollout, index, column,
                                                 timeout))
        await asyncio.gather(*tasks)

    async def _async_one(self, component: Component, binder: Callable[[Rollout], Any],
                         rollout: Rollout, index: int, column: list[Cell],
                         timeout: float) -> None:
        assert self._semaphore is not None
        async with self._semaphore:
            self.calls += 1
            try:
                value = await asyncio.wait_for(binder(rollout), timeout)
                column[index] = to_component_result(value, component.reward_key)
            except asyncio.TimeoutError:
                column[index] = ComponentResult.failed(Status.TIMEOUT, f"timed out after {timeout:g} s")
            except Exception as exc:  # noqa: BLE001 - a failure is data
                column[index] = ComponentResult.failed(Status.ERROR, format_exception(exc))

    async def _async_group(self, component: Component, group: list[Rollout], offset: int,
                           column: list[Cell], timeout: float) -> None:
        assert self._semaphore is not None
        todo = [i for i in range(len(group)) if column[offset + i] is None]
        if not todo:
            return
        try:
            if component.evaluator is not None:
                # Evaluators (judges) bound their own concurrency and time per request.
                values: list[ComponentResult] = await component.evaluator.evaluate(
                    [group[i] for i in todo])
                for i, value in zip(todo, values):
                    column[offset + i] = value
                return
            async with self._semaphore:
                self.calls += 1
                binder = make_group_binder(component.func, component.params,  # type: ignore[arg-type]
                                           what=f"component {component.name!r}")
                raw = await asyncio.wait_for(binder(group), timeout)
            for i, value in enumerate(_group_results(raw, len(group), component.reward_key)):
                column[offset + i] = value
        except asyncio.TimeoutError:
            for i in todo:
                column[offset + i] = ComponentResult.failed(Status.TIMEOUT,
                                                            f"timed out after {timeout:g} s")
        except Exception as exc:  # noqa: BLE001 - a failure is data
            for i in todo:
                column[offset + i] = ComponentResult.failed(Status.ERROR, format_exception(exc))


# Calls that must fail alike, over at least two groups, before a reward counts as broken.
_SYSTEMATIC_CALLS = 16


def _contiguous_sizes(items: list[Rollout]) -> list[int] | None:
    """The size of each group when each group's rollouts sit together; None otherwise."""
    if not items:
        return []
    keys = list(map(operator.attrgetter("group"), items))
    # Where the group changes, found at C speed (no Python code runs per rollout).
    starts = [0, *itertools.compress(range(1, len(keys)), map(operator.ne, keys[1:], keys))]
    if len(starts) != len(set(keys)):
        return None  # some group comes back after another one
    return list(map(operator.sub, [*starts[1:], len(keys)], starts))


def _split(items: list[Any], sizes: list[int]) -> list[list[Any]]:
    out = []
    start = 0
    for size in sizes:
        out.append(items[start : start + size])
        start += size
    return out


class _Batch(NamedTuple):
    """Rollouts of whole groups, one after another, and the size of each group."""

    rollouts: list[Rollout]
    sizes: list[int]

    @classmethod
    def of(cls, groups: Iterable[Sequence[Rollout]]) -> _Batch:
        listed = [list(group) for group in groups]
        return cls([r for group in listed for r in group], [len(group) for group in listed])


def _now(coroutine: Any) -> Any:
    """Run a coroutine that never suspends to completion, here, without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("internal error: an in-process batch tried to wait")


class _ColumnLimits(Sequence[float]):
    """The time limit of call ``k * rows + row``: reward ``k``'s, without a list per call."""

    def __init__(self, limits: list[float], rows: int):
        self._limits = limits
        self._rows = rows

    def __len__(self) -> int:
        return len(self._limits) * self._rows

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._limits[index // self._rows]


def _missing_block(columns: list[list[Cell]]) -> tuple[int, int] | None:
    """``(k0, k1)`` when columns k0..k1-1 are empty and every other one is full; else None."""
    empty = [column.count(None) == len(column) for column in columns]
    if not columns or not any(empty):
        return None
    first = empty.index(True)
    end = first + 1
    while end < len(empty) and empty[end]:
        end += 1
    if any(empty[end:]) or any(column.count(None) for column in columns[:first] + columns[end:]):
        return None
    return first, end


def _floats_only(values: list[Any]) -> bool:
    """Whether every value is a float (a set of types is built at C speed)."""
    return not values or set(map(type, values)) == {float}


def _column(name: str, rollouts: list[Rollout]) -> list[Any]:
    """One field of every rollout, as a reward reads it."""
    if name == "text":
        return [c if type(c) is str else message_text(c) for c in [r.completion for r in rollouts]]
    if name == "answer":
        return [r.answer for r in rollouts]
    getter = ROW_FIELDS[name]
    return [getter(r) for r in rollouts]


def _store_columns(batch: BatchResult, size: int, columns: list[list[Cell]]) -> bool:
    """Put a whole batch's values (component-major, every call made) into the columns;
    True when they are all finite floats."""
    values, failures = batch.values, batch.failures
    if isinstance(values, array.array):  # the worker found nothing but finite floats
        for k, column in enumerate(columns):
            column[:] = values[k * size : (k + 1) * size].tolist()
        return True
    for k, column in enumerate(columns):
        part = values[k * size : (k + 1) * size]
        if not _floats_only(part):
            part = [v if type(v) is float or v is None else _expand(v) for v in part]
        column[:] = part
    for position, failure in failures.items():
        k, row = divmod(position, size)
        columns[k][row] = _failure(*failure)
    return False


def _as_result(cell: Cell) -> ComponentResult:
    if cell is None:
        return ComponentResult.failed(Status.ERROR, "no result (internal error)")
    if type(cell) is float:
        return ComponentResult(cell)
    return cast(ComponentResult, cell)


def _failure(status: int, message: Any) -> ComponentResult:  # from a worker Outcome
    return ComponentResult.failed(Status.TIMEOUT if status == 2 else Status.ERROR, str(message))


def score_rollouts(rubric: Rubric, rollouts: Iterable[Rollout], **options: Any) -> list[Score]:
    """Score rollouts with ``rubric`` in one call (starts and stops an engine)."""
    with Engine(rubric, **options) as engine:
        return engine.score(rollouts)
