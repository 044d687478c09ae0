"""What a store knows about a scored file: its run (rubric, components, summary), the judge
calls made while it ran (from the judge ledger's ``judge_calls`` table in the same file), and
the rollouts' text."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.store import (
    RunInfo,
    Store,
)
from rewardsmith.store.sqlite_setup import connect

from ..errors import StoreError
from ..types import Rollout
from .analysis import nearest_rank
from .scored import ScoredColumns

__all__ = ["JudgeRow", "StoreFacts", "read_store_facts", "rollout_texts", "spec_text"]


@dataclass(frozen=True)
class JudgeRow:
    """Judge calls of one judge and model made while the run ran, from the ledger."""

    judge: str
    model: str
    calls: int
    failed: int
    retries: int  # HTTP attempts beyond the first
    tokens_in: int
    tokens_out: int
    cost: float
    p50_seconds: float
    p99_seconds: float
    max_seconds: float


@dataclass
class StoreFacts:
    path: str
    run: RunInfo
    ledger: bool  # whether the store holds judge tables at all
    judge_calls: list[JudgeRow] = field(default_factory=list)
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)  # the run's own counters


def _matches(store: Store, run: RunInfo, scored: ScoredColumns) -> bool:
    if run.size != len(scored):
        return False
    return set(store.members(run.id).ids) == set(scored.ids)


def _pick_run(store: Store, run_id: str | None, scored: ScoredColumns) -> RunInfo:
    """The run given, or the latest run over exactly these rollouts (by id), preferring one
    whose components are the file's."""
    if run_id is not None:
        run = store.get_run(run_id)
        if not _matches(store, run, scored):
            raise StoreError(f"run {run.id} of {store.path!r} holds {run.size:,} rollouts that "
                             f"are not those of {scored.source!r} ({len(scored):,}): pass the "
                             f"run that scored this file")
        return run
    names = set(scored.components)
    candidates = [r for r in reversed(store.runs()) if r.size == len(scored)]
    matching = [r for r in candidates if _matches(store, r, scored)]
    for run in matching:
        if {str(c.get("name")) for c in run.components} == names:
            return run
    if matching:
        return matching[0]
    raise StoreError(f"no run in {store.path!r} holds the rollouts of {scored.source!r} "
                     f"({len(scored):,} ids): pass --run, or the store this file was scored "
                     f"with")


def _judge_rows(path: str, start: float, end: float | None) -> tuple[bool, list[JudgeRow]]:
    connection = connect(path, what="store", timeout=10.0, read_only=True)
    try:
        present = connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'judge_calls'"
        ).fetchone()
        if present is None:
            return False, []
        rows = connection.execute(
            "SELECT coalesce(judge, ''), model, status, attempts, tokens_in, tokens_out, cost, "
            "finished_at - started_at FROM judge_calls WHERE started_at >= ? AND started_at <= ?",
            (start, end if end is not None else float("inf"))).fetchall()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the judge calls in {path!r}: {exc}") from None
    finally:
        connection.close()
    by_key: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for row in rows:
        by_key.setdefault((row[0], row[1]), []).append(row)
    out = []
    for (judge, model), calls in sorted(by_key.items()):
        seconds = np.asarray([max(0.0, float(c[7])) for c in calls])
        out.append(JudgeRow(
            judge=judge, model=model, calls=len(calls),
            failed=sum(1 for c in calls if c[2] != "ok"),
            retries=sum(max(0, int(c[3]) - 1) for c in calls),
            tokens_in=sum(int(c[4]) for c in calls), tokens_out=sum(int(c[5]) for c in calls),
            cost=float(sum(float(c[6]) for c in calls)),
            p50_seconds=nearest_rank(seconds, 0.5), p99_seconds=nearest_rank(seconds, 0.99),
            max_seconds=float(seconds.max())))
    return True, out


def read_store_facts(path: str | Path, scored: ScoredColumns, run_id: str | None = None
                     ) -> StoreFacts:
    """The run that scored ``scored`` and its judge calls. ``StoreError`` when the store
    cannot be read or holds no such run."""
    location = str(path)
    if not Path(location).is_file():
        raise StoreError(f"no store at {location!r}")
    with Store(location, read_only=True) as store:
        run = _pick_run(store, run_id, scored)
    ledger, calls = _judge_rows(location, run.created, run.finished)
    usage = (run.summary or {}).get("usage") or {}
    return StoreFacts(location, run, ledger, calls,
                      {str(k): dict(v) for k, v in usage.items() if isinstance(v, dict)})


def rollout_texts(ids: Sequence[str], *, store: str | None = None, run: str | None = None,
                  rollouts: str | Path | None = None) -> dict[str, Rollout]:
    """The rollouts with these ids, from a store's run or from a rollouts file."""
    if not ids:
        return {}
    if store is not None and run is not None:
        with Store(store, read_only=True) as opened:
            return opened.rollouts_by_id(run, ids)
    if rollouts is not None:
        from rewardsmith.files.parquet import read_rollouts_any

        wanted = set(ids)
        return {r.id: r for r in read_rollouts_any(rollouts) if r.id in wanted}
    return {}


def spec_text(component: dict[str, Any]) -> str:
    """A stored component's spec as compact JSON (what the rubric said)."""
    spec = component.get("spec")
    return json.dumps(spec, sort_keys=True, default=str) if spec is not None else ""
