"""Assembling scores: a batch's result columns into its scores (``ScoreColumns``), and the watch
for a reward that fails the same way on every call."""

from __future__ import annotations

from typing import Any, cast

from rewardsmith.engine.columns import ScoreColumns
from rewardsmith.rubric import Rubric
from rewardsmith.workers import BatchResult

from ..errors import SystematicFailure
from ..types import ComponentResult, Rollout, Score, Status
from .cells import Cell, as_result, expand, failure_result, floats_only
from .plan import CallPlan
from .timing import split_timing

__all__ = ["SystematicWatch", "combine", "store_plan"]

# Calls that must fail alike, over at least two groups, before a reward counts as broken.
SYSTEMATIC_CALLS = 16


def combine(rubric: Rubric, rollouts: list[Rollout], columns: list[list[Cell]],
            known_plain: list[bool]) -> ScoreColumns:
    """The batch's scores from the columns (one per component, in the rubric's order).

    Plain weighted sums of plain floats stay columns (``Score`` objects are built only when
    asked for); anything else goes through ``Rubric.combine`` (gates, formula, failures,
    quantize) at once, which the plain path must agree with: the total of a weighted sum does
    not depend on component order.
    """
    names = rubric.names
    weights = [c.weight for c in rubric.components]
    simple = rubric.formula is None and rubric.quantize is None and not any(
        c.requires for c in rubric.components)
    if simple and all(known or floats_only(column)
                      for known, column in zip(known_plain, columns)):
        return ScoreColumns.of_weighted_sums(names, weights, rollouts,
                                             cast("list[list[float]]", columns))
    scores = []
    for rollout, cells in zip(rollouts, zip(*columns)):
        per = {name: as_result(cell) for name, cell in zip(names, cells)}
        reward, status, components, errors, metrics = rubric.combine(per)
        timing = split_timing(metrics) if metrics else None
        scores.append(Score(rollout.id, rollout.group, reward, status, components, errors,
                            metrics, None, timing))
    return ScoreColumns.of_scores(names, rollouts, scores)


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
