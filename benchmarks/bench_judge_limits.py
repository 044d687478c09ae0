"""What sharing a judge's limits across processes costs per judge call.

Peer: the same limits held per process (an asyncio semaphore and token buckets), in the same
run. Three measurements:

1. The limiter alone: one call's ticket (a concurrency slot and the budget) and one pacing
   (requests and tokens per minute), taken and given back ``--calls`` times in a row. Per
   scope: ``process`` (the peer), ``store`` (the SQLite file beside the store), and with
   ``--ray`` the Ray job's limiter actor (a local cluster this benchmark starts and stops).
2. The store scope with ``--processes`` processes using one file at once (contention).
3. End to end: rollouts scored by a judge against a local server, limits per process against
   limits in the store: a server that answers at once with ``max_concurrency`` 64 (the worst
   case: nothing but the bookkeeping, ``--rollouts``), and one that answers after 200 ms with
   16 calls in flight (a judge as hosted ones are used; half as many rollouts).

Run: ``.venv/bin/python benchmarks/bench_judge_limits.py [--ray]`` (about 60 s; 40 s more with
``--ray``). Prints markdown tables. Target: with the 200 ms server, the store scope >= 0.9x
the per-process throughput (exits 1 when missed); the instant server's ratio is reported.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import multiprocessing
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rewardsmith import Engine, Rollout, Rubric, Status
from rewardsmith.judge import JudgeConfig
from rewardsmith.judge.limits import Limits, LimitSettings

SERVER = Path(__file__).resolve().parents[1] / "tests" / "support" / "openai_server.py"
MODEL = "judge-2024-01-01"
# Limits high enough never to make anyone wait: what is measured is the bookkeeping. The
# common set (concurrency, requests per minute, a budget); a tokens-per-minute limit adds a
# pacing write per attempt (the request's token estimate is known only then).
LIMITS: dict[str, Any] = {"max_concurrency": 64, "requests_per_minute": 1e9,
                          "budget": {"max_calls": 10**9}}
TOKENS: dict[str, Any] = {"tokens_per_minute": 1e12}


def settings(scope: str, extra: dict[str, Any] | None = None) -> LimitSettings:
    config = JudgeConfig.parse({"base_url": "http://127.0.0.1:1/v1", "model": MODEL,
                                "template": "{completion}", "criteria": {"c": "d"}, **LIMITS,
                                **(extra or {})})
    return dataclasses.replace(LimitSettings.of("bench", config), scope=scope)  # type: ignore[arg-type]


async def limiter_loop(scope: str, store: str, calls: int,
                       extra: dict[str, Any] | None = None) -> float:
    """Seconds per call: take a ticket, pace one request, charge and give the ticket back."""
    limits = Limits(settings(scope, extra), store)
    await limits.open()
    try:
        for _ in range(50):  # warm up (connections, schema, the actor)
            async with limits.call() as ticket:
                await limits.pace(100.0)
                ticket.charge(120, 0.0)
        started = time.perf_counter()
        for _ in range(calls):
            async with limits.call() as ticket:
                await limits.pace(100.0)
                limits.adjust_tokens(20.0)
                ticket.charge(120, 0.0)
        return (time.perf_counter() - started) / calls
    finally:
        await limits.close()


def one_process(scope: str, store: str, calls: int, out: Any) -> None:
    out.put(asyncio.run(limiter_loop(scope, store, calls)))


def contention(store: str, calls: int, processes: int) -> tuple[float, float]:
    """(mean seconds per call in each process, calls per second of all together)."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    started = time.perf_counter()
    workers = [context.Process(target=one_process, args=("store", store, calls, results))
               for _ in range(processes)]
    for worker in workers:
        worker.start()
    per_call = [results.get(timeout=300) for _ in workers]
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    return sum(per_call) / len(per_call), processes * calls / elapsed


def end_to_end(base_url: str, store: Path, scope: str, n: int,
               concurrency: int) -> tuple[float, int]:
    judge = {"base_url": base_url, "model": MODEL, "store": str(store), "limit_scope": scope,
             "template": "Question: {prompt}\nAnswer: {completion}",
             "criteria": {"helpful": "Does the answer help the user?"}, **LIMITS,
             "max_concurrency": concurrency}
    rubric = Rubric.from_dict({"name": "bench-limits",
                               "components": {"quality": {"judge": judge}}})
    items = [Rollout(f"r{i}", f"g{i // 8}", f"What is {i} times 3?", f"#### {3 * i}", str(3 * i))
             for i in range(n)]
    with Engine(rubric, workers=0) as engine:
        engine.check()
        started = time.perf_counter()
        scores = engine.score(items)
        seconds = time.perf_counter() - started
    return n / seconds, sum(s.status is Status.OK for s in scores)


