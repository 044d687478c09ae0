"""``rewardsmith serve`` as a real process: work nobody waits for, and a pool that is stuck.

A client that disconnects while its request is scored frees its place in the queue and its
scoring is cancelled; a shutdown then does not wait for it. A reward call stuck past its timeout
that nothing can replace (in-process, ``--workers 0``) makes ``/health`` answer 503 ``stalled``
instead of ``ok`` while every request times out behind it.
"""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from test_server_shutdown_and_port import Served

from rewardsmith import Rubric
from rewardsmith.server._watch import StallWatch, call_budget

REWARDS = """
import asyncio
import time


def _log(calls_log, text):
    with open(calls_log, "a") as handle:
        handle.write(text + "\\n")


async def slow(completion, calls_log):
    _log(calls_log, f"start {completion}")
    await asyncio.sleep(float(completion))
    _log(calls_log, f"end {completion}")
    return 1.0


def slow_sync(completion, calls_log):
    _log(calls_log, f"start {completion}")
    time.sleep(float(completion))
    _log(calls_log, f"end {completion}")
    return 1.0


def forever(completion):
    while True:
        pass
"""


def write_rubric(folder: Path, reward: str, timeout: float) -> Path:
    (folder / "rewards.py").write_text(REWARDS)
    params = "{}" if reward == "forever" else json.dumps({"calls_log": str(folder / "calls.log")})
    path = folder / "rubric.yaml"
    path.write_text(f"name: abandoned\ncomponents:\n"
                    f"  a: {{reward: 'rewards.py:{reward}', timeout: {timeout}, "
                    f"params: {params}}}\n")
    return path


def wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def send_and_leave(url: str, body: dict[str, object]) -> socket.socket:
    """Send a whole request on a raw connection and return it, unanswered (close it to leave)."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    connection = socket.create_connection((host, int(port)))
    connection.sendall(b"POST /score HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n" % len(data) + data)
    return connection


def in_flight(url: str) -> int:
    return int(httpx.get(f"{url}/health").json()["in_flight"])


@pytest.mark.parametrize("reward,workers", [("slow", "0"), ("slow_sync", "1")],
                         ids=["async-in-process", "sync-in-a-worker"])
def test_a_client_that_disconnects_frees_its_place_and_shutdown_does_not_wait(
        tmp_path: Path, reward: str, workers: str) -> None:
    rubric = write_rubric(tmp_path, reward, timeout=60)
    served = Served(["--rubric", str(rubric), "--port", "0", "--workers", workers,
                     "--queue-limit", "2", "--graceful-timeout", "30"], tmp_path)
    try:
        calls_log = tmp_path / "calls.log"
        gone = send_and_leave(served.url, {"rollouts": [{"completion": "40"}] * 2})
        assert wait_for(lambda: calls_log.exists() and "start 40" in calls_log.read_text(), 30)
        assert in_flight(served.url) == 2
        gone.close()
        # Its two places are free at once: before, they stayed taken until the reward finished
        # (and the next request got 429).
        assert wait_for(lambda: in_flight(served.url) == 0, 5), in_flight(served.url)
        with httpx.Client(base_url=served.url, timeout=60) as client:
            if workers == "0":
                # Its scoring was cancelled: the next request is scored at once.
                started = time.monotonic()
                reply = client.post("/score", json={"rollouts": [{"completion": "0"}] * 2})
                assert reply.status_code == 200, reply.text
                assert time.monotonic() - started < 5
            else:
                # The worker's call cannot be cut short, but the next request is let in (a 429
                # would be answered at once, its rollouts never counted); it leaves too.
                second = send_and_leave(served.url, {"rollouts": [{"completion": "0"}] * 2})
                assert wait_for(lambda: in_flight(served.url) == 2, 10)
                second.close()
                assert wait_for(lambda: in_flight(served.url) == 0, 5)
        stopped = time.monotonic()
        served.process.send_signal(signal.SIGTERM)
        assert served.process.wait(30) in (0, -signal.SIGTERM, 128 + signal.SIGTERM)
        # Nobody waited for the 40 s call: no graceful wait of 30 s for it.
        assert time.monotonic() - stopped < 10
        log = served.text()
        assert "Exception in ASGI application" not in log, log
        assert "end 40" not in calls_log.read_text()
    finally:
        served.kill()


def test_health_reports_a_call_stuck_past_its_timeout_that_nothing_replaces(
        tmp_path: Path) -> None:
    rubric = write_rubric(tmp_path, "forever", timeout=0.5)
    served = Served(["--rubric", str(rubric), "--port", "0", "--workers", "0",
                     "--request-timeout", "3"], tmp_path)
    try:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            assert client.get("/health").json()["status"] == "ok"
            reply = client.post("/score", json={"rollouts": [{"completion": "x"}]})
            assert reply.status_code == 504, reply.text
            health = client.get("/health")
            assert health.status_code == 503, health.text
            assert health.json()["status"] == "stalled"
            assert "stuck past its timeout" in health.json()["problem"]
            assert "--workers 0" in health.json()["problem"]
    finally:
        served.kill()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_watch_times_the_oldest_call_from_when_it_became_the_oldest() -> None:
    clock = Clock()
    watch = StallWatch((1.0, 2.0), clock)  # a call of n rollouts may take n * 1 s + 2 s
    assert watch.stalled() is None
    watch.begin("a", 3)
    watch.begin("b", 1)
    clock.now += 5.0
    assert watch.stalled() is None  # 5 s <= 3 * 1 + 2
    clock.now += 0.5
    assert "3 rollout(s) has run for 5.5 s" in (watch.stalled() or "")
    watch.end("a")
    clock.now += 2.9  # b waited behind a: its clock started when a ended
    assert watch.stalled() is None
    clock.now += 0.2
    assert "1 rollout(s)" in (watch.stalled() or "")
    watch.end("b")
    assert watch.stalled() is None


def test_a_rubric_bounds_its_calls_and_a_judge_is_never_called_stalled() -> None:
    rubric = Rubric.single("gsm8k", timeout=4.0)
    in_process = call_budget(rubric, 0)
    in_workers = call_budget(rubric, 2)
    assert in_process is not None and in_workers is not None
    assert in_process[0] >= 4.0 and in_workers[0] >= 2 * 4.0  # a memory retry runs it twice
    assert in_workers[1] > in_process[1]  # workers start before the first call
    assert StallWatch(None).stalled() is None
