"""``rewardsmith serve`` as a real process: startup errors, and SIGTERM finishing requests first."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from rewardsmith import LoadError
from rewardsmith.cli import app
from rewardsmith.server import require_server_extra

SLOW = """
import asyncio

async def slow(completion, answer):
    await asyncio.sleep(float(completion))
    return float(answer)
"""


def test_token_env_must_be_set() -> None:
    env = {k: v for k, v in os.environ.items() if k != "RS_TEST_TOKEN"}
    result = CliRunner().invoke(app, ["serve", "--reward", "gsm8k", "--token-env",
                                      "RS_TEST_TOKEN"], env=env)
    assert result.exit_code == 2
    assert "RS_TEST_TOKEN" in result.output


def test_a_bad_rubric_fails_before_the_port_opens(tmp_path: Path) -> None:
    rubric = tmp_path / "r.yaml"
    rubric.write_text("name: x\ncomponents:\n  a: {reward: gsm8kk}\n")
    result = CliRunner().invoke(app, ["serve", "--rubric", str(rubric)])
    assert result.exit_code == 2
    assert "gsm8k" in result.output  # the did-you-mean hint


def test_sigterm_lets_requests_in_flight_finish(tmp_path: Path) -> None:
    reward = tmp_path / "slow_reward.py"
    reward.write_text(SLOW)
    process = subprocess.Popen(
        [sys.executable, "-m", "rewardsmith", "serve", "--reward", f"{reward}:slow",
         "--port", "0", "--workers", "0", "--graceful-timeout", "10"],
        stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        url = None
        assert process.stderr is not None
        deadline = time.monotonic() + 30
        while url is None and time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line and process.poll() is not None:
                break
            found = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", line)
            if found:
                url = found.group(1)
        assert url is not None, "the server did not start"
        log: list[str] = []
        stream = process.stderr
        drain = threading.Thread(target=lambda: log.extend(stream), daemon=True)
        drain.start()
        replies: list[httpx.Response] = []

        def slow_request() -> None:
            body = {"rollouts": [{"completion": "1.0", "answer": 0.75}]}
            replies.append(httpx.post(f"{url}/score", json=body, timeout=20))

        worker = threading.Thread(target=slow_request)
        worker.start()
        with httpx.Client(base_url=url) as client:
            for _ in range(200):
                if client.get("/health").json()["in_flight"] == 1:
                    break
                time.sleep(0.01)
        process.send_signal(signal.SIGTERM)
        worker.join(20)
        assert replies and replies[0].status_code == 200
        assert replies[0].json()["scores"][0]["reward"] == 0.75
        # Ended by the signal: uvicorn re-raises it (-15), or the CLI exits 128 + 15.
        assert process.wait(20) in (0, -signal.SIGTERM, 128 + signal.SIGTERM)
        drain.join(5)
        assert any("Application shutdown complete" in line for line in log), log
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)


def test_missing_server_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fastapi", None)  # what an import of a missing package does
    with pytest.raises(LoadError, match=r"pip install 'rewardsmith\[server\]'"):
        require_server_extra()
    result = CliRunner().invoke(app, ["serve", "--reward", "gsm8k"])
    assert result.exit_code == 2 and "rewardsmith[server]" in result.output
