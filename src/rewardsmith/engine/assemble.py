"""Assembling scores: a batch's result columns into one ``Score`` per rollout, and the watch
for a reward that fails the same way on every call."""

from __future__ import annotations

import math
from typing import Any, cast

from ..errors import SystematicFailure
from ..rubric import Rubric
from ..types import ComponentResult, Rollout, Score, Status
from ..workers import BatchResult
from .cells import Cell, as_result, expand, failure_result, floats_only
from .plan import CallPlan
from .timing import split_timing

__all__ = ["SystematicWatch", "combine", "store_plan"]

# Calls that must fail alike, over at least two groups, before a reward counts as broken.
SYSTEMATIC_CALLS = 16


def combine(rubric: Rubric, rollouts: list[Rollout], columns: list[list[Cell]],
            known_plain: list[bool]) -> list[Score]:
    """One score per rollout from the columns (one per component, in the rubric's order).

    Plain weighted sums of plain floats take a fast path, a whole batch at a time; anything
    else goes through ``Rubric.combine`` (gates, formula, failures, quantize), which the fast
    path must agree with: the total of a weighted sum does not depend on component order.
    """
    names = rubric.names
    weights = [c.weight for c in rubric.components]
    simple = rubric.formula is None and rubric.quantize is None and not any(
        c.requires for c in rubric.components)
    ok = Status.OK
    if simple and all(known or floats_only(column)
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
        fsum = math.fsum
        return [Score(r.id, r.group, fsum([w * v for w, v in zip(weights, row)]), ok,
                      dict(zip(names, row)), {}, {}, None)
                for r, row in zip(rollouts, zip(*floats))]
    scores = []
    for rollout, cells in zip(rollouts, zip(*columns)):
        per = {name: as_result(cell) for name, cell in zip(names, cells)}
        reward, status, components, errors, metrics = rubric.combine(per)
        timing = split_timing(metrics) if metrics else None
        scores.append(Score(rollout.id, rollout.group, reward, status, components, errors,
                            metrics, None, timing))
    return scores


def store_plan(batch: BatchResult, plan: CallPlan, size: int, columns: list[list[Cell]],
               results: dict[str, list[Cell]]) -> None:
    """Put the results of a planned batch into the result columns, failures included: the one
    place where what an executor returned becomes cells, whichever executor ran it."""
    values, failures = cast("list[Any]", batch.values), batch.failures
    items = plan.items
    singles_done = len(items) - len(plan.group_targets)
    for position in range(singles_done):
        k, row = divmod(items[position], size)
        failed = failures.get(position)
        if failed is not None:
            columns[k][row] = failure_result(*failed)
            continue
        value = values[position]
        columns[k][row] = value if type(value) is float else expand(value)
    for offset, (name, span) in enumerate(plan.group_targets):
        position = singles_done + offset
        column = results[name]
        failed = failures.get(position)
        if failed is not None:
            for index in span:
                column[index] = failure_result(*failed)
        else:
            for index, compacted in zip(span, values[position]):
                column[index] = expand(compacted)


class SystematicWatch:
    """Raises ``SystematicFailure`` when a reward has failed the same way on every call since
    the start.

    A reward that cannot work at all (a missing module inside it, a wrong signature, a sandbox
    that cannot start) would otherwise turn a whole run into masked rewards, which trainers read
    as zeros. Only failures over at least two groups and two different reference answers
    count: the same failure on rollouts that share an answer (a missing or unreadable
    reference) is the data's, and stays a per-rollout error. Once a component has succeeded,
    or failed in two different ways, it is never checked again. Judges are left out: they have
    budgets and a start-up check of their own.
    """

    def __init__(self, rubric: Rubric):
        self._rubric = rubric
        # Per component: (message, calls, groups and answers seen), or None once disarmed.
        self._state: dict[str, tuple[str, int, set[str], set[str]] | None] = {
            c.name: ("", 0, set(), set()) for c in rubric.components if c.evaluator is None}

    def check(self, rollouts: list[Rollout], results: dict[str, list[Cell]]) -> None:
        for name, state in self._state.items():
            if state is None:
                continue
            message, count, groups, answers = state
            for rollout, cell in zip(rollouts, results[name]):
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
                if len(answers) < 2:
                    answers.add(repr(rollout.answer)[:200])
                state = (message, count, groups, answers)
            self._state[name] = state
            if (state is not None and count >= SYSTEMATIC_CALLS and len(groups) >= 2
                    and len(answers) >= 2):
                raise SystematicFailure(
                    f"component {name!r} failed the same way on each of its first {count} "
                    f"calls ({message}): the reward cannot work as set up; fix it before "
                    f"scoring (check it with `rewardsmith test`)")
