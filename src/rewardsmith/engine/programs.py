"""What runs in a worker: the rubric's rewards as programs over a batch's rows.

``SyncProgram`` runs sync rewards (with the segment fast path of ``rewardsmith.workers``);
``AsyncProgram`` runs a user's async rewards on the worker's own event loop. Both load their
rewards when they arrive in a worker (``prepare``), so a reward that cannot load there fails
the run before anything is scored.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Sequence
from operator import attrgetter
from typing import Any

from rewardsmith.rubric import (
    DEFAULT_TIMEOUT,
    Component,
)
from rewardsmith.rubric.calling import (
    ROW_FIELDS,
    make_binder,
    make_group_binder,
    make_row_binder,
    row_fields,
    row_positions,
    to_component_result,
)
from rewardsmith.rubric.loading import load_reward

from ..types import Rollout, message_text
from .cells import check_in_time, compact, group_results, read_value
from .timing import timed, timed_async, timed_async_group, timed_group

__all__ = ["AsyncProgram", "SyncProgram", "column_of", "row_layout"]



def warm_up(entries: Sequence[tuple[Any, ...]]) -> None:
    """Call each reward's ``warmup`` attribute, if it has one, once per process before its
    first call: a cache that takes longer to fill than a call's timeout is filled here, where
    no call's clock runs (the pool gives loading and warming up ``WARM_UP_SECONDS``)."""
    for entry in entries:
        reward = entry[0]
        func = load_reward(reward).func if isinstance(reward, str) else reward
        hook = getattr(func, "warmup", None)
        if callable(hook):
            hook()

class SyncProgram:
    """Runs the rubric's sync rewards inside a worker process; built lazily there.

    A batch's shared payload holds its rows: one list per field of ``layout``, or whole
    rollout tuples when some reward needs the whole rollout (``layout`` is None). Items are
    numbered component-major: int ``k * rows + row`` is single reward ``k`` on that row;
    ``(k, tuples)`` is group reward ``k`` on a group's rollout tuples.
    """

    def __init__(self, singles: Sequence[Component], groups: Sequence[Component],
                 layout: Sequence[str] | None, *, timing: bool = False):
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
        self.timing = timing  # each result carries its call's time (see engine.timing)
        self._calls: list[Callable[[Any], Any]] | None = None
        self._direct: list[tuple[Callable[..., Any], list[int]] | None] = []
        self._group_calls: list[Callable[[Any], Any]] = []
        self._shared: Any = None
        self._args: list[Any] = []

    def __getstate__(self) -> dict[str, Any]:
        return {"singles": self.singles, "groups": self.groups, "layout": self.layout,
                "limits": self.limits, "group_limits": self.group_limits, "timing": self.timing}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.singles, self.groups, self.layout = state["singles"], state["groups"], state["layout"]
        self.limits, self.group_limits = state["limits"], state["group_limits"]
        self.timing = state.get("timing", False)
        self._calls = None
        self._direct = []
        self._group_calls = []
        self._shared = None
        self._args = []

    def calls(self) -> list[Callable[[Any], Any]]:
        """One callable per single reward, taking one row (see ``build_rows``)."""
        if self._calls is None:
            calls: list[Callable[[Any], Any]] = []
            direct: list[tuple[Callable[..., Any], list[int]] | None] = []
            group_calls: list[Callable[[Any], Any]] = []
            for reward, params, key, name in self.singles:
                func = load_reward(reward).func if isinstance(reward, str) else reward
                what = f"component {name!r}"
                call: Callable[[Any], Any] = (
                    make_row_binder(func, params, self.layout, what=what)
                    if self.layout is not None else make_binder(func, params, what=what))
                calls.append(timed(call, key) if self.timing else call)
                positions = (row_positions(func, params, self.layout, what=what)
                             if self.layout is not None and not self.timing else None)
                direct.append((func, positions) if positions is not None else None)
            for reward, params, key, name in self.groups:
                func = load_reward(reward).func if isinstance(reward, str) else reward
                group_call = make_group_binder(func, params, what=f"component {name!r}")
                group_calls.append(timed_group(group_call, key) if self.timing else group_call)
            self._group_calls = group_calls
            self._direct = direct
            self._calls = calls
        return self._calls

    def prepare(self) -> None:
        """Load every reward (in the worker, when the program arrives) and run its warm-up
        hook."""
        self.calls()
        warm_up([*self.singles, *self.groups])

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

    def runs(self, items: range, shared: Any
             ) -> Iterator[tuple[Callable[..., Any], list[Sequence[Any]], Callable[[Any], Any],
                                 float]]:
        """The calls of a range of items on a payload: one run per reward, as the reward's
        callable, the columns it takes (one argument from each, in order), how to read a
        value that is not a finite float, and the reward's time limit.

        A reward that takes its fields positionally is called straight on the payload's
        columns; any other through its binder, on the rows."""
        calls = self.calls()
        direct = self._direct
        count = len(shared[0]) if self.layout is not None else len(shared)
        rows: list[Any] | None = None
        for k, call in enumerate(calls):
            low = max(items.start, k * count) - k * count
            high = min(items.stop, (k + 1) * count) - k * count
            if low >= high:
                continue
            fix = functools.partial(read_value, self.singles[k][2])
            spec = direct[k]
            if spec is not None:
                func, positions = spec
                yield (func, [_part(shared[p], low, high, count) for p in positions], fix,
                       self.limits[k])
                continue
            if rows is None:
                rows = self.build_rows(shared)
            yield call, [_part(rows, low, high, count)], fix, self.limits[k]

    def segments(self, items: range, shared: Any
                 ) -> Iterator[tuple[Callable[..., Any], Sequence[Any], Callable[[Any], Any],
                                     float, bool]]:
        """The worker's fast path (see ``rewardsmith.workers``): each run's arguments one per
        call, spread into the call when a reward takes more than one."""
        for call, columns, fix, limit in self.runs(items, shared):
            if len(columns) == 1:
                yield call, columns[0], fix, limit, False
            else:
                yield call, list(zip(*columns)), fix, limit, True

    def call_item(self, item: Any, rows: list[Any]) -> Any:
        """Make one call: an int item on ``rows``, or a group item."""
        calls = self.calls()
        started = time.monotonic()
        if type(item) is int:
            k, row = divmod(item, len(rows))
            value = calls[k](rows[row])
            check_in_time(started, self.limits[k])
            if type(value) is float and value - value == 0.0:  # finite float: the fast path
                return value
            return compact(to_component_result(value, self.singles[k][2]))
        k, tuples = item
        rollouts = [Rollout(*data) for data in tuples]
        raw = self._group_calls[k](rollouts)
        check_in_time(started, self.group_limits[k])
        results = group_results(raw, len(rollouts), self.groups[k][2])
        return [compact(r) for r in results]

    def __call__(self, item: Any, shared: Any) -> Any:
        return self.call_item(item, self._rows(shared) if type(item) is int else [])


