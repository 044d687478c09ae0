"""The ``score`` job: rollouts file in, scored file and a summary out."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from rewardsmith.engine import (
    Engine,
)
from rewardsmith.engine.core import DEFAULT_BATCH_ROLLOUTS
from rewardsmith.errors import InputError
from rewardsmith.files.parquet import (
    read_rollouts_any,
    score_lines,
)
from rewardsmith.files.rollouts import (
    OnBadLine,
    group_rollouts,
)
from rewardsmith.jobs.recording import start_recording
from rewardsmith.jobs.summary import (
    RunSummary,
    SummaryBuilder,
)
from rewardsmith.rubric import Rubric
from rewardsmith.store import (
    Store,
    StoreFileChanged,
)
from rewardsmith.types import (
    Rollout,
    Score,
)

__all__ = ["ScoreJob", "ScoreResult"]

_FLUSH_ROLLOUTS = 1024  # scores wait at most this many rollouts before they are written


@dataclass
class ScoreResult:
    summary: RunSummary
    scores: list[Score] = field(default_factory=list)


@dataclass
class ScoreJob:
    """Score a JSONL (or Parquet) file of rollouts with a rubric; write scored JSONL; summarize.

    Every line is read before the first rollout is scored, so a bad line (with
    ``on_bad_line="fail"``) stops the job before anything is spent.
    """

    rubric: Rubric
    workers: int | None = None
    max_concurrency: int = 64
    on_bad_line: OnBadLine = "fail"
    keep_scores: bool = True
    post_process: Callable[[list[Score]], None] | None = None  # e.g. fill advantages per group
    # Record the run, its rollouts and every component's result here (a path is opened and
    # closed by the job); results already there are reused instead of computed.
    store: Store | str | Path | None = None
    # The advantage column: our exact group advantages (``method`` of rewardsmith.advantages),
    # and the trainer whose float32 arithmetic is checked at the end (None: every trainer).
    advantage_method: str = "grpo"
    trainer: str | None = None
    # Record each component's call time: in each score's ``timing``, the store and the summary.
    timing: bool = False
    # A file whose groups are written two ways (with and without ``group``, ``1`` and ``"1"``)
    # is refused (``io.MixedGroups``); otherwise ``read`` lists it in ``input_warnings``.
    strict_groups: bool = False
    input_warnings: list[str] = field(default_factory=list)
    # Rollouts a batch holds at most (whole groups); None: the engine's default. Small inputs
    # are cut finer anyway, so that every worker has work.
    batch_size: int | None = None

    def read(self, path: str | Path) -> tuple[list[Rollout], list[str]]:
        bad: list[InputError] = []
        rollouts = read_rollouts_any(path, on_bad_line=self.on_bad_line, bad_lines=bad,
                                     strict_groups=self.strict_groups,
                                     warnings=self.input_warnings)
        return rollouts, [str(e) for e in bad]

    def run(
        self,
        source: str | Path,
        output: IO[str] | None = None,
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> ScoreResult:
        rollouts, bad_lines = self.read(source)
        return self.run_rollouts(rollouts, output, progress=progress, bad_lines=bad_lines,
                                 source=str(source))

    def run_rollouts(
        self,
        rollouts: Sequence[Rollout],
        output: IO[str] | None = None,
        *,
        progress: Callable[[int, int], None] | None = None,
        bad_lines: Sequence[str] = (),
        source: str = "",
    ) -> ScoreResult:
        if isinstance(self.store, (str, Path)):
            with Store(self.store) as opened:
                return replace(self, store=opened).run_rollouts(
                    rollouts, output, progress=progress, bad_lines=bad_lines, source=source)
        started = time.perf_counter()
        groups = group_rollouts(rollouts)
        # Write as groups finish when the file is grouped already; else keep input order.
        contiguous = all(a is b for a, b in zip((r for g in groups for r in g), rollouts))
        builder = SummaryBuilder(self.rubric.names, rubric_name=self.rubric.name,
                                 rubric_id=self.rubric.id)
        kept: list[Score] = []
        checked: list[Score] = []
        done = 0
        store = self.store
        with Engine(self.rubric, workers=self.workers, max_concurrency=self.max_concurrency,
                    store_path=store.path if store else None,
                    timing=self.timing,
                    batch_rollouts=self.batch_size or DEFAULT_BATCH_ROLLOUTS) as engine:
            engine.check()  # judges and other evaluators fail here, before any scoring
            recorder = start_recording(store, self.rubric, rollouts, source=source) \
                if store else None
            if recorder is not None:
                engine.cache = recorder.run  # results found and kept through the run's handle
                engine.content_key = recorder.content_key  # keys known: no second hashing
            scored = engine.stream(groups, coalesce=True)
            waiting: list[tuple[list[Rollout], list[Score]]] = []

            def flush() -> None:
                nonlocal done
                # Advantages for many groups in one vectorized call: per group, numpy's
                # overhead would cost more than the arithmetic.
                from rewardsmith.advantages import apply_advantages

                apply_advantages([s for _, scores in waiting for s in scores],
                                 method=self.advantage_method)
                for group, scores in waiting:
                    if recorder is not None:
                        recorder.add_group(group, scores)
                    if self.post_process is not None:
                        self.post_process(scores)
                    builder.add_group(scores)
                    checked.extend(scores)
                    if self.keep_scores or not contiguous:
                        kept.extend(scores)
                    done += len(scores)
                if output is not None and contiguous:
                    output.write(score_lines(s for _, scores in waiting for s in scores))
                waiting.clear()
                if progress is not None:
                    progress(done, len(rollouts))

            pending = 0
            for group, scores in zip(groups, scored, strict=True):
                waiting.append((group, scores))
                pending += len(scores)
                if pending >= _FLUSH_ROLLOUTS:
                    flush()
                    pending = 0
            if waiting:
                flush()
            if recorder is not None:
                recorder.scoring_done()
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
                output.write(score_lines(kept))
        if output is not None:
            output.flush()
        summary = builder.build(seconds=time.perf_counter() - started, bad_lines=bad_lines)
        summary.extra.update(extra)
        try:
            summary.extra["advantages"] = self._check_trainers(checked)
        except (Exception, MemoryError) as exc:  # noqa: BLE001 - the scores are kept
            # A check of the scores never costs the scores: it is reported, the output stays.
            summary.extra["advantages"] = {}
            summary.extra["advantages_error"] = (
                f"the trainer check failed after scoring ({type(exc).__name__}: {exc}); the "
                f"scores are complete")
        if recorder is not None:
            summary.extra["run"] = recorder.run_id
            try:
                recorder.finish(summary.to_dict())
            except StoreFileChanged as exc:  # the output is still written: the caller fails
                summary.extra["store_error"] = str(exc)
        return ScoreResult(summary, kept if self.keep_scores else [])

    def _check_trainers(self, scores: Sequence[Score]) -> dict[str, Any]:
        """What each trainer's own float32 arithmetic would make of these rewards."""
        from rewardsmith.advantages import (
            check_trainers,
            trainer_names,
        )

        rewards = [s.reward for s in scores]
        groups = [s.group for s in scores]
        ids = [s.id for s in scores]
        trainers = [self.trainer] if self.trainer else [
            t for t in trainer_names() if t != "rewardsmith"]
        out: dict[str, Any] = {}
        reports = check_trainers(rewards, groups, trainers, ids=ids)
        for trainer in trainers:
            report = reports[trainer].to_dict()
            out[trainer] = {key: report[key] for key in (
                "broken_groups", "worst_magnitude", "zero_variance_groups", "on_exact_grid",
                "suggested_step", "example") if key in report}
        return out
