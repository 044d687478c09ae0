"""A client that sends its request too slowly is cut off after ``read_timeout`` (408, closed).

Real sockets on 127.0.0.1 against a real server; the timeout is set short (0.6 s) so the tests
are quick. Before, eight slow connections stayed open as long as their clients liked.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from rewardsmith import ConfigError, Rubric
from rewardsmith.cli import app
from rewardsmith.server import ServerConfig, ServerThread

READ_TIMEOUT = 0.6
SLOW_REWARD = """
import asyncio

async def slow(completion, answer):
    await asyncio.sleep(float(completion))
    return 1.0
"""
BODY = b'{"rollouts": [{"completion": "0.0", "answer": "1"}]}'


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    folder: Path = tmp_path_factory.mktemp("slow_reward")
    (folder / "slow_reward.py").write_text(SLOW_REWARD)
    rubric = Rubric.single(f"{folder / 'slow_reward.py'}:slow", timeout=30)
    config = ServerConfig(rubric, port=0, workers=0, read_timeout=READ_TIMEOUT,
                          log_level="warning")
    with ServerThread(config) as running:
        yield running


def connect(server: ServerThread) -> socket.socket:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def read_until_closed(sock: socket.socket, limit: float = 10.0) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and when it closed it."""
    received = b""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            break
        if not chunk:
            break
        received += chunk
    return received, time.monotonic()


def trickle(sock: socket.socket, data: bytes, pause: float, stop: threading.Event) -> None:
    """Send ``data`` a byte at a time, ``pause`` seconds apart, until done or told to stop."""
    for byte in data:
        if stop.wait(pause):
            return
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            return


def request(body: bytes = BODY) -> bytes:
    return (b"POST /score HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def test_headers_sent_too_slowly_get_408_and_a_closed_connection(server: ServerThread) -> None:
    sock = connect(server)
    stop = threading.Event()
    started = time.monotonic()
    sender = threading.Thread(target=trickle, args=(sock, request(), 0.05, stop), daemon=True)
    sender.start()
    try:
        received, closed = read_until_closed(sock)
    finally:
        stop.set()
        sock.close()
    assert received.startswith(b"HTTP/1.1 408 "), received[:200]
    assert b"--read-timeout" in received
    assert READ_TIMEOUT - 0.05 <= closed - started < READ_TIMEOUT + 1.5


def test_a_body_sent_too_slowly_gets_408(server: ServerThread) -> None:
    sock = connect(server)
    whole = request()
    head, body = whole.split(b"\r\n\r\n", 1)
    sock.sendall(head + b"\r\n\r\n" + body[:5])  # headers at once, then the body dribbles
    stop = threading.Event()
    started = time.monotonic()
    threading.Thread(target=trickle, args=(sock, body[5:], 0.1, stop), daemon=True).start()
    try:
        received, closed = read_until_closed(sock)
    finally:
        stop.set()
        sock.close()
    assert received.startswith(b"HTTP/1.1 408 "), received[:200]
    assert closed - started < READ_TIMEOUT + 1.5


def test_a_connection_that_sends_nothing_is_closed(server: ServerThread) -> None:
    sock = connect(server)
    started = time.monotonic()
    try:
        received, closed = read_until_closed(sock)
    finally:
        sock.close()
    assert received == b""  # nothing was asked, so nothing is answered
    assert READ_TIMEOUT - 0.05 <= closed - started < READ_TIMEOUT + 1.5


def test_eight_slow_clients_are_all_cut_off_and_others_are_served(server: ServerThread) -> None:
    stop = threading.Event()
    socks = [connect(server) for _ in range(8)]
    started = time.monotonic()
    for sock in socks:
        threading.Thread(target=trickle, args=(sock, request(), 0.2, stop), daemon=True).start()
    try:
        # Meanwhile a well-behaved client is answered as usual.
        reply = httpx.post(f"{server.url}/score", content=BODY, timeout=10,
                           headers={"content-type": "application/json"})
        assert reply.status_code == 200
        results = [read_until_closed(sock) for sock in socks]
    finally:
        stop.set()
        for sock in socks:
            sock.close()
    assert all(received.startswith(b"HTTP/1.1 408 ") for received, _ in results)
    assert max(closed for _, closed in results) - started < READ_TIMEOUT + 2.0
    metrics = httpx.get(f"{server.url}/metrics").text
    assert 'rewardsmith_requests_rejected_total{reason="read_timeout"}' in metrics


def test_scoring_time_does_not_count(server: ServerThread) -> None:
    # The request arrives at once; its reward then takes longer than the read timeout.
    body = b'{"rollouts": [{"completion": "1.2", "answer": "1"}]}'
    reply = httpx.post(f"{server.url}/score", content=body, timeout=10,
                       headers={"content-type": "application/json"})
    assert reply.status_code == 200
    assert reply.json()["scores"][0]["reward"] == 1.0


def test_a_pause_between_requests_on_one_connection_is_not_a_timeout(
        server: ServerThread) -> None:
    sock = connect(server)
    try:
        for turn in range(2):
            if turn:
                time.sleep(READ_TIMEOUT * 2)  # idle between requests: keep-alive's business
            sock.sendall(request())
            reply = b""
            while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
                chunk = sock.recv(65536)
                assert chunk, "the server closed a kept-alive connection"
                reply += chunk
            assert reply.startswith(b"HTTP/1.1 200 "), reply[:200]
    finally:
        sock.close()


def test_the_read_timeout_is_checked_and_offered_by_serve() -> None:
    with pytest.raises(ConfigError, match="read-timeout must be a number of seconds > 0"):
        ServerConfig(Rubric.single("gsm8k"), read_timeout=0)
    result = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    assert "--read-timeout" in result.output