def ray_loop(calls: int) -> float | None:
    try:
        import ray
    except ImportError:
        print("(Ray is not installed: no ray row)")
        return None
    folder = tempfile.mkdtemp(prefix="rs-blim-", dir="/tmp")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, _temp_dir=folder)
    try:
        return asyncio.run(limiter_loop("ray", "", calls))
    finally:
        ray.shutdown()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--rollouts", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=3, help="end-to-end runs per scope")
    parser.add_argument("--ray", action="store_true", help="also the Ray job's limiter actor")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        store = str(Path(folder) / "bench.db")
        alone = {scope: asyncio.run(limiter_loop(scope, store, args.calls))
                 for scope in ("process", "store")}
        alone["store, with tokens_per_minute"] = asyncio.run(
            limiter_loop("store", store, args.calls, TOKENS))
        if args.ray:
            ray_seconds = ray_loop(max(200, args.calls // 4))
            if ray_seconds is not None:
                alone["ray"] = ray_seconds
        shared_call, shared_rate = contention(str(Path(folder) / "contended.db"), args.calls,
                                              args.processes)

        runs: dict[tuple[float, int, int], dict[str, tuple[float, int]]] = {}
        # (server latency, max_concurrency, rollouts): the worst case, then a judge as hosted
        # ones are used (16 calls in flight, a reply in 200 ms; real ones are slower still).
        for latency, concurrency, count in ((0.0, 64, args.rollouts),
                                            (0.2, 16, max(64, args.rollouts // 2))):
            server = subprocess.Popen([sys.executable, str(SERVER), "--latency", str(latency),
                                       "--model", MODEL], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
            try:
                assert server.stdout is not None
                ready = server.stdout.readline().split()
                if not ready or ready[0] != "READY":
                    print("the benchmark server did not start", file=sys.stderr)
                    return 1
                # Interleaved and repeated (a fresh store each time), the median kept: on a
                # machine others share, one run alone says little.
                timings: dict[str, list[tuple[float, int]]] = {"process": [], "store": []}
                for repeat in range(args.repeat):
                    for scope in timings:
                        store_file = Path(folder) / f"e2e-{scope}-{latency}-{repeat}.db"
                        timings[scope].append(end_to_end(ready[1], store_file, scope, count,
                                                         concurrency))
                runs[(latency, concurrency, count)] = {scope: (statistics.median(r[0] for r in found),
                                         min(r[1] for r in found))
                                 for scope, found in timings.items()}
            finally:
                if server.stdin is not None:
                    server.stdin.close()
                server.wait(timeout=10)

    peer = alone["process"]
    print(f"judge limits: the limiter alone, {args.calls} calls in a row (a slot, the budget, "
          f"one pacing, the charge; max_concurrency, requests_per_minute, max_calls set)\n")
    print("| scope | µs per call | added per call vs per process |")
    print("|---|---:|---:|")
    for scope, seconds in alone.items():
        print(f"| {scope} | {seconds * 1e6:.0f} | "
              f"{'-' if scope == 'process' else f'+{(seconds - peer) * 1e6:.0f} µs'} |")
    print(f"| store, {args.processes} processes on one file at once | {shared_call * 1e6:.0f} "
          f"| +{(shared_call - peer) * 1e6:.0f} µs ({shared_rate:.0f} calls/s in all) |")

    print(f"\nend to end: median of {args.repeat} interleaved runs\n")
    print("| server answers after | max_concurrency | rollouts | limits | rollouts/s "
          "| vs per process | result |")
    print("|---|---:|---:|---|---:|---:|---|")
    ok = True
    for (latency, concurrency, count), by_scope in runs.items():
        process_rate, process_ok = by_scope["process"]
        store_rate, store_ok = by_scope["store"]
        ratio = store_rate / process_rate
        complete = process_ok == store_ok == count
        if latency:
            verdict = "ok" if ratio >= 0.9 and complete else "MISSED"
            verdict += " (target >= 0.9x)"
            ok = ok and verdict.startswith("ok")
        else:
            verdict = "(worst case, reported)" if complete else "MISSED (not all scored)"
            ok = ok and complete
        case = f"| {latency * 1000:.0f} ms | {concurrency} | {count} "
        print(f"{case}| per process (peer) | {process_rate:.0f} | 1.00x | |")
        print(f"{case}| shared through the store | {store_rate:.0f} | {ratio:.2f}x | "
              f"{verdict} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
