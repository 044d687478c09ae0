"""What logging to trackers costs a scoring run.

1. The step statistics (``rewardsmith.tracking.StepStats``, what ``--log-to`` collects as the
   scores stream out, a group at a time) against the run summary every ``score`` already
   builds (``rewardsmith.jobs.summary.SummaryBuilder``), on the same scores in the same run: the
   ratio is the extra time ``--log-to`` adds to the run's own bookkeeping. The two must agree
   on the reward's mean and standard deviation and on the zero-variance groups.
2. Each tracker, offline: seconds to open a run, log one step, and close, with the statistics
   of a three-component rubric (about 40 keys a step).

Usage: python benchmarks/bench_tracking.py [--rollouts 200000] [--steps 50]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from rewardsmith.jobs.summary import SummaryBuilder
from rewardsmith.tracking import StepStats, open_tracker
from rewardsmith.types import Score, Status

NAMES = ("correct", "format", "judge")
OFFLINE = {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_ERROR_REPORTING": "false",
           "WANDB_DISABLE_GIT": "true", "WANDB_DISABLE_CODE": "true",
           "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1"}


def make_scores(count: int, group_size: int = 8) -> list[list[Score]]:
    rng = random.Random(7)
    scores = []
    for index in range(count):
        correct = float(rng.random() > 0.5)
        status = Status.OK if rng.random() > 0.01 else Status.MASKED
        reward = None if status is Status.MASKED else correct + 0.2
        scores.append(Score(str(index), f"g{index // group_size}", reward, status,
                            {"correct": correct, "format": 1.0,
                             "judge": rng.random() if status is Status.OK else None}))
    return [scores[i:i + group_size] for i in range(0, count, group_size)]


def time_statistics(groups: list[list[Score]]) -> tuple[float, float]:
    started = time.perf_counter()
    stats = StepStats()
    for group in groups:
        stats.add(group)
    metrics = stats.metrics()
    ours = time.perf_counter() - started

    started = time.perf_counter()
    builder = SummaryBuilder(NAMES)
    for group in groups:
        builder.add_group(group)
    summary = builder.build()
    peer = time.perf_counter() - started

    assert summary.reward.mean is not None and summary.reward.std is not None
    assert abs(metrics["reward/mean"] - summary.reward.mean) < 1e-9
    assert abs(metrics["reward/std"] - summary.reward.std) < 1e-9
    assert metrics["groups/zero_variance"] == summary.zero_variance_groups
    return ours, peer


def time_tracker(name: str, metrics: dict[str, float], steps: int, root: Path
                 ) -> tuple[float, float, float]:
    started = time.perf_counter()
    tracker = open_tracker(name, project="bench", run=name, directory=root / name)
    opened = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(steps):
        tracker.log_metrics(metrics)
    per_step = (time.perf_counter() - started) / steps
    started = time.perf_counter()
    tracker.close()
    return opened, per_step, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=200_000)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    os.environ.update(OFFLINE)
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")

    groups = make_scores(args.rollouts)
    time_statistics(groups[: max(1, len(groups) // 20)])  # warm up
    best = min((time_statistics(groups) for _ in range(3)), key=lambda pair: pair[0])
    ours, peer = best
    print(f"| statistics over {args.rollouts:,} rollouts | seconds | rollouts/s |")
    print("|---|---|---|")
    print(f"| tracking StepStats (--log-to) | {ours:.3f} | {args.rollouts / ours:,.0f} |")
    print(f"| summary SummaryBuilder (every run) | {peer:.3f} | {args.rollouts / peer:,.0f} |")
    print(f"| ratio StepStats / SummaryBuilder | {ours / peer:.2f} | |")

    stats = StepStats()
    stats.add(groups[0])
    metrics = stats.metrics({"judge:grader": {"calls": 8.0, "cost": 0.01}})
    print()
    print(f"| tracker ({len(metrics)} keys a step, {args.steps} steps) | open s (import included) | "
          f"per step ms | close s |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for name in ("tensorboard", "mlflow", "wandb"):
            try:
                opened, per_step, closed = time_tracker(name, metrics, args.steps, Path(folder))
            except ImportError as exc:
                print(f"| {name} | not installed: {exc} | | |")
                continue
            print(f"| {name} | {opened:.3f} | {per_step * 1000:.2f} | {closed:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
