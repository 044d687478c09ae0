"""Per-call timing, when a run asks for it (``Engine(timing=True)``, ``score --timing``).

A timed reward's result carries its call's wall time as the reserved metric ``@seconds``; it
travels with the result like any metric (worker, result log, Ray), and ``split_timing`` moves
it out of the metrics into ``Score.timing`` when scores are assembled. The store keeps it in
its own column. A group reward's call time is given to every rollout of its group; a result
replayed from the store took no time in this run and has none.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from rewardsmith.rubric.calling import to_component_result

from ..types import TIME_METRIC, ComponentResult
from .cells import group_results

__all__ = ["split_timing", "timed", "timed_async", "timed_async_group", "timed_group",
           "with_time"]

_SUFFIX = "." + TIME_METRIC


def _with_time(result: ComponentResult, seconds: float) -> ComponentResult:
    return ComponentResult(result.value, result.status, result.error,
                           {**result.metrics, TIME_METRIC: seconds})


def with_time(results: list[ComponentResult], seconds: float) -> list[ComponentResult]:
    """``results`` of one call, each carrying its time."""
    return [_with_time(r, seconds) for r in results]


def timed(call: Callable[[Any], Any], reward_key: str) -> Callable[[Any], ComponentResult]:
    """``call`` whose result carries how long it took."""
    clock = time.perf_counter

    def run(row: Any) -> ComponentResult:
        started = clock()
        value = call(row)
        return _with_time(to_component_result(value, reward_key), clock() - started)

    return run


def timed_group(call: Callable[[Any], Any], reward_key: str
                ) -> Callable[[list[Any]], list[ComponentResult]]:
    """A group reward whose every result carries the group call's time."""
    clock = time.perf_counter

    def run(rollouts: list[Any]) -> list[ComponentResult]:
        started = clock()
        values = call(rollouts)
        took = clock() - started
        return [_with_time(r, took) for r in group_results(values, len(rollouts), reward_key)]

    return run


def timed_async(call: Callable[[Any], Awaitable[Any]], reward_key: str
                ) -> Callable[[Any], Awaitable[ComponentResult]]:
    """An async reward whose result carries its wall time, awaits included."""
    clock = time.perf_counter

    async def run(row: Any) -> ComponentResult:
        started = clock()
        value = await call(row)
        return _with_time(to_component_result(value, reward_key), clock() - started)

    return run


def split_timing(metrics: dict[str, float]) -> dict[str, float] | None:
    """Move each ``<component>.@seconds`` out of flattened ``metrics``; component -> seconds."""
    timing: dict[str, float] | None = None
    for key in [k for k in metrics if k.endswith(_SUFFIX)]:
        if timing is None:
            timing = {}
        timing[key[: -len(_SUFFIX)]] = metrics.pop(key)
    return timing


def timed_async_group(call: Callable[[list[Any]], Awaitable[Any]], reward_key: str
                      ) -> Callable[[list[Any]], Awaitable[list[ComponentResult]]]:
    """An async group reward whose every result carries the group call's wall time."""
    clock = time.perf_counter

    async def run(rollouts: list[Any]) -> list[ComponentResult]:
        started = clock()
        values = await call(rollouts)
        took = clock() - started
        return [_with_time(r, took) for r in group_results(values, len(rollouts), reward_key)]

    return run
