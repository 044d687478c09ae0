"""The ``rescore`` job: score a stored run again with a new rubric, computing only what changed.

Each component's result is stored under its identity (code, params, timeout; for a judge
criterion, its prompt, model and criterion text) and the rollout's content. A new rubric asks
the store for each of its components: those with the same identity are found and reused, so a new
name, new weights, a new formula or gates compute nothing; a changed or added component computes
only itself. Nothing in the rubric says what changed: the boundary comes from the inputs alone.

Groups whose every component is stored are combined in bulk, without starting worker processes.
The rest go through the engine, which records each batch as it finishes, so a rescore that is
killed and started again redoes nothing that finished.
"""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from rewardsmith._system.gcpause import gc_paused
from rewardsmith.advantages import apply_advantages
from rewardsmith.engine import Engine
from rewardsmith.engine.cells import floats_only
from rewardsmith.errors import StoreError
from rewardsmith.files.digests import FileDigests
from rewardsmith.files.parquet import (
    score_lines,
    write_scores_any,
)
from rewardsmith.jobs.recording import (
    RunRecorder,
    component_records,
    group_positions,
    summarize,
)
from rewardsmith.jobs.summary import RunSummary
from rewardsmith.rubric import (
    Component,
    Rubric,
)
from rewardsmith.rubric.reuse_reasons import reuse_reason
from rewardsmith.store import (
    Members,
    Store,
    StoredCell,
    group_result_keys,
)
from rewardsmith.types import (
    ComponentResult,
    Score,
    Status,
)

__all__ = ["ComponentPlan", "RescorePlan", "RescoreResult", "rescore"]

Cell = StoredCell | None
Progress = Callable[[int, int], None]


@dataclass
class ComponentPlan:
    """What a rescore does for one component: results reused from the store, results to compute,
    and for a judge the calls that takes and their estimated cost (when the judge can tell)."""

    name: str
    identity: str
    kind: str  # "reward", "group reward" or "judge"
    reused: int
    compute: int
    judge_calls: int = 0
    estimated_cost: float | None = None
    reason: str = ""  # why results are or are not reused (what changed since the run)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class RescorePlan:
    source_run: str
    rollouts: int
    groups: int
    groups_to_score: int
    components: list[ComponentPlan]
    judge_calls: int = 0
    estimated_cost: float | None = None

    @property
    def computes_nothing(self) -> bool:
        return all(c.compute == 0 for c in self.components)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_run": self.source_run,
            "rollouts": self.rollouts,
            "groups": self.groups,
            "groups_to_score": self.groups_to_score,
            "components": [c.to_dict() for c in self.components],
            "judge_calls": self.judge_calls,
            "estimated_cost": self.estimated_cost,
        }


@dataclass
class RescoreResult:
    plan: RescorePlan
    run_id: str | None  # the new run in the store (None for a dry run)
    scores: list[Score] = field(default_factory=list)
    summary: RunSummary | None = None
    reward_calls: int = 0  # reward function calls made (not replayed from the store)
    usage: dict[str, dict[str, float]] = field(default_factory=dict)  # judges: calls, cost
    seconds: float = 0.0
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "run": self.run_id,
            "plan": self.plan.to_dict(),
            "reward_calls": self.reward_calls,
            "usage": self.usage,
            "seconds": round(self.seconds, 4),
            "summary": self.summary.to_dict() if self.summary is not None else None,
        }


# ------------------------------------------------------------------ rescoring


