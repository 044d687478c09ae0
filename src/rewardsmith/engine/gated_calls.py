"""Closed gates save their calls: a pointwise judge (or a reward model) with ``requires`` is
asked only for rollouts whose gate component came out open (an ok value above 0).

Such components wait for the rest of the batch, then run on the rollouts that passed. A
rollout whose gate is closed gets no value for the component and the metric ``skipped`` = 1;
``Rubric.combine`` counts the component as 0 there, as it always did for a closed gate. The
skipped cells are not recorded in the result cache: the gate may open in a later rescore.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from rewardsmith.rubric import (
    Component,
    Rubric,
)

from ..types import ComponentResult, Status
from .cells import Cell
from .onloop import LoopRewards
from .plan import Batch

__all__ = ["gated_evaluators", "run_gated", "mark_skipped"]

Skipped = dict[str, list[int]]  # component -> positions in the batch whose gate was closed


def gated_evaluators(rubric: Rubric) -> list[Component]:
    """The components whose calls a closed gate saves: evaluators with ``requires`` that grade
    each rollout alone (``per_rollout``: pointwise judges, reward models). A group or pairwise
    judge compares the rollouts it is given, so it still sees the whole group."""
    return [c for c in rubric.components if c.evaluator is not None and c.requires is not None
            and getattr(c.evaluator, "per_rollout", False)]


def _open(cell: Cell) -> bool:
    # The same rule as Rubric.combine: an ok value above 0 opens the gate.
    if type(cell) is float:
        return cell > 0
    if isinstance(cell, ComponentResult):
        return (cell.status is Status.OK and cell.value is not None and cell.value > 0)
    return False


async def run_gated(on_loop: LoopRewards, gated: Sequence[Component], batch: Batch,
                    results: dict[str, list[Cell]]) -> Skipped:
    """Run ``gated`` once their gates are known; the positions skipped, left empty (None)."""
    skipped: Skipped = {}
    pending = list(gated)
    while pending:
        names = {c.name for c in pending}
        # A gate that is itself a gated judge runs first (gates form no cycles: the rubric
        # refuses them).
        ready = [c for c in pending if c.requires not in names]
        placeholder = ComponentResult(None)
        for component in ready:
            gate = results[component.requires]  # type: ignore[index]
            column = results[component.name]
            closed = [i for i, cell in enumerate(column) if cell is None and not _open(gate[i])]
            for i in closed:
                column[i] = placeholder  # filled, so the run leaves it out
            skipped[component.name] = closed
        # Together: a judge's criteria asked at once share one call per rollout.
        await asyncio.gather(*(on_loop.run(c, batch, results) for c in ready))
        for component in ready:
            column = results[component.name]
            for i in skipped[component.name]:
                column[i] = None
        pending = [c for c in pending if c not in ready]
    return skipped


def mark_skipped(results: dict[str, list[Cell]], skipped: Skipped) -> None:
    """Fill the skipped cells (after the cache recorded the rest): no value, ``skipped`` = 1."""
    for name, positions in skipped.items():
        column = results[name]
        for i in positions:
            column[i] = ComponentResult(None, metrics={"skipped": 1.0})
