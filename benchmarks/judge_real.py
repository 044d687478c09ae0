"""The real-server rows of ``bench_judge.py``: rewardsmith against llama.cpp's own server
(``xllamacpp``, SmolLM2-135M-Instruct; ``make judge-local``), beside a plain httpx asyncio loop
sending the same requests at the same concurrency, in the same run.

- throughput: rewardsmith's calls per second over the plain loop's (same prompts, same
  ``max_tokens``, as many in flight as the server has slots), alternating the two twice and
  taking each one's better run, so neither gains from the other warming the server;
- queued: more requests in flight than slots (``--queued-concurrency``) with a timeout of
  about three replies' time: the plain loop with ``retries`` re-sends on timeout, as a naive
  client does; rewardsmith with the same ``timeout``, ``max_concurrency`` and ``retries``.
  Each row reports its success rate and the chat requests the server received (counted on
  the wire by a proxy).
"""

from __future__ import annotations

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
from support.llama_server import MODEL, CountingProxy, LlamaServer, missing_reason

__all__ = ["real_server_rows", "missing_reason"]

TEMPLATE = "Question: {prompt}\nAnswer: {completion}"
CRITERIA = {"score": {"description": "How correct is the answer?", "range": [1, 10]}}


def config(base_url: str, store: Path, concurrency: int, timeout: float,
           retries: int, max_tokens: int) -> dict[str, Any]:
    return {"base_url": base_url, "model": MODEL, "store": str(store), "template": TEMPLATE,
            "criteria": CRITERIA, "max_concurrency": concurrency, "timeout": timeout,
            "retries": retries, "max_tokens": max_tokens, "retry_backoff": 0.5}


def items(n: int, offset: int) -> list[Rollout]:
    return [Rollout(f"r{i}", f"g{i // 4}", f"What is {i} + {i}?", f"It is {2 * i + i % 3}.",
                    str(2 * i)) for i in range(offset, offset + n)]


async def plain_loop(base_url: str, settings: dict[str, Any], rollouts: list[Rollout],
                     concurrency: int) -> tuple[float, int]:
    """The same requests from a plain httpx asyncio loop: (seconds, replies that parsed)."""
    judge = JudgeConfig.parse(settings)
    template = Template(TEMPLATE)
    bodies = [request_body(judge, [{"role": "user", "content": template.render(
        template.values(r), judge.criteria)}], judge.criteria) for r in rollouts]
    gate = asyncio.Semaphore(concurrency)
    good = 0
    async with httpx.AsyncClient(timeout=httpx.Timeout(judge.timeout, connect=10),
                                 limits=httpx.Limits(max_connections=concurrency)) as client:
        async def one(body: dict[str, Any]) -> None:
            nonlocal good
            for attempt in range(judge.retries + 1):
                async with gate:
                    try:
                        response = await client.post(f"{base_url}/chat/completions", json=body)
                    except httpx.TimeoutException:
                        continue
                if response.status_code == 200:
                    good += 1
                    return
                await asyncio.sleep(0.5 * 2 ** attempt)

        started = time.perf_counter()
        await asyncio.gather(*(one(body) for body in bodies))
        return time.perf_counter() - started, good


def rewardsmith_run(settings: dict[str, Any], rollouts: list[Rollout]) -> tuple[float, int]:
    engine = Engine(Rubric.from_dict({"name": "bench-real", "components": {
        "quality": {"judge": settings}}}), workers=0)
    try:
        engine.check()
        gc.collect()
        started = time.perf_counter()
        scores = engine.score(rollouts)
        return time.perf_counter() - started, sum(s.status is Status.OK for s in scores)
    finally:
        engine.close()


def real_server_rows(n: int, slots: int, queued: int, max_tokens: int) -> bool:
    """Print the two tables; False when rewardsmith lost a grade a plain loop kept."""
    with LlamaServer(slots=slots) as server, CountingProxy(server.port) as proxy, \
            tempfile.TemporaryDirectory() as folder:
        url = proxy.base_url
        runs: dict[str, list[tuple[float, int, int]]] = {"plain": [], "rewardsmith": []}
        for round_number in range(2):
            for name in ("plain", "rewardsmith"):
                # Fresh rollouts each run: no run reads what another left in the server's cache.
                batch = items(n, offset=round_number * n + (0 if name == "plain" else 1000))
                settings = config(url, Path(folder) / f"{name}{round_number}.db", slots, 120,
                                  4, max_tokens)
                before = proxy.chat_requests
                seconds, good = (asyncio.run(plain_loop(url, settings, batch, slots))
                                 if name == "plain" else rewardsmith_run(settings, batch))
                runs[name].append((seconds, good, proxy.chat_requests - before))
        best = {name: min(r[0] for r in found) for name, found in runs.items()}
        reply = best["plain"] * slots / n  # one reply's time when the slots are all busy
        print(f"\njudge against a real llama.cpp server (SmolLM2-135M-Instruct Q4_1, {slots} "
              f"slots, CPU), {n} rollouts, 1 criterion, max_tokens {max_tokens}\n")
        print("| client | in flight | runs (s) | calls/s (best) | graded | vs plain loop |")
        print("|---|---:|---|---:|---:|---:|")
        for name, found in runs.items():
            rate = n / best[name]
            print(f"| {'plain httpx asyncio loop' if name == 'plain' else 'rewardsmith'} | "
                  f"{slots} | {', '.join(f'{r[0]:.1f}' for r in found)} | {rate:.2f} | "
                  f"{min(r[1] for r in found)}/{n} | {best['plain'] / best[name]:.2f}x |")
        timeout = round(3 * reply, 1)
        print(f"\nqueued server: {queued} in flight for {slots} slots, timeout {timeout} s "
              f"(about 3 replies), retries 4\n")
        print("| client | graded | success rate | chat requests sent | seconds |")
        print("|---|---:|---:|---:|---:|")
        graded: dict[str, int] = {}
        for name in ("plain", "rewardsmith"):
            batch = items(n, offset=5000 + (0 if name == "plain" else 1000))
            settings = config(url, Path(folder) / f"queued-{name}.db", queued, timeout, 4,
                              max_tokens)
            before = proxy.chat_requests
            seconds, good = (asyncio.run(plain_loop(url, settings, batch, queued))
                             if name == "plain" else rewardsmith_run(settings, batch))
            graded[name] = good
            label = ("plain httpx loop (retries on timeout)" if name == "plain"
                     else "rewardsmith")
            print(f"| {label} | {good}/{n} | {good / n:.0%} | {proxy.chat_requests - before} | "
                  f"{seconds:.1f} |")
    return graded["rewardsmith"] >= graded["plain"]
