"""The first-byte deadline and the whole-reply deadline, against a real server on 127.0.0.1
that stalls before its first byte, starts its reply and then sends the body late, or trickles
the body one byte at a time."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from judge_servers.paced import MODEL, PacedServer
from rewardsmith.errors import ConfigError
from rewardsmith.judge.client import CallFailed, JudgeClient, Reply
from rewardsmith.judge.config import JudgeConfig


def config(server: PacedServer, **keys: Any) -> JudgeConfig:
    return JudgeConfig.parse({"base_url": server.base_url, "model": MODEL,
                              "template": "Answer: {completion}",
                              "criteria": {"helpful": "Does it help?"},
                              "retry_backoff": 0.001, **keys})


def ask(server: PacedServer, **keys: Any) -> tuple[Reply | CallFailed, float]:
    """One graded call: its reply (or failure) and the seconds it took."""
    judge = config(server, **keys)

    async def go() -> tuple[Reply | CallFailed, float]:
        client = JudgeClient(judge, None)
        started = time.monotonic()
        try:
            result: Reply | CallFailed = await client.complete(
                [{"role": "user", "content": "Answer: 4"}], judge.criteria)
        except CallFailed as failed:
            result = failed
        finally:
            await client.close()
        return result, time.monotonic() - started

    return asyncio.run(go())


def test_a_server_silent_before_its_first_byte_fails_at_the_first_byte_deadline() -> None:
    with PacedServer(head_delay=3.0) as server:
        result, took = ask(server, first_byte_timeout=0.2, timeout=20, retries=1)
        assert isinstance(result, CallFailed)
        assert result.message == ("judge call failed after 2 attempt(s): "
                                  "no reply began within 0.2 s")
        assert server.requests == 2 and server.replies == 0
        assert took < 1.5  # two deadlines of 0.2 s, not the 20 s generation deadline


def test_a_reply_that_began_in_time_may_take_the_generation_deadline() -> None:
    # Headers at once, the body 0.6 s later: past the first-byte deadline, within timeout.
    with PacedServer(body_delay=0.6) as server:
        result, took = ask(server, first_byte_timeout=0.2, timeout=5, retries=0)
        assert isinstance(result, Reply), result
        assert result.content == '{"helpful": 0.5}' and result.attempts == 1
        assert server.requests == 1 and took >= 0.6


def test_without_a_first_byte_deadline_timeout_bounds_the_wait() -> None:
    with PacedServer(head_delay=0.5) as server:
        result, _ = ask(server, timeout=5, retries=0)
        assert isinstance(result, Reply), result
        result, took = ask(server, timeout=0.2, retries=0)
        assert isinstance(result, CallFailed)
        assert result.message == "judge call failed after 1 attempt(s): timed out after 0.2 s"
        assert took < 0.45


def test_timeout_bounds_the_whole_reply_not_each_read() -> None:
    # About 250 bytes at one per 20 ms: every read is quick, the reply takes 5 s. httpx's read
    # timeout alone would wait for all of it.
    with PacedServer(trickle=0.02) as server:
        result, took = ask(server, first_byte_timeout=0.3, timeout=0.6, retries=0)
        assert isinstance(result, CallFailed)
        assert result.message == "judge call failed after 1 attempt(s): timed out after 0.6 s"
        assert took < 1.5 and server.replies == 0


def test_a_first_byte_deadline_past_the_generation_deadline_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"first_byte_timeout \(40\) must be at most "
                                          r"timeout \(30\)"):
        JudgeConfig.parse({"base_url": "http://127.0.0.1:1/v1", "model": MODEL,
                           "template": "{completion}", "criteria": {"helpful": "Helps?"},
                           "first_byte_timeout": 40})
