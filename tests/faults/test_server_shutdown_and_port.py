"""``rewardsmith serve`` as a real process: what a shutdown past ``--graceful-timeout`` answers,
and what a port that is already taken does.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rewardsmith import ConfigError, Rubric
from rewardsmith.server import ServerConfig, ServerThread

SLOW_REWARDS = """
import asyncio
import time

async def slow(completion, answer):
    await asyncio.sleep(float(completion))
    return 1.0

def slow_sync(completion, answer):
    time.sleep(float(completion))
    return 1.0
"""


class Served:
    """A ``rewardsmith serve`` process and everything it wrote to stderr."""

    def __init__(self, args: list[str], cwd: Path):
        self.process = subprocess.Popen([sys.executable, "-m", "rewardsmith", "serve", *args],
                                        stderr=subprocess.PIPE, text=True, cwd=cwd)
        self.log: list[str] = []
        self.url = ""
        self.in_process = "--workers" in args and args[args.index("--workers") + 1] == "0"
        assert self.process.stderr is not None
        deadline = time.monotonic() + 60
        while not self.url and time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line and self.process.poll() is not None:
                break
            self.log.append(line)
            found = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", line)
            if found:
                self.url = found.group(1)
        assert self.url, f"the server did not start: {''.join(self.log)}"
        stream = self.process.stderr
        self._drain = threading.Thread(target=lambda: self.log.extend(stream), daemon=True)
        self._drain.start()

    def text(self) -> str:
        self._drain.join(10)
        return "".join(self.log)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def rewards(tmp_path: Path) -> Path:
    path = tmp_path / "slow_rewards.py"
    path.write_text(SLOW_REWARDS)
    return path


@pytest.fixture
def served(request: pytest.FixtureRequest, rewards: Path) -> Iterator[Served]:
    name, workers = request.param
    server = Served(["--reward", f"{rewards}:{name}", "--port", "0", "--workers", workers,
                     "--graceful-timeout", "1"], rewards.parent)
    try:
        yield server
    finally:
        server.kill()


@pytest.mark.parametrize("served", [("slow", "0"), ("slow_sync", "1")], indirect=True,
                         ids=["async-in-process", "sync-in-a-worker"])
def test_requests_still_running_past_the_graceful_timeout_get_503(served: Served) -> None:
    replies: list[httpx.Response] = []

    def slow_request() -> None:
        body = {"rollouts": [{"completion": "30", "answer": "1"}]}
        replies.append(httpx.post(f"{served.url}/score", json=body, timeout=60))

    client = threading.Thread(target=slow_request)
    client.start()
    with httpx.Client(base_url=served.url) as probe:
        for _ in range(500):
            if probe.get("/health").json()["in_flight"] == 1:
                break
            time.sleep(0.01)
    stopped = time.monotonic()
    served.process.send_signal(signal.SIGTERM)
    client.join(30)
    assert replies, "no reply to the request in flight"
    reply = replies[0]
    assert reply.status_code == 503, reply.text
    assert reply.headers["retry-after"] == "1"
    assert "--graceful-timeout" in reply.json()["detail"]
    assert served.process.wait(30) in (0, -signal.SIGTERM, 128 + signal.SIGTERM)
    assert time.monotonic() - stopped < 1 + 10  # the graceful timeout, then a prompt exit
    log = served.text()
    # The server's own part: no 500 and no traceback from the cancelled request. (A worker
    # process stopped in the middle of a call is the engine's to report.)
    assert "Exception in ASGI application" not in log, log
    assert "CancelledError" not in log, log
    if served.in_process:
        assert "Traceback" not in log, log
    assert "Application shutdown complete" in log


def test_a_busy_port_exits_2_before_saying_it_serves(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "rewardsmith", "serve", "--reward", "gsm8k", "--port",
             str(port)], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert result.returncode == 2, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}: the port is already in use" in result.stderr
    assert "--port 0" in result.stderr
    assert "serving rubric" not in result.stderr and "Uvicorn running" not in result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 30


def test_a_busy_port_is_a_config_error_for_the_server_thread() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        config = ServerConfig(Rubric.single("gsm8k"), port=taken.getsockname()[1], workers=0)
        with pytest.raises(ConfigError, match="already in use"):
            ServerThread(config)


def test_serve_announces_the_port_it_really_got(rewards: Path) -> None:
    server = Served(["--reward", "gsm8k", "--port", "0", "--workers", "0"], rewards.parent)
    try:
        port = server.url.rsplit(":", 1)[1]
        assert any(f"serving rubric 'gsm8k' (gsm8k) on http://127.0.0.1:{port}" in line
                   for line in server.log), server.log
        assert httpx.get(f"{server.url}/health").status_code == 200
    finally:
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(30)
        server.kill()