def rescore(
    store: Store | str | Path,
    rubric: Rubric,
    *,
    run: str | None = None,
    output: str | Path | IO[str] | None = None,
    dry_run: bool = False,
    workers: int | None = None,
    max_concurrency: int = 64,
    keep_scores: bool = True,
    advantage_method: str | None = "grpo",
    progress: Progress | None = None,
) -> RescoreResult:
    """Score the rollouts of a stored run (default: the latest) with ``rubric``, reusing every
    stored component result whose identity is unchanged. ``output`` gets the scores in the
    original file's order (JSONL, or Parquet for a ``.parquet`` path). ``dry_run`` only plans:
    it says per component what is reused and what would be computed, and spends nothing.
    ``advantage_method`` fills each score's group advantage (None leaves it empty)."""
    if isinstance(store, (str, Path)):
        # A dry run only reads: it works on a store that cannot be written.
        with Store(store, read_only=True if dry_run else None) as opened:
            return rescore(opened, rubric, run=run, output=output, dry_run=dry_run,
                           workers=workers, max_concurrency=max_concurrency,
                           keep_scores=keep_scores, advantage_method=advantage_method,
                           progress=progress)
    started = time.perf_counter()
    rubric.resolve()
    source = store.get_run(run)
    with gc_paused():
        members = store.members(source.id)
        if not members and source.size:
            raise StoreError(f"run {source.id} of {store.path!r} holds none of its "
                             f"{source.size:,} rollouts (it was stopped before they were "
                             f"recorded): score the rollouts file again instead")
        groups = group_positions(members.groups)
        columns, file_keys = _stored_columns(store, rubric, source.id, members, groups)
        todo = _groups_to_score(rubric, columns, groups, members)
        plan = _plan(store, rubric, source.id, members, groups, columns, todo,
                     source.components)
    if dry_run:
        return RescoreResult(plan, None, seconds=time.perf_counter() - started, dry_run=True)

    run_id = store.begin_derived_run(source.id, kind="rescore", rubric_name=rubric.name,
                                     rubric_id=rubric.id, components=component_records(rubric),
                                     defer=True)
    scores: list[Score | None] = [None] * len(members)
    todo_set = set(todo)
    cached_groups = [g for i, g in enumerate(groups) if i not in todo_set]
    positions = [p for g in cached_groups for p in g]
    with gc_paused():
        for position, score in zip(positions, _combine(rubric, members, positions, columns),
                                   strict=True):
            scores[position] = score
    done = len(positions)
    if progress is not None:
        progress(done, len(members))
    calls = 0
    usage: dict[str, dict[str, float]] = {}
    if todo:
        calls, usage = _score_missing(store, rubric, source.id, run_id, members, columns,
                                      file_keys, [groups[i] for i in todo], scores, plan,
                                      workers, max_concurrency, progress, done)
    final = cast(list[Score], scores)
    with gc_paused():
        if advantage_method is not None:
            apply_advantages(final, method=advantage_method)
        summary = summarize(rubric, final, groups)
        summary.seconds = time.perf_counter() - started
        summary.extra.update({"reward_calls": calls, "source_run": source.id, "run": run_id})
        if usage:
            summary.extra["usage"] = usage
        if output is not None:
            _write(output, final)
    store.finish_run(run_id, summary.to_dict())
    return RescoreResult(plan, run_id, final if keep_scores else [], summary, calls, usage,
                         time.perf_counter() - started)


def _kind(component: Component) -> str:
    if component.evaluator is not None:
        return "judge"
    return "group reward" if component.group else "reward"


def _stored_columns(store: Store, rubric: Rubric, run_id: str, members: Members,
                    groups: list[list[int]]) -> tuple[dict[str, list[Cell]], dict[str, list[str]]]:
    """Each component's stored results by position, and for components that read files
    besides the rollout (``reads_files``) the keys their results go under now."""
    columns: dict[str, list[Cell]] = {}
    file_keys: dict[str, list[str]] = {}
    reading = [c for c in rubric.components if not c.group and c.reads is not None]
    if reading:  # their keys need each rollout's paths, and what those files hold now
        rollouts = store.load_rollouts(run_id)
        digests = FileDigests()
        for component in reading:
            file_keys[component.name] = component.result_keys(rollouts, members.keys, digests)
    for component in rubric.components:
        if component.name in file_keys:
            keys = file_keys[component.name]
            found = store.lookup_cells(component.identity(), keys)
            columns[component.name] = [found.get(key) for key in keys]
            continue
        if not component.group:
            columns[component.name] = store.column(component.identity(), members)
            continue
        keys = [""] * len(members)
        for group in groups:
            for position, key in zip(group, group_result_keys([members.keys[p] for p in group]),
                                     strict=True):
                keys[position] = key
        found = store.lookup_cells(component.identity(), keys)
        columns[component.name] = [found.get(key) for key in keys]
    return columns, file_keys


def _groups_to_score(rubric: Rubric, columns: Mapping[str, list[Cell]],
                     groups: list[list[int]], members: Members) -> list[int]:
    """Indices of the groups with at least one result missing."""
    group_of = [0] * len(members)
    for index, group in enumerate(groups):
        for position in group:
            group_of[position] = index
    missing: set[int] = set()
    for name in rubric.names:
        column = columns[name]
        if None in column:
            missing.update(group_of[p] for p, cell in enumerate(column) if cell is None)
    return sorted(missing)


