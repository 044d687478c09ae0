"""The server's limits over real HTTP: 401, 413, 422, 429 with Retry-After, 504."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rewardsmith import Rubric
from rewardsmith.server import ServerConfig, ServerThread

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

SLOW = """
import asyncio
import time

async def slow(completion):
    await asyncio.sleep(float(completion))
    return 1.0
"""


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path: Path = tmp_path_factory.mktemp("limits") / "slow_reward.py"
    path.write_text(SLOW)
    rubric = Rubric.single(f"{path}:slow", timeout=30)
    config = ServerConfig(rubric, port=0, workers=0, token=TOKEN, max_batch=8,
                          max_body_bytes=4096, queue_limit=4, request_timeout=0.5,
                          log_level="warning")
    with ServerThread(config) as server:
        yield server.url


def rows(*delays: float) -> dict[str, object]:
    return {"rollouts": [{"completion": str(d), "group": "g"} for d in delays]}


def test_bearer_token(url: str) -> None:
    with httpx.Client(base_url=url) as client:
        reply = client.post("/score", json=rows(0))
        assert reply.status_code == 401 and reply.headers["www-authenticate"] == "Bearer"
        assert "missing bearer token" in reply.json()["detail"]
        wrong = client.post("/score", json=rows(0), headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and "wrong" in wrong.json()["detail"]
        assert client.get("/metrics").status_code == 401
        assert client.get("/health").status_code == 200  # probes need no token
        assert client.get("/openapi.json").status_code == 200
        assert client.post("/score", json=rows(0), headers=AUTH).status_code == 200


def test_body_too_large_declared_or_streamed(url: str) -> None:
    big = {"rollouts": [{"completion": "x" * 5000}]}
    with httpx.Client(base_url=url, headers=AUTH) as client:
        reply = client.post("/score", json=big)
        assert reply.status_code == 413
        assert "--max-body-bytes" in reply.json()["detail"]

        def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer encoding
            yield b'{"rollouts": [{"completion": "'
            for _ in range(10):
                yield b"y" * 1000
            yield b'"}]}'

        streamed = client.post("/score", content=chunks(),
                               headers={"content-type": "application/json"})
        assert streamed.status_code == 413
        assert client.post("/score", json=rows(0)).status_code == 200  # still serving


def test_too_many_rollouts_is_422(url: str) -> None:
    with httpx.Client(base_url=url, headers=AUTH) as client:
        reply = client.post("/score", json=rows(*[0] * 9))
        assert reply.status_code == 422
        assert "9 > 8 (--max-batch)" in reply.json()["detail"][0]["msg"]
        grouped = client.post("/score", json={"groups": [[{"completion": "0"}] * 5] * 2})
        assert grouped.status_code == 422
        many = client.post("/get_reward", json={"query": ["0"] * 9})
        assert many.status_code == 422


def test_full_queue_is_429_with_retry_after(url: str) -> None:
    async def run() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=10) as client:
            first = asyncio.create_task(client.post("/score", json=rows(0.4, 0.4, 0.4)))
            for _ in range(200):  # until the first request is admitted
                if (await client.get("/health")).json()["in_flight"] == 3:
                    break
                await asyncio.sleep(0.005)
            busy = await client.post("/score", json=rows(0, 0))  # 3 + 2 > queue limit 4
            done = await first
            after = await client.post("/score", json=rows(0, 0))
            return busy, done, after

    busy, done, after = asyncio.run(run())
    assert busy.status_code == 429
    assert busy.headers["retry-after"] == "1"
    assert "--queue-limit 4" in busy.json()["detail"]
    assert done.status_code == 200 and after.status_code == 200


def test_slow_request_is_504_and_its_rollouts_leave_the_queue(url: str) -> None:
    with httpx.Client(base_url=url, headers=AUTH, timeout=10) as client:
        reply = client.post("/score", json=rows(1.0))
        assert reply.status_code == 504
        assert "--request-timeout" in reply.json()["detail"]
        assert client.get("/health").json()["in_flight"] == 1  # still being scored
        for _ in range(300):
            if client.get("/health").json()["in_flight"] == 0:
                break
            time.sleep(0.01)
        assert client.get("/health").json()["in_flight"] == 0
        metrics = client.get("/metrics").text
        assert 'rewardsmith_requests_rejected_total{reason="timeout"}' in metrics
        assert 'rewardsmith_http_requests_total{code="504",method="POST",route="/score"}' in metrics
