"""Fault soak: a run where 1% of rollouts each crash, hang, block, hog memory, flood stdout,
leave processes or daemons behind, fork, exit, change folder, replace ``sys.stdout``, or (async)
swallow their own cancellation, through `rewardsmith score` as a user runs it.

Checks that the run comes back complete (one scored line per rollout, each with the status
its fault calls for), that each sync call ran exactly once and each async call finished
exactly once, that no process is left afterwards, that stdout is parseable JSONL, and that the
run took at most 1.5x the same run without faults plus the time the timeouts take.

    python benchmarks/bench_faults.py [--rollouts 20000] [--rate 0.01] [--timeout 1]

A process counts as left running when a pid file names it or its environment carries the run's
``SOAK_PIDS`` (what rewards start inherits it). A run that exits non-zero prints the end of
its stderr; ``SOAK_KEEP_STDERR=PATH`` keeps the whole of it there.

``--per-kind KIND,KIND,...`` measures instead what each kind of fault costs: for each, a run of
``--rollouts`` holding ``--rate`` of that fault alone against the same run without faults,
reported as the time a fault adds beyond its own timeout spread over the workers.
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
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SYNC_FAULTS = ["segfault", "hang", "hog", "print", "spawn", "fork", "exit", "chdir", "stdout",
               "daemon"]
ASYNC_FAULTS = ["block", "stubborn"]
# What each fault must come back as.
EXPECTED = {"segfault": "error", "hang": "timeout", "hog": "error", "print": "ok", "spawn": "ok",
            "fork": "ok", "exit": "error", "chdir": "ok", "stdout": "ok", "daemon": "ok",
            "block": "timeout", "stubborn": "timeout", "ok": "ok"}


def make_rollouts(count: int, rate: float, faults: bool, seed: int = 7) -> list[dict[str, str]]:
    chooser = random.Random(seed)
    rows = []
    per_kind = round(count * rate) if faults else 0
    kinds = [k for k in SYNC_FAULTS for _ in range(per_kind)]
    kinds += [k for k in ASYNC_FAULTS for _ in range(per_kind)]
    kinds += ["ok"] * (count - len(kinds))
    chooser.shuffle(kinds)
    for index, kind in enumerate(kinds):
        sync_fault = kind if kind in SYNC_FAULTS else "ok"
        async_fault = kind if kind in ASYNC_FAULTS else "ok"
        rows.append({"id": f"r{index}", "group": f"g{index // 8}", "prompt": "p",
                     "completion": f"{sync_fault}/{async_fault}/r{index}", "answer": kind})
    return rows


def one_kind(count: int, rate: float, kind: str) -> list[dict[str, str]]:
    """``count`` rollouts, every ``1 / rate``-th of them with the fault ``kind``."""
    every = max(1, round(1 / rate))
    rows = []
    for index in range(count):
        fault = kind if index % every == 0 else "ok"
        sync_fault = fault if fault in SYNC_FAULTS else "ok"
        async_fault = fault if fault in ASYNC_FAULTS else "ok"
        rows.append({"id": f"r{index}", "group": f"g{index // 8}", "prompt": "p",
                     "completion": f"{sync_fault}/{async_fault}/r{index}", "answer": fault})
    return rows


def per_kind(kinds: list[str], args: argparse.Namespace) -> int:
    print("| fault | faults | seconds | without faults | timeouts / workers | added per fault |")
    print("|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        clean = run(folder, "clean", one_kind(args.rollouts, args.rate, "ok"), args.timeout,
                    args.memory, args.workers)
        for kind in kinds:
            rows = one_kind(args.rollouts, args.rate, kind)
            faults = sum(1 for r in rows if r["answer"] == kind)
            result = run(folder, kind, rows, args.timeout, args.memory, args.workers)
            waits = faults * args.timeout / args.workers if kind in ("hang", *ASYNC_FAULTS) \
                else 0.0
            added = (result.seconds - clean.seconds - waits) / max(1, faults)
            print(f"| {kind} | {faults} | {result.seconds:.2f} | {clean.seconds:.2f} | "
                  f"{waits:.1f} | {added * 1000:.0f} ms |")
    return 0


def rubric_text(timeout: float, memory_mb: int) -> str:
    rewards = HERE / "soak_rewards.py"
    return (f"name: soak\ntimeout: {timeout}\nmemory_limit: {memory_mb}\ncomponents:\n"
            f"  sync:  {{reward: '{rewards}:sync_part'}}\n"
            f"  async: {{reward: '{rewards}:async_part'}}\n")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


@dataclass
class RunResult:
    seconds: float
    exit_code: int
    scored: list[dict[str, Any]]
    unparseable: int  # stdout lines that are not JSON
    events: Counter[tuple[str, str, str]]  # (start|done, component, rollout) -> count
    spawned: int
    left: list[tuple[int, str]]  # processes started by rewards still running: pid, rollout
    stderr_tail: str  # the end of what the run wrote to stderr


def run(folder: Path, name: str, rows: list[dict[str, str]], timeout: float, memory_mb: int,
        workers: int) -> RunResult:
    data = folder / f"{name}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rubric = folder / "rubric.yaml"
    rubric.write_text(rubric_text(timeout, memory_mb))
    log, pids = folder / f"{name}.calls", folder / f"{name}.pids"
    env = dict(os.environ, SOAK_LOG=str(log), SOAK_PIDS=str(pids))
    command = [sys.executable, "-m", "rewardsmith", "score", str(data), "--rubric", str(rubric),
               "--workers", str(workers), "--no-store", "--max-error-rate", "1.0"]
    started = time.perf_counter()
    with open(folder / f"{name}.stderr", "wb") as errors:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=errors, env=env,
                              timeout=3600)
    seconds = time.perf_counter() - started
    scored, unparseable = [], 0
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        try:
            scored.append(json.loads(line))
        except json.JSONDecodeError:
            unparseable += 1
    events: Counter[tuple[str, str, str]] = Counter()
    if log.exists():
        for line in log.read_text().splitlines():
            event, component, rollout = line.split()
            events[(event, component, rollout)] += 1
    spawned = [(int(line.split()[0]), line.split()[1])
               for line in pids.read_text().splitlines()] if pids.exists() else []
    time.sleep(0.5)
    left = [(pid, rollout) for pid, rollout in spawned if alive(pid)]
    # Also what no pid file names (a daemon killed before it wrote its pid, or one that wrote
    # nothing): every process the run started carries SOAK_PIDS in its environment.
    named = {pid for pid, _ in left}
    left += [(pid, "?") for pid in carrying(f"SOAK_PIDS={pids}") if pid not in named]
    errors = (folder / f"{name}.stderr").read_bytes()
    if done.returncode != 0 and os.environ.get("SOAK_KEEP_STDERR"):
        Path(os.environ["SOAK_KEEP_STDERR"]).write_bytes(errors)
    tail = errors[-4000:].decode("utf-8", "replace")
    return RunResult(seconds, done.returncode, scored, unparseable, events, len(spawned), left,
                     tail)


def carrying(entry: str) -> list[int]:
    """Live processes (not zombies) whose environment holds ``entry`` (``NAME=value``)."""
    found = []
    wanted = entry.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                if wanted in handle.read().split(b"\0") and alive(int(name)):
                    found.append(int(name))
        except OSError:
            continue
    return found


def fill_seconds(memory_mb: int, tries: int = 5) -> float:
    """The median time the soak's memory hog takes, in a process of its own, to grow to
    ``memory_mb`` resident: the time its memory limit lets it run, as a timeout lets a hang."""
    script = "import sys\nsys.stdin.read(1)\nblock = b'x' * (2 << 30)\n"
    times = []
    for _ in range(tries):
        child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE)
        assert child.stdin is not None
        time.sleep(0.2)  # the interpreter up before the clock starts
        child.stdin.write(b"x")
        child.stdin.flush()
        started = time.perf_counter()
        while resident_mb(child.pid) < memory_mb and child.poll() is None:
            time.sleep(0.002)
        times.append(time.perf_counter() - started)
        child.kill()
        child.wait()
    return sorted(times)[len(times) // 2]


def resident_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
    except (OSError, ValueError, IndexError):
        return 0.0


def count(events: Counter[tuple[str, str, str]], event: str, component: str) -> Counter[str]:
    out: Counter[str] = Counter()
    for (seen, part, rollout), times in events.items():
        if seen == event and part == component:
            out[rollout] += times
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=20000)
    parser.add_argument("--rate", type=float, default=0.01, help="share of each fault")
    parser.add_argument("--timeout", type=float, default=1.0, help="per-call limit, seconds")
    parser.add_argument("--memory", type=int, default=256, help="per-call limit, MB")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--per-kind", default="", help="comma-separated fault kinds to time "
                        "one at a time instead of the soak")
    args = parser.parse_args()
    if args.per_kind:
        kinds = args.per_kind.split(",")
        unknown = sorted(set(kinds) - set(SYNC_FAULTS) - set(ASYNC_FAULTS))
        if unknown:
            parser.error(f"unknown fault kinds: {', '.join(unknown)}")
        return per_kind(kinds, args)
    rows = make_rollouts(args.rollouts, args.rate, True)
    clean_rows = make_rollouts(args.rollouts, args.rate, False)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        clean = run(folder, "clean", clean_rows, args.timeout, args.memory, args.workers)
        faulty = run(folder, "faulty", rows, args.timeout, args.memory, args.workers)
    kind_of = {r["id"]: r["answer"] for r in rows}
    problems: list[str] = []
    by_id = {s["id"]: s for s in faulty.scored}
    if len(by_id) != len(rows):
        problems.append(f"{len(by_id)} scored lines for {len(rows)} rollouts")
    wrong: Counter[tuple[str, str | None]] = Counter()
    for rollout_id, kind in kind_of.items():
        got = by_id.get(rollout_id, {}).get("status")
        if got != EXPECTED[kind]:
            wrong[(kind, got)] += 1
            print(f"wrong status: {rollout_id} ({kind}) came back {got}: "
                  f"{by_id.get(rollout_id, {}).get('errors')}")
    if wrong:
        problems.append(f"wrong statuses: {dict(wrong)}")
    sync_starts = count(faulty.events, "start", "sync")
    if set(sync_starts) != set(kind_of) or max(sync_starts.values()) != 1:
        again = sum(n - 1 for n in sync_starts.values() if n > 1)
        problems.append(f"sync calls: {len(sync_starts)} rollouts called, {again} called again")
    async_done = count(faulty.events, "done", "async")
    async_starts = sum(count(faulty.events, "start", "async").values())
    blocked = sum(1 for k in kind_of.values() if k in ASYNC_FAULTS)
    if max(async_done.values(), default=1) != 1 or len(async_done) != len(rows) - blocked:
        problems.append("async calls did not each finish exactly once")
    if faulty.left:
        problems.append("processes left running: " + ", ".join(
            f"{pid} (started by {rollout}, {kind_of.get(rollout)})" for pid, rollout in faulty.left))
    if faulty.unparseable:
        problems.append(f"{faulty.unparseable} stdout lines are not JSON")
    waits = sum(1 for k in kind_of.values() if k in ("hang", *ASYNC_FAULTS)) * args.timeout
    allowed = 1.5 * clean.seconds + waits / args.workers
    hogs = sum(1 for k in kind_of.values() if k == "hog")
    fill = fill_seconds(args.memory) if hogs else 0.0
    if faulty.seconds > allowed:
        problems.append(f"took {faulty.seconds:.1f} s, allowed {allowed:.1f} s")
    print("| run | rollouts | seconds | exit | scored lines | stdout lines not JSON |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, result in (("no faults", clean), ("faults", faulty)):
        print(f"| {name} | {args.rollouts} | {result.seconds:.1f} | {result.exit_code} | "
              f"{len(result.scored)} | {result.unparseable} |")
    print()
    print(f"faults: {round(args.rollouts * args.rate)} each of "
          f"{', '.join(SYNC_FAULTS + ASYNC_FAULTS)}; per-call timeout {args.timeout:g} s, "
          f"memory limit {args.memory} MB, {args.workers} workers")
    print(f"statuses: {dict(Counter(s['status'] for s in faulty.scored))}")
    print(f"sync calls: {sum(sync_starts.values())} for {len(rows)} rollouts; async calls "
          f"started {async_starts}, finished {sum(async_done.values())} ({blocked} blocked "
          f"or stubborn, stopped at their limit; calls cut off by them ran again)")
    print(f"processes started by rewards: {faulty.spawned}, left running: {len(faulty.left)}")
    print(f"time: {faulty.seconds:.1f} s with faults, {clean.seconds:.1f} s without; allowed "
          f"{allowed:.1f} s (1.5x + {waits:g} s of timeouts over {args.workers} workers); "
          f"ratio {faulty.seconds / clean.seconds:.2f}x")
    if hogs:
        # Not part of the target: what the hogs' own work (writing memory up to the limit)
        # takes, for reading how much of the time over the target is theirs.
        print(f"memory hogs: {fill * 1000:.0f} ms each to grow to {args.memory} MB in a "
              f"process of their own, {hogs * fill / args.workers:.1f} s over "
              f"{args.workers} workers; the target counting it: "
              f"{allowed + hogs * fill / args.workers:.1f} s")
    if faulty.exit_code != 0:
        problems.append(f"exit code {faulty.exit_code}")
        print(f"the end of its stderr:\n{faulty.stderr_tail}")
    for problem in problems:
        print(f"FAIL: {problem}")
    print("PASS" if not problems else "FAILED")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
