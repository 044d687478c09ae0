"""Judging a server with fewer slots than requests, a server that refuses for a while, and a
server that restarts: against a real HTTP server on 127.0.0.1 that counts what it is asked."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from judge_servers.paced import PacedServer
from rewardsmith import Rollout, Rubric, Status
from rewardsmith.engine import Engine
from rewardsmith.judge.client import JudgeClient, Reply
from rewardsmith.judge.config import JudgeConfig
from rewardsmith.judge.inflight import InFlight
from support.openai_server import Fault, OpenAIServer

MODEL = "judge-2024-01-01"


def rubric(server: OpenAIServer, store: Path, **judge: Any) -> Rubric:
    config: dict[str, Any] = {
        "base_url": server.base_url, "model": MODEL, "store": str(store),
        "template": "Question: {prompt}\nAnswer: {completion}",
        "criteria": {"helpful": "Does it help?"}, "retry_backoff": 0.001, **judge}
    return Rubric.from_dict({"components": {"quality": {"judge": config}}})


def rollouts(n: int) -> list[Rollout]:
    return [Rollout(f"r{i}", f"g{i // 4}", f"What is {i} + 1?", f"It is {i + 1}.", str(i + 1))
            for i in range(n)]


def score(rubric: Rubric, n: int) -> tuple[list[Any], dict[str, float]]:
    with Engine(rubric, workers=0) as engine:
        engine.check()
        return engine.score(rollouts(n)), engine.usage()["judge:quality"]


def test_requests_in_flight_stay_within_the_servers_slots(tmp_path: Path) -> None:
    with OpenAIServer(models=[MODEL], latency=0.05, slots=2) as server:
        scores, usage = score(rubric(server, tmp_path / "j.db", max_concurrency=16), 12)
        assert all(s.status is Status.OK for s in scores)
        assert server.peak_inflight == 2 and server.billed == 12 and server.requests == 12
        assert usage["retries"] == 0
    with OpenAIServer(models=[MODEL], latency=0.05) as server:  # no /props: max_concurrency
        score(rubric(server, tmp_path / "k.db", max_concurrency=3), 12)
        assert server.peak_inflight == 3


def test_a_restarting_server_gets_its_own_retry_budget(tmp_path: Path) -> None:
    with OpenAIServer(models=[MODEL]) as server:
        # Eight 503s (a model loading) outlast retries: 1, not unavailable_wait.
        server.inject(*[Fault.status_code(503)] * 8)
        scores, usage = score(rubric(server, tmp_path / "j.db", retries=1,
                                     unavailable_wait=60, max_concurrency=1), 1)
        assert scores[0].status is Status.OK and server.requests == 9
        assert usage["retries"] == 8 and usage["failed"] == 0
        server.inject(*[Fault.status_code(503)] * 8)
        scores, _ = score(rubric(server, tmp_path / "k.db", retries=1, unavailable_wait=0,
                                 max_concurrency=1), 1)
        assert scores[0].status is Status.ERROR and server.requests == 9 + 2
        assert "after 2 attempt(s): HTTP 503" in scores[0].errors["helpful"]


def test_retry_after_on_a_503_is_honoured(tmp_path: Path) -> None:
    with OpenAIServer(models=[MODEL]) as server:
        server.inject(*[Fault.status_code(503, retry_after="0.3")] * 2)
        scores, _ = score(rubric(server, tmp_path / "j.db", max_concurrency=1), 1)
        assert scores[0].status is Status.OK and server.requests == 3
        times = server.request_times
        assert times[1] - times[0] >= 0.29 and times[2] - times[1] >= 0.29


def test_the_window_halves_on_refusals_and_grows_back() -> None:
    async def go() -> None:
        window = InFlight(8)
        window.cap(4)
        assert window.ceiling == 4 and window.limit == 4
        window.overloaded()
        window.overloaded()  # the same burst: one cut
        assert window.limit == 2 and window.cuts == 1
        active: list[int] = []

        async def request() -> None:
            async with window.slot():
                active.append(window.active)
                await asyncio.sleep(0.01)
                window.succeeded()

        await asyncio.gather(*(request() for _ in range(12)))
        assert max(active[:4]) <= 2 and window.peak <= 4  # 2, then grown by successes
        assert 2 < window.limit <= 4
        for _ in range(100):
            window.succeeded()
        assert window.limit == 4  # never above the server's slots

    asyncio.run(go())


def ask_all(server: PacedServer, n: int, **keys: Any) -> tuple[list[Reply | BaseException],
                                                              InFlight]:
    """``n`` graded calls at once through one client; their replies and the client's window."""
    judge = JudgeConfig.parse({"base_url": server.base_url, "model": MODEL,
                               "template": "Answer: {completion}",
                               "criteria": {"helpful": "Does it help?"},
                               "retry_backoff": 0.001, **keys})

    async def go() -> tuple[list[Reply | BaseException], InFlight]:
        client = JudgeClient(judge, None)
        try:
            replies = await asyncio.gather(
                *(client.complete([{"role": "user", "content": f"Answer: {i}"}], judge.criteria)
                  for i in range(n)), return_exceptions=True)
        finally:
            await client.close()
        return list(replies), client.inflight

    return asyncio.run(go())


def test_a_server_that_queues_silently_is_sent_about_what_it_serves() -> None:
    # 4 slots, no /props, no 429s: the queue shows only in the replies' latency. Sent at
    # max_concurrency 48, 44 requests wait behind the 4 being served.
    with PacedServer(capacity=4, service=0.08) as server:
        replies, window = ask_all(server, 96, max_concurrency=48, latency_tolerance=None)
        assert all(isinstance(r, Reply) for r in replies)
        assert min(server.queued[64:]) >= 20 and window.latency_cuts == 0
    with PacedServer(capacity=4, service=0.08) as server:
        replies, window = ask_all(server, 96, max_concurrency=48)
        assert all(isinstance(r, Reply) for r in replies) and server.requests == 96
        assert window.latency_cuts >= 1 and window.cuts == 0
        # The first burst goes out 16 at a time and grows until the latency shows the queue;
        # then the window stays near twice the 4 slots (latency_tolerance 2): about as many
        # requests wait as are served.
        late = server.queued[64:]
        assert sum(late) / len(late) <= 8 and max(late) <= 12, server.queued


def test_noisy_latency_without_a_queue_keeps_the_window_open() -> None:
    # Replies take 80 to 240 ms at random on a server that serves everything at once.
    with PacedServer(service=0.08, jitter=0.16) as server:
        replies, window = ask_all(server, 128, max_concurrency=16)
        assert all(isinstance(r, Reply) for r in replies)
        # At most a nudge from a reply the shared machine stalled, never a queue's shrinking.
        assert window.latency_cuts <= 4 and window.limit == 16
