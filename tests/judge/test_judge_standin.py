"""The stand-in judge server that rewardsmith ships (``rewardsmith judge-serve``): judges of
every mode and scale score against it, key-less or with a key, from the command line and in
process; bad requests get clear errors."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from rewardsmith import Engine, JudgeError, Rollout, Rubric, Status
from rewardsmith.judge.standin import StandInJudge, stand_in_grade

MODEL = "judge-2024-01-01"
TEMPLATE = "Question: {prompt}\nAnswer: {completion}"
CRITERIA = {"helpful": "Does it help?",
            "score": {"description": "How correct is it?", "range": [1, 10]},
            "passes": {"description": "Is it right?", "binary": True}}


def judge(base_url: str, store: Path, **keys: Any) -> dict[str, Any]:
    return {"base_url": base_url, "model": MODEL, "store": str(store), "template": TEMPLATE,
            "criteria": CRITERIA, **keys}


def rollouts() -> list[Rollout]:
    return [Rollout(f"r{i}", f"g{i // 3}", f"What is {i} + 1?", f"It is {i + 1}.", str(i + 1))
            for i in range(6)]


def score(config: dict[str, Any]) -> list[Any]:
    rubric = Rubric.from_dict({"components": {"quality": {"judge": config}}})
    with Engine(rubric, workers=0) as engine:
        engine.check()
        return engine.score(rollouts())


def test_pointwise_grades_are_the_digest_of_the_completion_within_each_scale(
        tmp_path: Path) -> None:
    with StandInJudge() as server:
        for fmt in ("json_schema", "json_object", "none"):
            scores = score(judge(server.base_url, tmp_path / f"{fmt}.db", response_format=fmt))
            for rollout, scored in zip(rollouts(), scores, strict=True):
                assert scored.status is Status.OK, scored.errors
                assert scored.components == {
                    "helpful": stand_in_grade("helpful", rollout.completion),
                    "score": stand_in_grade("score", rollout.completion, 1, 10, None),
                    "passes": stand_in_grade("passes", rollout.completion, 0, 1, 1)}
        values = [s.components["score"] for s in scores]
        assert all(v in range(1, 11) for v in values) and len(set(values)) > 1
        assert server.requests == 18


@pytest.mark.parametrize("mode", ["group", "pairwise"])
def test_group_and_pairwise_judges_score_against_it(tmp_path: Path, mode: str) -> None:
    criteria = {"helpful": "Does it help?",
                "score": {"description": "How correct is it?", "range": [1, 10]}}
    with StandInJudge() as server:
        scores = score(judge(server.base_url, tmp_path / "j.db", mode=mode, criteria=criteria))
        assert all(s.status is Status.OK for s in scores), [s.errors for s in scores]
        assert all(1 <= s.components["score"] <= 10 for s in scores)
        assert server.requests == (2 if mode == "group" else 12)  # 2 groups; 3 pairs x 2 x 2
    if mode == "pairwise":  # verdicts follow the responses, not the order they are shown in
        assert all(s.metrics["helpful.position_bias"] == 0.0 for s in scores)


def test_a_key_is_optional_and_required_only_when_the_server_asks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_KEY", "key-for-the-stand-in")
    with StandInJudge(api_key="key-for-the-stand-in") as server:
        scores = score(judge(server.base_url, tmp_path / "a.db", api_key_env="STAND_IN_KEY"))
        assert all(s.status is Status.OK for s in scores)
        with pytest.raises(JudgeError, match=r"rejected requests without an API key \(set "
                                             r"api_key_env\) \(HTTP 401\)"):
            score(judge(server.base_url, tmp_path / "b.db"))


def test_bad_requests_get_clear_errors() -> None:
    with StandInJudge(models=["a", "b"], slots=3) as server, httpx.Client() as client:
        url = f"{server.base_url}/chat/completions"
        refused = client.post(url, json={"model": "c", "messages": []})
        assert refused.status_code == 404
        assert refused.json()["error"]["message"] == "model 'c' is not served here; serving: a, b"
        garbled = client.post(url, content=b"{not json")
        assert garbled.status_code == 400 and "'model' and 'messages'" in garbled.text
        # A body that claims a gigabyte is refused before it is read (httpx will not send one).
        with socket.create_connection(("127.0.0.1", int(url.split(":")[2].split("/")[0]))) as raw:
            raw.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Length: 1073741824\r\n\r\n{}")
            assert raw.recv(4096).startswith(b"HTTP/1.1 413 ")
        assert client.get(server.base_url.removesuffix("/v1") + "/props").json() == \
            {"total_slots": 3}
        assert client.get(f"{server.base_url}/nothing").status_code == 404
    with pytest.raises(ValueError, match="slots must be at least 1"):
        StandInJudge(slots=0)


def test_the_command_serves_it_until_stopped(tmp_path: Path) -> None:
    server = subprocess.Popen([sys.executable, "-m", "rewardsmith", "judge-serve", "--port", "0",
                               "--model", MODEL], stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        line = server.stderr.readline()  # printed once it listens
        found = re.search(r"http://127\.0\.0\.1:\d+/v1", line)
        assert found is not None, line
        assert "not a judgement" in line
        rubric = tmp_path / "rubric.yaml"  # no api_key_env: a local server needs no key
        rubric.write_text(json.dumps({"components": {"quality": {"judge": judge(
            found.group(0), tmp_path / "j.db")}}}), encoding="utf-8")
        items = tmp_path / "rollouts.jsonl"
        items.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rollouts()),
                         encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        done = subprocess.run([sys.executable, "-m", "rewardsmith", "score", str(items), "-r",
                               str(rubric), "-o", str(tmp_path / "out.jsonl")],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
        assert done.returncode == 0, done.stderr
        lines = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
        assert [x["status"] for x in lines] == ["ok"] * 6
        assert lines[0]["components"]["helpful"] == stand_in_grade("helpful", "It is 1.")
    finally:
        server.terminate()
        started = time.monotonic()
        server.wait(10)
    assert time.monotonic() - started < 5


def test_the_command_refuses_a_missing_key_variable() -> None:
    env = {k: v for k, v in os.environ.items() if k != "NO_SUCH_KEY_VAR"}
    done = subprocess.run([sys.executable, "-m", "rewardsmith", "judge-serve", "--port", "0",
                           "--api-key-env", "NO_SUCH_KEY_VAR"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 2
    assert "the environment variable NO_SUCH_KEY_VAR is not set" in done.stderr
