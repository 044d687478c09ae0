"""Rescoring stored rollouts against scoring them from scratch, in the same run.

100,000 synthetic GSM8K-style rollouts in groups of 16, scored with ``gsm8k`` + ``marker`` into
a fresh store (the "from scratch" figure, store included), then rescored from the store:

- unchanged: the same components under a new rubric name (every result reused; target
  >= 50,000 rollouts/s, output file written);
- weights only: new weights and a formula (every result reused);
- one changed rule component: ``marker`` with new params (only it is computed again);

and scored from scratch once more without a store, as the reference for the ratio.

    python benchmarks/bench_rescore.py [--rollouts 100000] [--workers N]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rewardsmith import Rollout, Rubric, ScoreJob
from rewardsmith.jobs.rescore import rescore
from rewardsmith.store import Store

GROUP = 16


def make_rollouts(count: int, seed: int = 7) -> list[Rollout]:
    rng = random.Random(seed)
    out = []
    for group in range(count // GROUP):
        a, b, c = rng.randint(2, 400), rng.randint(2, 60), rng.randint(2, 9)
        answer = a * c + b
        prompt = f"A shop sells {a} items a day for {c} days, then {b} more. How many in all?"
        for sample in range(GROUP):
            guess = answer if rng.random() < 0.6 else answer + rng.choice([-10, -1, 1, 3])
            text = (f"Per day {a}, days {c}: {a} * {c} = {a * c}. Then add {b}: "
                    f"{a * c} + {b} = {guess}. (sample {sample}, {rng.random():.6f})")
            if rng.random() < 0.8:
                text += f"\n#### {guess}"
            out.append(Rollout(f"{group}-{sample}", str(group), prompt, text, str(answer)))
    return out


def rubric(name: str, *, weight: float = 0.2, max_count: int = 1,
           formula: str | None = None) -> Rubric:
    extra: dict[str, Any] = {"formula": formula} if formula else {}
    return Rubric.from_dict({
        "name": name,
        "components": {
            "correct": {"reward": "gsm8k", "weight": 1.0},
            "format": {"reward": "marker", "weight": weight,
                       "params": {"marker": "####", "max_count": max_count}},
        },
        **extra,
    })


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    rollouts = make_rollouts(args.rollouts)
    count = len(rollouts)
    rows: list[tuple[str, float, int]] = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        out = Path(tmp) / "rescored.jsonl"

        started = time.perf_counter()
        scratch_store = ScoreJob(rubric("v1"), workers=args.workers, store=str(db),
                                 keep_scores=False).run_rollouts(rollouts)
        seconds_store = time.perf_counter() - started
        rows.append(("score from scratch, recorded in the store", seconds_store,
                     int(scratch_store.summary.extra["reward_calls"])))

        started = time.perf_counter()
        scratch = ScoreJob(rubric("v1"), workers=args.workers,
                           keep_scores=False).run_rollouts(rollouts)
        seconds_scratch = time.perf_counter() - started
        rows.append(("score from scratch, no store", seconds_scratch,
                     int(scratch.summary.extra["reward_calls"])))

        with Store(db) as store:
            cases = [
                ("rescore: unchanged (new name), JSONL written", rubric("v1-copy"), out),
                ("rescore: weights and formula changed", rubric("v2", weight=0.5,
                                                                  formula="correct + 0.5 * format"),
                 None),
                ("rescore: one rule changed (marker params)", rubric("v3", max_count=2), None),
            ]
            for label, new, output in cases:
                started = time.perf_counter()
                result = rescore(store, new, output=output, workers=args.workers,
                                 keep_scores=False)
                rows.append((label, time.perf_counter() - started, result.reward_calls))
        size_mb = os.path.getsize(db) / 1e6

    print(f"# rescore benchmark: {count:,} rollouts, groups of {GROUP}, gsm8k + marker\n")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, store {size_mb:.0f} MB\n")
    print("| run | seconds | rollouts/s | reward calls | speed vs scratch |")
    print("|---|---:|---:|---:|---:|")
    for label, seconds, calls in rows:
        print(f"| {label} | {seconds:.2f} | {count / seconds:,.0f} | {calls:,} | "
              f"{seconds_scratch / seconds:.1f}x |")
    unchanged = count / rows[2][1]
    verdict = "meets" if unchanged >= 50_000 else "MISSES"
    print(f"\nunchanged rescore: {unchanged:,.0f} rollouts/s ({verdict} the 50,000/s target; "
          f"{unchanged / 50_000:.2f}x)")
    print(f"one changed rule: {rows[4][1]:.2f} s; from scratch: {seconds_scratch:.2f} s "
          f"(scratch time / rescore time = {seconds_scratch / rows[4][1]:.2f})")
    return 0 if unchanged >= 50_000 else 1


if __name__ == "__main__":
    sys.exit(main())