def _plan(store: Store, rubric: Rubric, run_id: str, members: Members, groups: list[list[int]],
          columns: Mapping[str, list[Cell]], todo: list[int],
          recorded: Sequence[Mapping[str, Any]]) -> RescorePlan:
    in_todo = [p for i in todo for p in groups[i]]
    rows = []
    judge_missing: dict[str, tuple[Component, set[int]]] = {}
    for component in rubric.components:
        column = columns[component.name]
        if component.group:  # a group that is scored again computes its group rewards again
            compute = len(in_todo)
            missing = in_todo
        else:
            missing = [p for p, cell in enumerate(column) if cell is None]
            compute = len(missing)
        row = ComponentPlan(component.name, component.identity(), _kind(component),
                            len(column) - compute, compute,
                            reason=reuse_reason(component, recorded, compute=compute,
                                                run_id=run_id))
        if component.evaluator is not None and missing:
            row.judge_calls = compute
            row.estimated_cost = _estimate(component, store, run_id, missing)[1]
            usage_key = getattr(component.evaluator, "usage_key", None)
            client = str(usage_key()) if callable(usage_key) else f"component:{component.name}"
            entry = judge_missing.setdefault(client, (component, set()))
            entry[1].update(missing)
        rows.append(row)
    calls, costs = 0, []
    for component, missing_set in judge_missing.values():
        # Criteria of one judge share a call per rollout: count each rollout once.
        count, cost = _estimate(component, store, run_id, sorted(missing_set))
        calls += count
        costs.append(cost)
    total_cost = math.fsum(c for c in costs if c is not None) if costs and None not in costs \
        else None
    return RescorePlan(run_id, len(members), len(groups), len(todo), rows, calls, total_cost)


def _estimate(component: Component, store: Store, run_id: str,
              positions: Sequence[int]) -> tuple[int, float | None]:
    """Judge calls and cost for these rollouts: from the judge's ``estimate`` when it has one,
    else one call per rollout at an unknown cost. Nothing is called on the endpoint."""
    estimate = getattr(component.evaluator, "estimate", None)
    if estimate is None or not positions:
        return len(positions), None
    answer = estimate(store.load_rollouts(run_id, positions))
    if isinstance(answer, (int, float)):
        return len(positions), float(answer)
    if isinstance(answer, Mapping):
        calls = answer.get("calls", len(positions))
        cost = answer.get("cost", answer.get("estimated_cost"))
        return int(calls), None if cost is None else float(cost)
    return len(positions), None


def _combine(rubric: Rubric, members: Members, positions: Sequence[int],
             columns: Mapping[str, list[Cell]]) -> list[Score]:
    """Scores from stored results, exactly as the engine combines fresh ones: plain weighted
    sums of plain floats in bulk, anything else (gates, formula, failures) by ``combine``."""
    names = rubric.names
    weights = [c.weight for c in rubric.components]
    simple = rubric.formula is None and rubric.quantize is None and not any(
        c.requires for c in rubric.components)
    if len(positions) == len(members):  # every rollout: no need to pick positions
        ids, group_ids = members.ids, members.groups
        picked = [columns[name] for name in names]
    else:
        ids = [members.ids[p] for p in positions]
        group_ids = [members.groups[p] for p in positions]
        picked = [[columns[name][p] for p in positions] for name in names]
    fsum, mul, ok = math.fsum, operator.mul, Status.OK
    if simple and len(names) == 2 and all(floats_only(column) for column in picked):
        # The common shape in bulk, as the engine combines it (one rounding: the same sum).
        (n1, n2), (w1, w2) = names, weights
        return [Score(i, g, w1 * a + w2 * b, ok, {n1: a, n2: b})
                for i, g, a, b in zip(ids, group_ids, *cast("list[list[float]]", picked))]
    cells_by_row = zip(*picked, strict=True)
    out = []
    for rollout_id, group, cells in zip(ids, group_ids, cells_by_row, strict=True):
        if simple and all([type(cell) is float for cell in cells]):
            values = cast(tuple[float, ...], cells)
            out.append(Score(rollout_id, group, fsum(map(mul, weights, values)), ok,
                             dict(zip(names, values, strict=True))))
            continue
        per = {name: _as_result(cell) for name, cell in zip(names, cells, strict=True)}
        reward, status, components, errors, metrics = rubric.combine(per)
        out.append(Score(rollout_id, group, reward, status, components, errors, metrics))
    return out


def _as_result(cell: Cell) -> ComponentResult:
    if cell is None:
        return ComponentResult.failed(Status.ERROR, "no result (internal error)")
    return ComponentResult(cell) if isinstance(cell, float) else cell


