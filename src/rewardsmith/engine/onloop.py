"""Rewards that run on the engine's own event loop: judges (network I/O, with limits of their
own) always, and a user's async rewards when there are no workers (``workers=0``)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from typing import Any

from rewardsmith._system.deadline import await_within
from rewardsmith.rubric import (
    Component,
    Rubric,
)
from rewardsmith.rubric.calling import (
    make_binder,
    make_group_binder,
    to_component_result,
)
from rewardsmith.workers import format_exception

from ..types import ComponentResult, Rollout, Status
from .cells import Cell, group_results
from .plan import Batch, split
from .timing import timed_async, timed_async_group, with_time

__all__ = ["LoopRewards"]


class LoopRewards:
    """Runs components on the running event loop, ``max_concurrency`` calls at a time."""

    def __init__(self, rubric: Rubric, max_concurrency: int, *, timing: bool = False):
        self.rubric = rubric
        self.timing = timing  # results carry their call's wall time (see engine.timing)
        self.max_concurrency = max_concurrency
        self._semaphore: asyncio.Semaphore | None = None
        self.calls = 0
        # Calls past their timeout that ignored their cancellation: in this process nothing
        # can stop them, so they are left cancelled on the loop and not waited for.
        self.abandoned: set[asyncio.Future[Any]] = set()

    async def run(self, component: Component, batch: Batch,
                  results: dict[str, list[Cell]]) -> None:
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.max_concurrency)
        column = results[component.name]
        timeout = float(component.timeout or self.rubric.timeout)
        offsets = list(itertools.accumulate([0, *batch.sizes]))
        tasks = []
        if component.evaluator is not None or component.group:
            for offset, group in zip(offsets, split(batch.rollouts, batch.sizes)):
                tasks.append(self._group(component, group, offset, column, timeout))
        else:
            binder = make_binder(component.func, component.params,  # type: ignore[arg-type]
                                 what=f"component {component.name!r}")
            if self.timing:
                binder = timed_async(binder, component.reward_key)
            for index, rollout in enumerate(batch.rollouts):
                if column[index] is None:
                    tasks.append(self._one(component, binder, rollout, index, column, timeout))
        await asyncio.gather(*tasks)

    async def _one(self, component: Component, binder: Callable[[Rollout], Any],
                   rollout: Rollout, index: int, column: list[Cell], timeout: float) -> None:
        assert self._semaphore is not None
        async with self._semaphore:
            self.calls += 1
            try:
                value = await await_within(binder(rollout), timeout, self.abandoned)
                column[index] = to_component_result(value, component.reward_key)
            except asyncio.TimeoutError:
                column[index] = ComponentResult.failed(Status.TIMEOUT,
                                                       f"timed out after {timeout:g} s")
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - a failure is data
                column[index] = ComponentResult.failed(Status.ERROR, format_exception(exc))

    async def _group(self, component: Component, group: list[Rollout], offset: int,
                     column: list[Cell], timeout: float) -> None:
        assert self._semaphore is not None
        todo = [i for i in range(len(group)) if column[offset + i] is None]
        if not todo:
            return
        try:
            if component.evaluator is not None:
                # Evaluators (judges) bound their own concurrency and time per request.
                started = time.perf_counter()
                values: list[ComponentResult] = await component.evaluator.evaluate(
                    [group[i] for i in todo])
                if self.timing:  # the group's wall time, waits for limits included
                    values = with_time(values, time.perf_counter() - started)
                for i, value in zip(todo, values):
                    column[offset + i] = value
                return
            async with self._semaphore:
                self.calls += 1
                binder: Callable[[Any], Any] = make_group_binder(
                    component.func, component.params,  # type: ignore[arg-type]
                    what=f"component {component.name!r}")
                if self.timing:
                    binder = timed_async_group(binder, component.reward_key)
                raw = await await_within(binder(group), timeout, self.abandoned)
            for i, value in enumerate(group_results(raw, len(group), component.reward_key)):
                column[offset + i] = value
        except asyncio.TimeoutError:
            for i in todo:
                column[offset + i] = ComponentResult.failed(Status.TIMEOUT,
                                                            f"timed out after {timeout:g} s")
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a failure is data
            for i in todo:
                column[offset + i] = ComponentResult.failed(Status.ERROR, format_exception(exc))
