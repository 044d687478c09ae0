"""The ``score`` job: rollouts file in, scored file and a summary out."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .engine import Engine, ResultCache
from .io import OnBadLine, RolloutReader, group_rollouts, score_line
from .rubric import Rubric
from .summary import RunSummary, SummaryBuilder
from .types import Rollout, Score

__all__ = ["ScoreJob", "ScoreResult"]


@dataclass
class ScoreResult:
    summary: RunSummary
    scores: list[Score] = field(default_factory=list)


@dataclass
class ScoreJob:
    """Score a JSONL file of rollouts with a rubric; write scored JSONL; summarize.

    Every line is read before the first rollout is scored, so a bad line (with
    ``on_bad_line="fail"``) stops the job before anything is spent.
    """

    rubric: Rubric
    workers: int | None = None
    max_concurrency: int = 64
    on_bad_line: OnBadLine = "fail"
    cache: ResultCache | None = None
    store_path: str | None = None
    keep_scores: bool = True
    post_process: Callable[[list[Score]], None] | None = None  # e.g. fill advantages per group

    def read(self, path: str | Path) -> tuple[list[Rollout], list[str]]:
        reader = RolloutReader(str(path), self.on_bad_line)
        rollouts = list(reader.read(path))
        return rollouts, [str(e) for e in reader.bad_lines]

    def run(
        self,
        source: str | Path,
        output: IO[str] | None = None,
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> ScoreResult:
        rollouts, bad_lines = self.read(source)
        return self.run_rollouts(rollouts, output, progress=progress, bad_lines=bad_lines)

    def run_rollouts(
        self,
        rollouts: Sequence[Rollout],
        output: IO[str] | None = None,
        *,
        progress: Callable[[int, int], None] | None = None,
        bad_lines: Sequence[str] = (),
    ) -> ScoreResult:
        started = time.perf_counter()
        groups = group_rollouts(rollouts)
        # Write as groups finish when the file is grouped already; else keep input order.
        contiguous = all(a is b for a, b in zip((r for g in groups for r in g), rollouts))
        builder = SummaryBuilder(self.rubric.names, rubric_name=self.rubric.name,
                                 rubric_id=self.rubric.id)
        kept: list[Score] = []
        done = 0
        with Engine(self.rubric, workers=self.workers, max_concurrency=self.max_concurrency,
                    cache=self.cache, store_path=self.store_path) as engine:
            engine.check()  # judges and other evaluators fail here, before any scoring
            for scores in engine.stream(groups, coalesce=True):
                if self.post_process is not None:
                    self.post_process(scores)
                builder.add_group(scores)
                if output is not None and contiguous:
                    output.write("".join(score_line(s) + "\n" for s in scores))
                if self.keep_scores or not contiguous:
                    kept.extend(scores)
                done += len(scores)
                if progress is not None:
                    progress(done, len(rollouts))
            extra: dict[str, Any] = {"reward_calls": engine.calls,
                                     "workers_replaced": engine.workers_replaced}
            usage = engine.usage()
            if usage:
                extra["usage"] = usage
        if not contiguous:
            # Scores came out in group order: put them back in the input's order.
            position = {id(r): i for i, r in enumerate(rollouts)}
            ordered: list[Score | None] = [None] * len(rollouts)
            for rollout, score in zip((r for g in groups for r in g), kept):
                ordered[position[id(rollout)]] = score
            kept = [s for s in ordered if s is not None]
            if output is not None:
                output.write("".join(score_line(s) + "\n" for s in kept))
        if output is not None:
            output.flush()
        summary = builder.build(seconds=time.perf_counter() - started, bad_lines=bad_lines)
        summary.extra.update(extra)
        return ScoreResult(summary, kept if self.keep_scores else [])