class _KnownResults:
    """The engine's cache during a rescore: results already read from the store are answered
    from memory and not written again; new ones go to the store as each batch finishes."""

    def __init__(self, store: Store, known: dict[str, dict[str, StoredCell]],
                 items: dict[str, int]):
        self.store = store
        self.known = known
        self.items = items  # content key -> the store's item number

    def lookup_cells(self, component_id: str, keys: Sequence[str]) -> dict[str, StoredCell]:
        known = self.known.get(component_id)
        if known is None:
            return self.store.lookup_cells(component_id, keys)
        return {key: known[key] for key in keys if key in known}

    def lookup(self, component_id: str, keys: Sequence[str]) -> dict[str, ComponentResult]:
        return {key: _as_result(cell)
                for key, cell in self.lookup_cells(component_id, keys).items()}

    def record_cells(self, component_id: str, keys: Sequence[str],
                     cells: Sequence[StoredCell]) -> None:
        known = self.known.get(component_id, {})
        fresh = [(key, cell) for key, cell in zip(keys, cells, strict=True) if key not in known]
        if not fresh:
            return
        numbers = [self.items.get(key) for key, _ in fresh]
        self.store.record_cells(component_id, [key for key, _ in fresh],
                                [cell for _, cell in fresh],
                                items=None if None in numbers else cast("list[int]", numbers))

    def record(self, component_id: str, results: Mapping[str, ComponentResult]) -> None:
        keys = list(results)
        self.record_cells(component_id, keys, [results[key] for key in keys])


def _score_missing(store: Store, rubric: Rubric, source_run: str, run_id: str,
                   members: Members, columns: Mapping[str, list[Cell]],
                   file_keys: Mapping[str, list[str]], groups: list[list[int]],
                   scores: list[Score | None], plan: RescorePlan,
                   workers: int | None, max_concurrency: int, progress: Progress | None,
                   done: int) -> tuple[int, dict[str, dict[str, float]]]:
    """Score the groups that miss a result with the engine, which reuses what is stored and
    records what it computes, batch by batch; returns the calls made and judge usage."""
    flat = [p for g in groups for p in g]
    known: dict[str, dict[str, StoredCell]] = {}
    for c in rubric.components:
        if not c.group:
            column = columns[c.name]
            keys = file_keys.get(c.name, members.keys)
            known[c.identity()] = {keys[p]: cast(StoredCell, column[p]) for p in flat
                                   if column[p] is not None}
    positions = sorted(set(flat))
    by_position = dict(zip(positions, store.load_rollouts(source_run, flat), strict=True))
    batches = [[by_position[p] for p in g] for g in groups]
    # The engine asks for each rollout's content key: the store already knows it.
    key_of_rollout = {id(by_position[p]): members.keys[p] for p in positions}
    sync_work = any(row.compute for row, c in zip(plan.components, rubric.components,
                                                   strict=True) if not c.is_async)
    # Without sync work to do, no worker process is started at all.
    engine_workers = workers if sync_work else 0
    recorder = RunRecorder(store.recording(run_id), rubric)
    total = len(scores)
    with Engine(rubric, workers=engine_workers, max_concurrency=max_concurrency,
                cache=_KnownResults(store, known, _item_numbers(members, flat)),
                store_path=store.path) as engine:
        engine.content_key = lambda rollout: key_of_rollout[id(rollout)]
        engine.check()
        for group, rollouts, group_scores in zip(groups, batches,
                                                 engine.stream(batches, coalesce=True),
                                                 strict=True):
            for position, score in zip(group, group_scores, strict=True):
                scores[position] = score
            recorder.add_group(rollouts, group_scores)
            done += len(group)
            if progress is not None:
                progress(done, total)
        recorder.flush()
        return engine.calls, engine.usage()


def _item_numbers(members: Members, positions: Sequence[int]) -> dict[str, int]:
    """Content key -> item number, for a run in the store's tables (none for one still in
    pending blocks: results are then recorded by key)."""
    if len(members.items) != len(members.keys):
        return {}
    return {members.keys[p]: members.items[p] for p in positions}


def _write(output: str | Path | IO[str], scores: list[Score]) -> None:
    if isinstance(output, (str, Path)):
        write_scores_any(output, scores)
        return
    for start in range(0, len(scores), 8192):
        output.write(score_lines(scores[start:start + 8192]))
    output.flush()


