"""Benchmark: the gate's paired bootstrap over prompts, and a whole gate over two scored files.

1. The bootstrap: rewardsmith's ``cluster_bootstrap`` against ``scipy.stats.bootstrap`` (the
   peer) on the same question: a 95% interval for the mean paired difference, resampling
   prompts, 2,000 resamples, for one statistic and for three (a reward and two components,
   which rewardsmith takes from the same resamples in one pass and scipy one call each).
   Groups have equal sizes here, so the pooled mean rewardsmith computes equals scipy's mean
   of per-prompt mean differences, and the two intervals must agree up to resampling noise
   (rewardsmith's expanded percentile interval is wider by a factor that vanishes with many
   prompts).
2. ``gate_files`` over two scored JSONL files of the same rollouts (reading included),
   against the floor of reading both files with ``json.loads`` alone.

Times are CPU seconds of this process (best of ``--repeats``).

    python benchmarks/bench_gate.py [--prompts N] [--per-prompt K] [--resamples B]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.analysis import cluster_bootstrap, gate_files


def best_of(repeats: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """The least CPU time (this process, all threads) of ``repeats`` calls: on a shared
    machine the wall clock mostly measures the neighbours."""
    times, result = [], None
    for _ in range(repeats):
        start = time.process_time()
        result = fn()
        times.append(time.process_time() - start)
    return min(times), result


def bootstrap_row(prompts: int, per_prompt: int, resamples: int, repeats: int,
                  stats_count: int) -> str:
    """``stats_count`` statistics (the reward and components): rewardsmith takes them in one
    pass over the same resamples, scipy once each."""
    from scipy import stats

    rng = np.random.default_rng(0)
    effect = rng.normal(0.0, 0.3, size=(prompts, 1, stats_count))
    diffs = 0.02 + effect + rng.normal(0.0, 0.2, size=(prompts, per_prompt, stats_count))
    sums = diffs.sum(axis=1)
    counts = np.full_like(sums, per_prompt)
    ours_s, ours = best_of(repeats, lambda: cluster_bootstrap(
        sums, counts, confidence=0.95, resamples=resamples, seed=0)[0])
    means = diffs.mean(axis=1)
    batch = max(1, 4_000_000 // prompts)  # the same memory bound as ours

    def peer_run() -> Any:
        return [stats.bootstrap((means[:, k],), np.mean, n_resamples=resamples,
                                confidence_level=0.95, method="percentile", vectorized=True,
                                batch=batch, random_state=0) for k in range(stats_count)]

    peer_s, peer = best_of(repeats, peer_run)
    low, high = peer[0].confidence_interval
    return (f"| bootstrap, {prompts:,} prompts x {per_prompt}, {stats_count} statistic(s) | "
            f"{peer_s:.3f} s [{low:+.4f}, {high:+.4f}] | {ours_s:.3f} s "
            f"[{ours.low:+.4f}, {ours.high:+.4f}] | {peer_s / ours_s:.2f}x |")


def write_run(path: Path, prompts: int, per_prompt: int, shift: float) -> None:
    rng = np.random.default_rng(1 if shift else 2)
    difficulty = np.linspace(0.05, 0.95, prompts)
    with open(path, "w") as handle:
        for g in range(prompts):
            passed = rng.random(per_prompt) < min(1.0, difficulty[g] + shift)
            for j in range(per_prompt):
                correct = float(passed[j])
                handle.write(json.dumps({
                    "id": f"p{g}-r{j}", "group": f"p{g}", "reward": correct + 0.2,
                    "status": "ok", "components": {"correct": correct, "format": 1.0},
                    "errors": {}, "advantage": None}) + "\n")


def gate_row(prompts: int, per_prompt: int, resamples: int, repeats: int) -> str:
    with tempfile.TemporaryDirectory() as folder:
        old, new = Path(folder) / "old.jsonl", Path(folder) / "new.jsonl"
        write_run(old, prompts, per_prompt, 0.0)
        write_run(new, prompts, per_prompt, 0.02)

        def read_only() -> int:
            lines = 0
            for path in (old, new):
                with open(path, "rb") as handle:
                    lines += sum(1 for raw in handle if json.loads(raw))
            return lines

        floor_s, _ = best_of(repeats, read_only)
        gate_s, result = best_of(repeats, lambda: gate_files(new, old, resamples=resamples))
    reward = result.comparison("reward")
    rollouts = prompts * per_prompt
    return (f"| gate_files, 2 x {rollouts:,} rollouts | {floor_s:.2f} s (json.loads only) | "
            f"{gate_s:.2f} s, delta {reward.delta:+.4f} [{reward.low:+.4f}, "
            f"{reward.high:+.4f}] | {floor_s / gate_s:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=125_000)
    parser.add_argument("--per-prompt", type=int, default=8)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("| what | peer | rewardsmith | peer time / ours |")
    print("|---|---|---|---:|")
    for prompts in sorted({min(args.prompts, 10_000), args.prompts}):
        for stats_count in (1, 3):
            print(bootstrap_row(prompts, args.per_prompt, args.resamples, args.repeats,
                                stats_count), flush=True)
    print(gate_row(args.prompts, args.per_prompt, args.resamples, 1), flush=True)


if __name__ == "__main__":
    main()
