"""A judge server that queues without saying so (as vLLM does): rewardsmith's latency-adaptive
window against the same client without it and against a plain httpx asyncio loop.

The server (``tests/judge_servers/paced.py``, a real HTTP server on 127.0.0.1) generates
``--slots`` replies at once, each in ``--service`` seconds, and queues the rest; it states no
slot count and never refuses, so only the replies' latency shows the queue. Every client has
``max_concurrency`` ``--concurrency`` (far above the slots), ``timeout`` ``--timeout`` (a few
replies' time: enough for a generation, not for the queue a full window makes) and 4
retries. Rows, in one run, alternating the clients ``--rounds`` times:

- plain httpx asyncio loop: a semaphore of ``--concurrency``, re-sending a timed-out request
  after a backoff, as a naive client does;
- rewardsmith with ``latency_tolerance: null``: in-flight window halved on timeouts only;
- rewardsmith (default ``latency_tolerance: 2``): the window follows the latency.

Each row: grades obtained, chat requests the server received (a timed-out request was still
generated: it is paid for), requests per grade, seconds, and the most requests that waited in
the server's queue. Target: the default client gets every grade with one request each.

Run: ``.venv/bin/python benchmarks/bench_judge_queue.py`` (about a minute). Prints a markdown
table; exits 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from rewardsmith import Engine, Rollout, Rubric, Status
from rewardsmith.judge.client import request_body
from rewardsmith.judge.config import JudgeConfig
from rewardsmith.judge.prompt import Template

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from judge_servers.paced import MODEL, PacedServer

TEMPLATE = "Question: {prompt}\nAnswer: {completion}"
CRITERIA = {"helpful": "Does the answer help the user?"}


def settings(base_url: str, store: Path, args: argparse.Namespace,
             **extra: Any) -> dict[str, Any]:
    return {"base_url": base_url, "model": MODEL, "store": str(store), "template": TEMPLATE,
            "criteria": CRITERIA, "max_concurrency": args.concurrency, "timeout": args.timeout,
            "retries": 4, "retry_backoff": 0.5, **extra}


def rollouts(n: int, offset: int) -> list[Rollout]:
    return [Rollout(f"r{i}", f"g{i // 4}", f"What is {i} + {i}?", f"It is {2 * i}.", str(2 * i))
            for i in range(offset, offset + n)]


async def plain_loop(config: dict[str, Any], items: list[Rollout],
                     concurrency: int) -> tuple[float, int]:
    """The same requests from a plain httpx asyncio loop: (seconds, grades obtained)."""
    judge = JudgeConfig.parse(config)
    template = Template(TEMPLATE)
    bodies = [request_body(judge, [{"role": "user", "content": template.render(
        template.values(r), judge.criteria)}], judge.criteria) for r in items]
    gate = asyncio.Semaphore(concurrency)
    good = 0
    async with httpx.AsyncClient(timeout=httpx.Timeout(judge.timeout, connect=10),
                                 limits=httpx.Limits(max_connections=concurrency)) as client:
        async def one(body: dict[str, Any]) -> None:
            nonlocal good
            for attempt in range(judge.retries + 1):
                async with gate:
                    try:
                        response = await client.post(f"{judge.base_url}/chat/completions",
                                                     json=body)
                    except httpx.TimeoutException:
                        response = None
                if response is not None and response.status_code == 200:
                    good += 1
                    return
                await asyncio.sleep(0.5 * 2 ** attempt)

        started = time.perf_counter()
        await asyncio.gather(*(one(body) for body in bodies))
        return time.perf_counter() - started, good


def rewardsmith_run(config: dict[str, Any], items: list[Rollout]) -> tuple[float, int]:
    engine = Engine(Rubric.from_dict({"name": "bench-queue", "components": {
        "quality": {"judge": config}}}), workers=0)
    try:
        engine.check()
        gc.collect()
        started = time.perf_counter()
        scores = engine.score(items)
        return time.perf_counter() - started, sum(s.status is Status.OK for s in scores)
    finally:
        engine.close()


CLIENTS = ("plain httpx asyncio loop (retries on timeout)",
           "rewardsmith, latency_tolerance: null", "rewardsmith (latency_tolerance: 2)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rollouts", type=int, default=64)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--service", type=float, default=0.2, help="seconds a reply takes")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"judge queue benchmark: {args.rollouts} rollouts, a server with {args.slots} slots "
          f"({args.service:g} s a reply) that queues the rest silently; max_concurrency "
          f"{args.concurrency}, timeout {args.timeout:g} s, 4 retries\n")
    print("| round | client | graded | requests | requests/grade | seconds | most queued |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    missed = False
    offset = 0
    with tempfile.TemporaryDirectory() as folder:
        for round_number in range(1, args.rounds + 1):
            for index, name in enumerate(CLIENTS):
                items = rollouts(args.rollouts, offset)  # fresh rollouts: nothing replayed
                offset += args.rollouts
                store = Path(folder) / f"{round_number}-{index}.db"
                with PacedServer(capacity=args.slots, service=args.service) as server:
                    base = settings(server.base_url, store, args)
                    if index == 0:
                        seconds, good = asyncio.run(plain_loop(base, items, args.concurrency))
                    elif index == 1:
                        seconds, good = rewardsmith_run({**base, "latency_tolerance": None},
                                                        items)
                    else:
                        seconds, good = rewardsmith_run(base, items)
                    requests, queued = server.requests, server.peak_waiting
                if index == 2 and (good < args.rollouts or requests > args.rollouts):
                    missed = True
                print(f"| {round_number} | {name} | {good}/{args.rollouts} | {requests} | "
                      f"{requests / max(1, good):.2f} | {seconds:.1f} | {queued} |", flush=True)
    if missed:
        print("\nMISSED: the latency-adaptive client lost a grade or re-sent a request")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
