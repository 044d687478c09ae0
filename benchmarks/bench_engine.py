"""Engine throughput against a hand-written loop, in the same run.

100,000 synthetic GSM8K-style rollouts in groups of 16, scored with ``gsm8k`` + ``marker``
(weights 1.0 and 0.2). The hand-written loop calls the same two functions in one process. Each
setting runs in a fresh process (so CPU affinity applies to its worker processes too):

- one core: the process and its workers pinned to one CPU, engine with default settings;
- two workers: both CPUs, ``workers=2``;

in both, the engine is timed two ways, interleaved: ``Engine.score_columns(...).rewards`` (the
rewards as a list, what the hand-written loop makes too) and ``Engine.score`` (a ``Score``
object per rollout);
- store on against off: the whole scoring job as ``rewardsmith score`` runs it (``ScoreJob``,
  two workers, scored lines written), first score into a fresh store against ``--no-store``,
  interleaved.

    python benchmarks/bench_engine.py [--rollouts 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

GROUP = 16


def make_rollouts(count: int, seed: int = 1) -> list[object]:
    from rewardsmith import Rollout

    rng = random.Random(seed)
    out = []
    for group in range(count // GROUP):
        a, b, c = rng.randint(2, 400), rng.randint(2, 60), rng.randint(2, 9)
        answer = a * c + b
        prompt = f"A shop sells {a} items a day for {c} days, then {b} more. How many items in all?"
        for sample in range(GROUP):
            guess = answer if rng.random() < 0.6 else answer + rng.choice([-10, -1, 1, 3])
            steps = " ".join(
                f"Step {k}: {rng.randint(1, 999)} plus {rng.randint(1, 99)} is a partial sum."
                for k in range(rng.randint(3, 8))
            )
            text = (
                f"Let me work it out. Per day {a}, days {c}: {a} * {c} = {a * c}. {steps} "
                f"Then add {b}: {a * c} + {b} = {guess}."
            )
            if rng.random() < 0.8:
                text += f"\n#### {guess:,}"
            out.append(Rollout(f"{group}-{sample}", str(group), prompt, text, str(answer)))
    return out


def measure(mode: str, count: int, repeat: int) -> dict[str, float]:
    from rewardsmith import Component, Engine, Rubric
    from rewardsmith.rewards.answers import gsm8k
    from rewardsmith.rewards.formats import marker

    if mode == "one-core":
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    rollouts = make_rollouts(count)
    rubric = Rubric(
        [Component("correct", "gsm8k", weight=1.0), Component("format", "marker", weight=0.2)]
    )
    workers = None if mode == "one-core" else 2

    def loop() -> list[float]:
        return [
            1.0 * gsm8k(r.text, r.answer) + 0.2 * marker(r.text)  # type: ignore[attr-defined]
            for r in rollouts
        ]

    best_loop = best_columns = best_scores = float("inf")
    with Engine(rubric, workers=workers) as engine:
        engine.score(rollouts[: GROUP * 4])  # start the workers before timing
        for _ in range(repeat):
            started = time.perf_counter()
            expected = loop()
            best_loop = min(best_loop, time.perf_counter() - started)
            started = time.perf_counter()
            rewards = engine.score_columns(rollouts).rewards  # type: ignore[arg-type]
            best_columns = min(best_columns, time.perf_counter() - started)
            started = time.perf_counter()
            scores = engine.score(rollouts)  # type: ignore[arg-type]
            best_scores = min(best_scores, time.perf_counter() - started)
        workers_used = engine.workers
    assert rewards == expected
    assert [s.reward for s in scores] == expected
    return {
        "loop_per_s": count / best_loop,
        "engine_per_s": count / best_columns,
        "ratio": best_loop / best_columns,
        "scores_per_s": count / best_scores,
        "scores_ratio": best_loop / best_scores,
        "workers": workers_used,
    }


def measure_store(count: int, repeat: int) -> dict[str, float]:
    """A first score with the store on against the same job with no store, interleaved."""
    import io
    import tempfile

    from rewardsmith import Component, Rubric, ScoreJob

    rollouts = make_rollouts(count)
    rubric = Rubric(
        [Component("correct", "gsm8k", weight=1.0), Component("format", "marker", weight=0.2)]
    )
    best_off = best_on = float("inf")
    with tempfile.TemporaryDirectory() as folder:
        for attempt in range(repeat):
            for store in (None, os.path.join(folder, f"store-{attempt}.db")):
                job = ScoreJob(rubric, workers=2, store=store)
                started = time.perf_counter()
                job.run_rollouts(rollouts, io.StringIO())  # type: ignore[arg-type]
                took = time.perf_counter() - started
                if store is None:
                    best_off = min(best_off, took)
                else:
                    best_on = min(best_on, took)
    return {"off_per_s": count / best_off, "on_per_s": count / best_on,
            "ratio": best_on / best_off}


def _burn(n: int) -> float:
    started = time.perf_counter()
    total = 0
    for i in range(n):
        total += i * i
    return time.perf_counter() - started


def parallel_ceiling(n: int = 3_000_000) -> float:
    """How much faster two processes finish two equal pure-Python jobs than one process does
    one: the most any two-worker engine can gain over a one-process loop on this machine."""
    import multiprocessing

    alone = together = float("inf")
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        for _ in range(3):  # interleaved, so that a slow moment does not favour either side
            alone = min(alone, _burn(n))
            together = min(together, max(pool.map(_burn, [n, n])))
    return 2 * alone / together


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--mode", choices=["one-core", "two-workers", "store"])
    args = parser.parse_args()
    if args.mode == "store":
        print(json.dumps(measure_store(args.rollouts, args.repeat)))
        return
    if args.mode:
        print(json.dumps(measure(args.mode, args.rollouts, args.repeat)))
        return
    rows = []
    for mode, target in (("one-core", 0.95), ("two-workers", 1.75)):
        done = subprocess.run(
            [
                sys.executable,
                __file__,
                "--mode",
                mode,
                "--rollouts",
                str(args.rollouts),
                "--repeat",
                str(args.repeat),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append((mode, result, target))
    print(
        f"engine benchmark: {args.rollouts:,} rollouts, groups of {GROUP}, gsm8k + marker "
        f"(best of {args.repeat})\n"
    )
    print("| setting | workers | hand-written loop (rollouts/s) | engine, rewards (rollouts/s) "
          "| ratio | target | engine, `Score` objects (rollouts/s) | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for mode, r, target in rows:
        print(
            f"| {mode} | {int(r['workers'])} | {r['loop_per_s']:,.0f} | {r['engine_per_s']:,.0f} "
            f"| {r['ratio']:.2f}x | >= {target}x | {r['scores_per_s']:,.0f} "
            f"| {r['scores_ratio']:.2f}x |"
        )
    done = subprocess.run([sys.executable, __file__, "--mode", "store", "--rollouts",
                           str(args.rollouts), "--repeat", str(args.repeat)],
                          capture_output=True, text=True, check=True)
    store = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"\nfirst score, store on against --no-store (ScoreJob, 2 workers, best of "
          f"{args.repeat}): {store['on_per_s']:,.0f} against {store['off_per_s']:,.0f} "
          f"rollouts/s: {store['ratio']:.2f}x the time (target <= 1.25x)")
    ceiling = parallel_ceiling()
    print(f"\nparallel ceiling of this machine: two processes running pure Python side by side "
          f"finish {ceiling:.2f}x the work of one in the same time (2.00x on two full cores)")


if __name__ == "__main__":
    main()
