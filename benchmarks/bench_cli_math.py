"""End to end through the CLI: ``rewardsmith score`` over 4,000 distinct math pairs, against
math-verify's in-process rate on the same pairs, in the same run.

The pairs are ``bench_math``'s realistic mix (about 70% integers and fractions, 30% symbolic;
each completion ends with a boxed answer). The CLI time is the whole command as a user runs
it: interpreter start, imports, reading the file, starting the workers, scoring with the
``math`` reward, writing the scored file and recording the run in a fresh store (the default).
It runs as installed code does, its bytecode cached (in a private folder, written by one
untimed run first): a machine that sets ``PYTHONDONTWRITEBYTECODE`` would otherwise compile
every module from source on each start, as no installed package does.
math-verify's rate is its checking time alone (``parse`` + ``verify`` per pair, one process,
its import not counted), over every pair or over a seeded sample of them (``--peer-sample``).

A small job is mostly fixed cost, so each attempt also times the same command on the first
``--small`` pairs (one group of 8 by default): that time is the run's fixed cost (start-up,
imports, workers, the first calls, the files), and the table says what share of the 4,000-pair
run it is.

    python benchmarks/bench_cli_math.py [--pairs 4000] [--repeat 3] [--peer-sample 4000]
                                        [--small 8] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_math import realistic_mix, run_math_verify


def write_rollouts(path: Path, pairs: list[tuple[str, str]]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for index, (reference, completion) in enumerate(pairs):
            handle.write(json.dumps({"id": f"p{index}", "group": f"g{index // 8}",
                                     "prompt": "Solve.", "completion": completion,
                                     "answer": reference}) + "\n")


def installed_env(folder: Path) -> dict[str, str]:
    """The environment, with bytecode written to and read from a private cache."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    return env


def run_cli(rollouts: Path, folder: Path, attempt: int | str) -> float:
    """Seconds for one ``rewardsmith score`` run, from exec to exit."""
    command = [sys.executable, "-m", "rewardsmith", "score", str(rollouts), "--reward", "math",
               "-o", str(folder / f"scored-{attempt}.jsonl"), "--store",
               str(folder / f"store-{attempt}.db"), "-q"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=installed_env(folder))
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"rewardsmith score failed:\n{done.stderr}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--peer-sample", type=int, default=4000,
                        help="pairs math-verify checks (a seeded sample when fewer than --pairs)")
    parser.add_argument("--hang", type=float, default=20.0, help="math-verify hang limit (s)")
    parser.add_argument("--small", type=int, default=8,
                        help="pairs of the small job timed for the fixed cost (0: not timed)")
    parser.add_argument("--json", action="store_true",
                        help="also print the runs as one JSON line (for benchmarks/results.jsonl)")
    args = parser.parse_args()
    pairs = realistic_mix(args.pairs)
    sample = (pairs if args.peer_sample >= len(pairs)
              else random.Random(11).sample(pairs, args.peer_sample))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rollouts, small = folder / "rollouts.jsonl", folder / "small.jsonl"
        write_rollouts(rollouts, pairs)
        write_rollouts(small, pairs[:args.small])
        run_cli(rollouts, folder, "cache")  # writes the bytecode cache, as an install does
        cli_times: list[float] = []
        small_times: list[float] = []
        peer_rates: list[float] = []
        for attempt in range(args.repeat):  # interleaved: a busy moment hits both sides
            if args.small:
                small_times.append(run_cli(small, folder, f"small-{attempt}"))
            cli_times.append(run_cli(rollouts, folder, attempt))
            checked = run_math_verify(sample, args.hang)
            peer_rates.append(len(checked) / sum(seconds for _, seconds in checked))
    load = os.getloadavg()[0]
    print(f"# CLI end to end: {len(pairs):,} distinct math pairs, `rewardsmith score --reward "
          f"math` (store on), against math-verify in-process on {len(sample):,} of them\n")
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs\n")
    print(f"| run | CLI seconds | {args.small} pairs (fixed cost) | CLI pairs/s | "
          "math-verify pairs/s | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    runs = []
    for attempt, (seconds, peer) in enumerate(zip(cli_times, peer_rates, strict=True)):
        rate = len(pairs) / seconds
        fixed = small_times[attempt] if small_times else None
        fixed_text = "-" if fixed is None else f"{fixed:.2f} s ({fixed / seconds:.0%})"
        print(f"| {attempt + 1} | {seconds:.2f} | {fixed_text} | {rate:,.0f} | {peer:,.1f} | "
              f"{rate / peer:.1f}x |")
        runs.append({"cli_seconds": round(seconds, 3),
                     "small_seconds": None if fixed is None else round(fixed, 3),
                     "cli_pairs_per_s": round(rate, 1), "peer_pairs_per_s": round(peer, 2),
                     "ratio": round(rate / peer, 2)})
    best = len(pairs) / min(cli_times)
    peer_best = max(peer_rates)
    print(f"\nbest against best: {best:,.0f} against {peer_best:,.1f} pairs/s: "
          f"{best / peer_best:.1f}x (target >= 20x)")
    if args.json:
        print(json.dumps({"benchmark": "bench_cli_math", "load": round(load, 1),
                          "cpus": os.cpu_count(), "pairs": len(pairs),
                          "peer_pairs": len(sample), "small_pairs": args.small,
                          "runs": runs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
