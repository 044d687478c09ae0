"""Judge throughput and replay speed against a local server that answers after 200 ms.

2,000 rollouts x 2 criteria (one call per rollout asks for both). Targets:

- first run: calls per second >= 0.8 x max_concurrency / latency
- second run over the same rollouts (everything replayed from the store): >= 100x faster
  (the median of three replayed runs, each a fresh engine, on a machine others share)

Then the judge modes on groups of 16 (``--groups`` of them, 2 criteria): pointwise (one call
per rollout), group (one call per group) and pairwise (32 pairs a group, both orders): calls
and tokens per rollout, each against pointwise in the same run, and each mode's replayed
rerun against its first run.

Then, when ``make judge-local`` installed llama.cpp's server and the SmolLM2 model, the rows
against that real server (see ``judge_real.py``): calls per second beside a plain httpx
asyncio loop at the same concurrency, and a queued server (more in flight than slots) with
each client's success rate and request count. ``--no-real`` skips them.

Run: ``.venv/bin/python benchmarks/bench_judge.py`` (about 20 s, and a few minutes for the
real server). Prints markdown tables and exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from judge_real import missing_reason, real_server_rows

from rewardsmith import Engine, Rollout, Rubric, Status

SERVER = Path(__file__).resolve().parents[1] / "tests" / "support" / "openai_server.py"
MODEL = "judge-2024-01-01"


def rubric(base_url: str, store: Path, concurrency: int, mode: str = "pointwise") -> Rubric:
    return Rubric.from_dict({"name": "bench-judge", "components": {"quality": {"judge": {
        "base_url": base_url, "model": MODEL, "store": str(store), "mode": mode,
        "template": "Question: {prompt}\nAnswer: {completion}",
        "criteria": {"helpful": "Does the answer help the user?", "tidy": "Is it concise?"},
        "max_concurrency": concurrency, "timeout": 10}}}})


def rollouts(n: int, group_size: int = 8) -> list[Rollout]:
    return [Rollout(f"r{i}", f"g{i // group_size}", f"What is {i} times 3?",
                    f"Three times {i} is {3 * i}. #### {3 * i}", str(3 * i)) for i in range(n)]


def timed_run(base_url: str, store: Path, concurrency: int, items: list[Rollout],
              mode: str = "pointwise") -> tuple[float, dict[str, float], int]:
    engine = Engine(rubric(base_url, store, concurrency, mode), workers=0)
    try:
        engine.check()  # the pre-flight request is not part of the timed run
        gc.collect()  # start each run from a clean heap, not with the last run's garbage
        started = time.perf_counter()
        scores = engine.score(items)
        seconds = time.perf_counter() - started
        usage = engine.usage()["judge:quality"]
    finally:
        engine.close()
    ok = sum(s.status is Status.OK for s in scores)
    return seconds, usage, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--groups", type=int, default=16, help="groups of 16 for the modes")
    parser.add_argument("--no-real", action="store_true", help="skip the llama.cpp rows")
    parser.add_argument("--real-rollouts", type=int, default=16)
    parser.add_argument("--real-slots", type=int, default=2)
    parser.add_argument("--queued-concurrency", type=int, default=8)
    parser.add_argument("--real-max-tokens", type=int, default=16)
    args = parser.parse_args()
    real_ok = True
    if not args.no_real:
        reason = missing_reason()
        if reason is not None:
            print(f"real-server rows skipped: {reason}\n")
        else:
            real_ok = real_server_rows(args.real_rollouts, args.real_slots,
                                       args.queued_concurrency, args.real_max_tokens)
            print()

    server = subprocess.Popen([sys.executable, str(SERVER), "--latency", str(args.latency),
                               "--model", MODEL], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        ready = server.stdout.readline().split()
        if not ready or ready[0] != "READY":
            print("the benchmark server did not start", file=sys.stderr)
            return 1
        base_url = ready[1]
        items = rollouts(args.rollouts)
        with tempfile.TemporaryDirectory() as folder:
            store = Path(folder) / "bench.db"
            first, usage1, ok1 = timed_run(base_url, store, args.concurrency, items)
            # The replayed run is short enough for a busy machine to blur: run it three
            # times (each a fresh engine over the same store) and take the median.
            replays = [timed_run(base_url, store, args.concurrency, items) for _ in range(3)]
            second = statistics.median(r[0] for r in replays)
            usage2 = replays[0][1]
            ok2 = min(r[2] for r in replays)
            replayed_calls = sum(r[1]["calls"] for r in replays)
            modes = compare_modes(base_url, Path(folder), args.concurrency, args.groups)
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=10)

    calls_per_second = usage1["calls"] / first
    target_rate = 0.8 * args.concurrency / args.latency
    speedup = first / second
    rate_ok = calls_per_second >= target_rate and ok1 == args.rollouts
    replay_ok = speedup >= 100 and replayed_calls == 0 and ok2 == args.rollouts
    print(f"judge benchmark: {args.rollouts} rollouts x 2 criteria, server latency "
          f"{args.latency * 1000:.0f} ms, max_concurrency {args.concurrency}\n")
    print("| run | calls | replayed grades | seconds | calls/s | target | result |")
    print("|---|---:|---:|---:|---:|---:|---|")
    print(f"| first (calls the judge) | {usage1['calls']:.0f} | {usage1['replayed']:.0f} | "
          f"{first:.2f} | {calls_per_second:.0f} | >= {target_rate:.0f} calls/s | "
          f"{'ok' if rate_ok else 'MISSED'} ({calls_per_second / target_rate:.2f}x target) |")
    print(f"| second (replayed; median of 3) | {replayed_calls:.0f} | "
          f"{usage2['replayed']:.0f} | {second:.3f} | - | >= 100x faster | "
          f"{'ok' if replay_ok else 'MISSED'} ({speedup:.0f}x faster) |")
    print(f"\nreplayed runs: {', '.join(f'{r[0]:.3f} s' for r in replays)}")
    modes_ok = print_modes(modes, args.groups)
    return 0 if rate_ok and replay_ok and modes_ok and real_ok else 1


def compare_modes(base_url: str, folder: Path, concurrency: int,
                  groups: int) -> dict[str, tuple[float, dict[str, float], float, float, int]]:
    """Per mode: first-run seconds, usage, replayed seconds (median of 3), replayed calls, ok."""
    items = rollouts(16 * groups, group_size=16)
    out = {}
    for mode in ("pointwise", "group", "pairwise"):
        store = folder / f"modes-{mode}.db"
        first, usage, ok = timed_run(base_url, store, concurrency, items, mode)
        replays = [timed_run(base_url, store, concurrency, items, mode) for _ in range(3)]
        out[mode] = (first, usage, statistics.median(r[0] for r in replays),
                     sum(r[1]["calls"] for r in replays), min(ok, *(r[2] for r in replays)))
    return out


def print_modes(modes: dict[str, tuple[float, dict[str, float], float, float, int]],
                groups: int) -> bool:
    n = 16 * groups
    base_calls = modes["pointwise"][1]["calls"] / n
    base_tokens = (modes["pointwise"][1]["tokens_in"] + modes["pointwise"][1]["tokens_out"]) / n
    print(f"\njudge modes: {groups} groups of 16 rollouts, 2 criteria\n")
    print("| mode | calls/rollout | vs pointwise | tokens/rollout | vs pointwise | first run s "
          "| replayed s (median of 3) | replay speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    ok = True
    for mode, (first, usage, replayed, replayed_calls, good) in modes.items():
        calls = usage["calls"] / n
        tokens = (usage["tokens_in"] + usage["tokens_out"]) / n
        print(f"| {mode} | {calls:.3f} | {calls / base_calls:.3f}x | {tokens:.0f} | "
              f"{tokens / base_tokens:.2f}x | {first:.3f} | {replayed:.4f} | "
              f"{first / replayed:.0f}x |")
        ok = ok and replayed_calls == 0 and good == n
    if not ok:
        print("MISSED: a replayed run made calls, or a rollout was not graded")
    return ok


if __name__ == "__main__":
    sys.exit(main())