class AsyncProgram:
    """Runs a user's async rewards inside a worker process (see ``AsyncProgram``).

    Items are numbered as for ``SyncProgram``: ``k * rows + row`` is single reward ``k`` on a
    row (a rollout tuple), ``(k, tuples)`` is group reward ``k`` on a group.
    """

    def __init__(self, singles: Sequence[Component], groups: Sequence[Component], *,
                 timing: bool = False):
        def spec(c: Component) -> tuple[Any, dict[str, Any], str, str]:
            return (c.reward if isinstance(c.reward, str) else c.func, c.params, c.reward_key,
                    c.name)

        self.singles = [spec(c) for c in singles]
        self.groups = [spec(c) for c in groups]
        self.timing = timing
        self._binders: list[Callable[[Any], Any]] | None = None
        self._group_binders: list[Callable[[Any], Any]] = []
        self._rows = 1  # rows in the current batch

    def __getstate__(self) -> dict[str, Any]:
        return {"singles": self.singles, "groups": self.groups, "timing": self.timing}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.singles, self.groups = state["singles"], state["groups"]
        self.timing = state.get("timing", False)
        self._binders = None
        self._group_binders = []
        self._rows = 1

    def _load(self) -> list[Callable[[Any], Any]]:
        if self._binders is None:
            binders = []
            for reward, params, key, name in self.singles:
                func = load_reward(reward).func if isinstance(reward, str) else reward
                binder = make_binder(func, params, what=f"component {name!r}")
                binders.append(timed_async(binder, key) if self.timing else binder)
            for reward, params, key, name in self.groups:
                func = load_reward(reward).func if isinstance(reward, str) else reward
                group_binder = make_group_binder(func, params, what=f"component {name!r}")
                self._group_binders.append(timed_async_group(group_binder, key)
                                           if self.timing else group_binder)
            self._binders = binders
        return self._binders

    def prepare(self) -> None:
        """Load every reward (in the worker, when the program arrives) and run its warm-up
        hook."""
        self._load()
        warm_up([*self.singles, *self.groups])

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
            return compact(to_component_result(value, self.singles[item // self._rows][2]))
        k, tuples = item
        results = group_results(value, len(tuples), self.groups[k][2])
        return [compact(r) for r in results]

    def __call__(self, item: Any, shared: Any) -> Any:
        raise RuntimeError("async rewards run through the worker's event loop")


def row_layout(components: Sequence[Component]) -> list[str] | None:
    """The fields every single sync reward reads, in a fixed order; None means whole rollouts.

    Never empty: rewards that read no field still get the ids, whose column gives the batch
    its number of rows."""
    needed: set[str] = set()
    for component in components:
        fields = row_fields(component.func, component.params)  # type: ignore[arg-type]
        if fields is None:
            return None
        needed |= fields
    return [name for name in ROW_FIELDS if name in needed] or ["id"]


def _part(values: Sequence[Any], low: int, high: int, count: int) -> Sequence[Any]:
    return values if low == 0 and high == count else values[low:high]


def column_of(name: str, rollouts: list[Rollout]) -> list[Any]:
    """One field of every rollout, as a reward reads it."""
    # Attributes read with map and attrgetter: no Python frame per rollout (the engine's
    # parent does this for every batch, on the core its workers share).
    if name == "text":
        completions = list(map(_COMPLETION, rollouts))
        if set(map(type, completions)) <= {str}:
            return completions
        return [c if type(c) is str else message_text(c) for c in completions]
    attribute = _PLAIN_ATTRIBUTES.get(name)
    if attribute is not None:
        return list(map(attribute, rollouts))
    return list(map(ROW_FIELDS[name], rollouts))


_COMPLETION = attrgetter("completion")
# Fields a reward reads as the rollout holds them (``ROW_FIELDS`` says how each is read).
_PLAIN_ATTRIBUTES = {name: attrgetter(name) for name in (
    "answer", "metadata", "truncated", "id", "group")}
