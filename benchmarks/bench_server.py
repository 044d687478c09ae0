"""Reward server throughput and latency on loopback: 200 concurrent clients, groups of 16.

Starts ``rewardsmith serve --reward gsm8k`` as its own process on 127.0.0.1 and drives it from
client processes (asyncio + httpx), in two phases:

* ``target``: the clients together offer 3,000 rollouts/s (each sends one group of 16 about every
  1.07 s, at random phases); the latency of each group is measured against the 100 ms p99 target.
* ``saturation``: every client sends its next group as soon as the last one is answered; this
  finds the most rollouts/s the server sustains (latency is then queueing: clients / rate).

Bounded: each phase runs ``--seconds`` (default 10) and at most ``--max-requests`` per client
process. Prints a markdown table. Run: ``python benchmarks/bench_server.py [--workers N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

GROUP_SIZE = 16
TARGET_ROLLOUTS_PER_S = 3000.0
TARGET_P99_MS = 100.0


def make_group(seed: int) -> dict[str, Any]:
    """One GSM8K-style group: 16 completions of one question, a mix of right and wrong."""
    rng = random.Random(seed)
    answer = rng.randint(10, 999)
    question = (f"A farmer has {answer - 7} sheep and buys 7 more. Then he counts them twice. "
                "How many sheep does he have?")
    rollouts = []
    for i in range(GROUP_SIZE):
        guess = answer if rng.random() < 0.5 else answer + rng.randint(1, 9)
        steps = " ".join(f"Step {k}: {answer - 7} + {k} is considered." for k in range(6))
        rollouts.append({"id": f"{seed}-{i}", "prompt": question,
                         "completion": f"{steps} So the total is {guess}.\n#### {guess}",
                         "answer": str(answer)})
    return {"groups": [rollouts]}


@dataclass
class PhaseResult:
    latencies: list[float]  # of the requests started in the measured window
    finished: int  # requests answered in the measured window
    errors: int
    seconds: float  # the measured window
    answered: int = 0  # every request answered in the phase, in the window or not
    client_cpu: float = 0.0  # CPU seconds the client processes spent in the phase

    @property
    def rate(self) -> float:
        return self.finished * GROUP_SIZE / self.seconds


class RawConnection:
    """A lean keep-alive HTTP/1.1 client: the load generator must not eat the cores it measures.

    httpx spends several times the server's CPU per request; on a 2-core box it, not the
    server, would set the rate. Every reply is still parsed and checked.
    """

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = (f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
        self.writer.write(head.encode() + body)
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _check(status: int, payload: bytes) -> bool:
    if status != 200:
        return False
    counts: dict[str, int] = json.loads(payload)["counts"]
    return sum(counts.values()) == GROUP_SIZE and counts["ok"] == GROUP_SIZE


async def _client(post: Any, bodies: list[bytes], interval: float | None, stop_at: float,
                  budget: int, latencies: list[tuple[float, float]], errors: list[int]) -> None:
    if interval is not None:
        await asyncio.sleep(random.random() * interval)  # random phase: no thundering herd
    sent = 0
    next_at = time.perf_counter()
    while sent < budget:
        now = time.perf_counter()
        if now >= stop_at:
            return
        body = bodies[sent % len(bodies)]
        started = time.perf_counter()
        try:
            ok = _check(*(await post(body)))
        except (OSError, ValueError, KeyError, asyncio.IncompleteReadError, httpx.HTTPError):
            ok = False
        latencies.append((started, time.perf_counter() - started))
        if not ok:
            errors[0] += 1
        sent += 1
        if interval is not None:
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))


async def _drive(url: str, clients: int, interval: float | None, seconds: float,
                 budget: int, seed: int, kind: str
                 ) -> tuple[list[float], int, int, float, int, float]:
    cpu_started = time.process_time()
    bodies = [json.dumps(make_group(seed * 1000 + i)).encode() for i in range(64)]
    latencies: list[tuple[float, float]] = []
    errors = [0]
    started = time.perf_counter()
    stop_at = started + seconds
    if kind == "httpx":
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30.0) as http:
            async def post(body: bytes) -> tuple[int, bytes]:
                reply = await http.post("/score", content=body,
                                        headers={"content-type": "application/json"})
                return reply.status_code, reply.content

            await asyncio.gather(*(_client(post, bodies, interval, stop_at, budget, latencies,
                                           errors) for _ in range(clients)))
    else:
        host, port = url.split("//", 1)[1].split(":")
        connections = [RawConnection(host, int(port)) for _ in range(clients)]
        await asyncio.gather(*(
            _client(lambda body, c=c: asyncio.wait_for(c.post("/score", body), 30.0), bodies,
                    interval, stop_at, budget, latencies, errors) for c in connections))
        for connection in connections:
            await connection.close()
    # With pacing, the first interval is the ramp (clients start at random phases): measure
    # the steady window after it. A request counts where it started.
    window_start = started + (interval or 0.0)
    window_end = min(stop_at, time.perf_counter())
    steady = [latency for at, latency in latencies if window_start <= at < window_end]
    finished = sum(1 for at, latency in latencies if window_start <= at + latency < window_end)
    return (steady, finished, errors[0], max(1e-9, window_end - window_start), len(latencies),
            time.process_time() - cpu_started)


def _client_process(url: str, clients: int, interval: float | None, seconds: float,
                    budget: int, seed: int, kind: str, out: Any) -> None:
    out.send(asyncio.run(_drive(url, clients, interval, seconds, budget, seed, kind)))
    out.close()


def run_phase(url: str, clients: int, processes: int, interval: float | None, seconds: float,
              budget: int, kind: str = "raw") -> PhaseResult:
    ctx = multiprocessing.get_context("spawn")
    pipes, procs = [], []
    for p in range(processes):
        share = clients // processes + (1 if p < clients % processes else 0)
        ours, theirs = ctx.Pipe()
        proc = ctx.Process(target=_client_process,
                           args=(url, share, interval, seconds, budget, p, kind, theirs))
        proc.start()
        pipes.append(ours)
        procs.append(proc)
    latencies: list[float] = []
    errors = finished = answered = 0
    window = client_cpu = 0.0
    deadline = time.monotonic() + seconds + 60
    for ours, proc in zip(pipes, procs):
        while not ours.poll(0.2):
            if not proc.is_alive() or time.monotonic() > deadline:
                for other in procs:
                    other.kill()
                raise RuntimeError(f"client process {proc.pid} failed (exit {proc.exitcode})")
        got, done, failed, seconds, count, cpu = ours.recv()
        answered += count
        client_cpu += cpu
        latencies.extend(got)
        finished += done
        errors += failed
        window = max(window, seconds)
        proc.join(10)
    return PhaseResult(latencies, finished, errors, window, answered, client_cpu)


def start_server(workers: int | None, extra: list[str]) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "rewardsmith", "serve", "--reward", "gsm8k", "--port", "0",
               *extra]
    if workers is not None:
        command += ["--workers", str(workers)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    assert process.stderr is not None
    deadline = time.monotonic() + 60
    port = None
    while time.monotonic() < deadline and port is None:
        line = process.stderr.readline()
        if not line and process.poll() is not None:
            raise RuntimeError("the server exited while starting")
        found = re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", line)
        if found:
            port = int(found.group(1))
    if port is None:
        process.kill()
        raise RuntimeError("the server did not start in 60 s")
    stream = process.stderr
    threading.Thread(target=lambda: [None for _ in stream], daemon=True).start()
    return process, f"http://127.0.0.1:{port}"


def cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU time (user + system) of process ``pid`` and of its live descendants (the reward
    workers, under multiprocessing's fork server), from /proc; (nan, nan) where /proc cannot
    tell. A worker that ended during the phase takes its time with it."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def own(process: int) -> float:
        with open(f"/proc/{process}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick  # utime, stime

    def children(process: int) -> list[int]:
        found = []
        for task in os.listdir(f"/proc/{process}/task"):
            with open(f"/proc/{process}/task/{task}/children") as listed:
                found += [int(child) for child in listed.read().split()]
        return found

    try:
        server = own(pid)
        workers = 0.0
        pending = children(pid)
        while pending:
            child = pending.pop()
            try:
                workers += own(child)
                pending += children(child)
            except OSError:
                pass  # it ended meanwhile
        return server, workers
    except OSError:
        return float("nan"), float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def row(name: str, clients: int, result: PhaseResult) -> str:
    lat = [v * 1000 for v in result.latencies]
    return (f"| {name} | {clients} | {result.finished} | {result.rate:,.0f} | {percentile(lat, 0.5):.1f} | "
            f"{percentile(lat, 0.95):.1f} | {percentile(lat, 0.99):.1f} | {max(lat or [0]):.1f} "
            f"| {result.errors} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--client-processes", type=int, default=1)
    parser.add_argument("--client", choices=["raw", "httpx"], default="raw",
                        help="raw: a lean asyncio HTTP/1.1 client; httpx: httpx.AsyncClient")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--max-requests", type=int, default=2000,
                        help="per client task and phase")
    parser.add_argument("--workers", type=int, default=None, help="server reward workers")
    parser.add_argument("--rate", type=float, default=TARGET_ROLLOUTS_PER_S,
                        help="rollouts/s offered in the target phase")
    parser.add_argument("--url", default=None, help="use a running server instead")
    args = parser.parse_args()

    process = None
    url = args.url
    if url is None:
        process, url = start_server(args.workers, [])
    try:
        warm = run_phase(url, 8, 1, None, 2.0, 20, args.client)
        if warm.errors:
            raise RuntimeError(f"{warm.errors} warm-up requests failed")
        interval = args.clients * GROUP_SIZE / args.rate
        target = run_phase(url, args.clients, args.client_processes, interval, args.seconds,
                           args.max_requests, args.client)
        before = cpu_seconds(process.pid) if process is not None else None
        saturation = run_phase(url, args.clients, args.client_processes, None, args.seconds,
                               args.max_requests, args.client)
        after = cpu_seconds(process.pid) if process is not None else None
    finally:
        if process is not None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"\nrewardsmith serve --reward gsm8k, groups of {GROUP_SIZE}, {args.clients} clients "
          f"({args.client} HTTP client, {args.client_processes} process(es)), {cores} cores "
          "(server, its workers and the clients share them)\n")
    print("| phase | clients | groups | rollouts/s | p50 ms | p95 ms | p99 ms | max ms | errors |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(row(f"target ({args.rate:,.0f} rollouts/s offered)", args.clients, target))
    print(row("saturation (closed loop)", args.clients, saturation))
    sat_rate = saturation.rate
    p99 = percentile([v * 1000 for v in target.latencies], 0.99)
    if before is not None and after is not None:
        # Over the whole phase: every group answered in it.
        groups = max(1, saturation.answered)
        print(f"\nsaturation CPU per group of {GROUP_SIZE}: server process "
              f"{(after[0] - before[0]) * 1000 / groups:.2f} ms, its reward workers "
              f"{(after[1] - before[1]) * 1000 / groups:.2f} ms, the clients "
              f"{saturation.client_cpu * 1000 / groups:.2f} ms; load average "
              f"{os.getloadavg()[0]:.1f}")
    print(f"\nthroughput {sat_rate:,.0f} rollouts/s vs target {TARGET_ROLLOUTS_PER_S:,.0f} "
          f"({sat_rate / TARGET_ROLLOUTS_PER_S:.2f}x); p99 at the target rate {p99:.1f} ms vs "
          f"{TARGET_P99_MS:.0f} ms ({TARGET_P99_MS / p99:.2f}x headroom)")


if __name__ == "__main__":
    main()
