"""The judge against a real OpenAI-compatible server on 127.0.0.1: calls, retries, failures,
budgets and the pre-flight check, with exact call counts."""

from __future__ import annotations

import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import Engine, JudgeError, Rollout, Rubric, Score, Status
from support.openai_server import Fault, OpenAIServer, default_grade

MODEL = "judge-2024-01-01"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(models=[MODEL, "gpt-x", "gpt-x-2024-05-13"]) as running:
        yield running


def rubric(server: OpenAIServer, store: Path, *, criteria: dict[str, Any] | None = None,
           extra: dict[str, Any] | None = None, **judge: Any) -> Rubric:
    config: dict[str, Any] = {
        "base_url": server.base_url, "model": MODEL, "store": str(store),
        "template": "Question: {prompt}\nAnswer: {completion}",
        "criteria": criteria or {"helpful": "Does it help?", "tidy": "Is it concise?"},
        "retry_backoff": 0.01, **judge,
    }
    return Rubric.from_dict({"components": {"quality": {"judge": config, **(extra or {})}}})


def rollouts(n: int, group_size: int = 4) -> list[Rollout]:
    return [Rollout(f"r{i}", f"g{i // group_size}", f"What is {i} + 1?", f"It is {i + 1}.",
                    str(i + 1)) for i in range(n)]


def run(rubric: Rubric, items: list[Rollout]) -> tuple[list[Score], dict[str, float]]:
    with Engine(rubric, workers=0) as engine:
        engine.check()
        scores = engine.score(items)
        return scores, engine.usage()["judge:quality"]


def test_one_call_per_rollout_then_replayed_then_only_what_changed(
        server: OpenAIServer, tmp_path: Path) -> None:
    store = tmp_path / "judge.db"
    items = rollouts(12)
    scores, usage = run(rubric(server, store), items)
    assert server.billed == 12
    assert server.asked == [["helpful", "tidy"]] * 12
    prompt = server.bodies[0]["messages"][0]["content"]
    assert scores[0].components == {"helpful": default_grade("helpful", prompt),
                                    "tidy": default_grade("tidy", prompt)}
    assert all(s.status is Status.OK for s in scores)
    assert usage["calls"] == 12 and usage["replayed"] == 0 and usage["tokens_in"] > 0

    again, usage = run(rubric(server, store, extra={"weights": {"tidy": 3.0}}), items)
    assert server.billed == 12 and usage["calls"] == 0 and usage["replayed"] == 24
    assert [s.components for s in again] == [s.components for s in scores]
    assert [s.reward for s in again] == [s.components["helpful"] + 3 * s.components["tidy"]  # type: ignore[operator]
                                         for s in again]

    criteria = {"helpful": "Does it help?", "tidy": "Is it concise?", "honest": "Is it true?"}
    _, usage = run(rubric(server, store, criteria=criteria), items)
    assert server.billed == 24 and server.asked[12:] == [["honest"]] * 12
    assert usage["replayed"] == 24

    criteria["tidy"] = "Is it short and clear?"
    _, usage = run(rubric(server, store, criteria=criteria), items)
    assert server.billed == 36 and server.asked[24:] == [["tidy"]] * 12
    assert usage == {**usage, "calls": 12, "replayed": 24}


def test_duplicate_content_in_one_batch_is_one_call(server: OpenAIServer, tmp_path: Path) -> None:
    same = [Rollout(f"r{i}", "g", "p", "c") for i in range(5)]
    scores, usage = run(rubric(server, tmp_path / "j.db"), same)
    assert server.billed == 1 and usage["calls"] == 1
    assert len({tuple(s.components.items()) for s in scores}) == 1


def test_retries_5xx_and_dropped_connections(server: OpenAIServer, tmp_path: Path) -> None:
    server.inject(Fault.status_code(500), Fault.status_code(503), Fault.drop())
    scores, usage = run(rubric(server, tmp_path / "j.db"), rollouts(1))
    assert scores[0].status is Status.OK
    assert server.requests == 4 and server.billed == 1
    assert usage["retries"] == 3 and usage["calls"] == 1 and usage["failed"] == 0


@pytest.mark.parametrize(("fault", "at_least"), [
    (Fault.status_code(429, retry_after="1"), 1.0),
    (Fault.status_code(429, retry_after_ms="300"), 0.3),
    (Fault.status_code(503, retry_after="0.4"), 0.4),
])
def test_retry_after_is_honoured(server: OpenAIServer, tmp_path: Path, fault: Fault,
                                 at_least: float) -> None:
    server.inject(fault)
    scores, usage = run(rubric(server, tmp_path / "j.db"), rollouts(1))
    assert scores[0].status is Status.OK and usage["retries"] == 1
    first, second = server.request_times
    assert second - first >= at_least * 0.98


def test_timeout_is_retried(server: OpenAIServer, tmp_path: Path) -> None:
    server.inject(Fault.slow(3.0))
    started = time.monotonic()
    scores, usage = run(rubric(server, tmp_path / "j.db", timeout=0.3), rollouts(1))
    assert scores[0].status is Status.OK and usage["retries"] == 1
    assert time.monotonic() - started < 2.5  # did not wait for the slow reply


def test_retries_run_out(server: OpenAIServer, tmp_path: Path) -> None:
    server.inject(*[Fault.status_code(500)] * 3)
    scores, usage = run(rubric(server, tmp_path / "j.db", retries=2), rollouts(1))
    assert scores[0].status is Status.ERROR and scores[0].reward is None
    assert "after 3 attempt(s): HTTP 500" in scores[0].errors["helpful"]
    assert server.requests == 3 and usage["failed"] == 1


@pytest.mark.parametrize(("style", "helpful_ok", "tidy_ok", "message"), [
    ("prose", True, True, None),
    ("no_usage", True, True, None),
    ("malformed", False, False, "holds no JSON object"),
    ("out_of_range", False, True, "outside its range [0, 1]"),
    ("not_completion", False, False, "not a chat completion"),
])
def test_reply_shapes(server: OpenAIServer, tmp_path: Path, style: str, helpful_ok: bool,
                      tidy_ok: bool, message: str | None) -> None:
    server.inject(Fault.reply(style))
    store = tmp_path / "j.db"
    scores, usage = run(rubric(server, store), rollouts(1))
    score = scores[0]
    assert (score.components["helpful"] is not None) == helpful_ok
    assert (score.components["tidy"] is not None) == tidy_ok
    if style != "not_completion":  # tokens are estimated when the reply has no usage
        assert usage["tokens_in"] > 0 and usage["tokens_out"] > 0
    if message is None:
        assert score.status is Status.OK
        return
    assert score.status is Status.ERROR and score.reward is None  # masked, never a silent 0
    assert message in score.errors["helpful"]
    with sqlite3.connect(store) as db:
        status, reply = db.execute("SELECT status, reply FROM judge_calls").fetchone()
    assert status == "failed" and reply  # the raw reply is kept for inspection
    # A failure is not replayed: the next run asks again (for what failed only).
    scores, usage = run(rubric(server, store), rollouts(1))
    assert scores[0].status is Status.OK and server.billed == 2
    assert server.asked[1] == (["helpful", "tidy"] if not tidy_ok else ["helpful"])


def test_api_key_is_sent_but_never_stored_or_shown(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-5b1e0c9d7f"
    monkeypatch.setenv("JUDGE_TEST_KEY", secret)
    store = tmp_path / "j.db"
    with OpenAIServer(models=[MODEL], api_key=secret) as server:
        server.inject(Fault.status_code(400, echo_auth=True))
        scores, usage = run(rubric(server, store, api_key_env="JUDGE_TEST_KEY"), rollouts(3))
        assert server.auth_headers[0] == f"Bearer {secret}"
    failed = [s for s in scores if s.status is Status.ERROR]
    assert len(failed) == 1 and "[api key]" in failed[0].errors["helpful"]
    assert usage["retries"] == 0  # a 400 is not retried
    assert all(secret not in repr(s) for s in scores)
    for path in tmp_path.iterdir():
        assert secret.encode() not in path.read_bytes(), path


def test_budget_stops_calling_and_names_itself(server: OpenAIServer, tmp_path: Path) -> None:
    scores, usage = run(rubric(server, tmp_path / "j.db", budget={"max_calls": 3}), rollouts(10))
    assert server.billed == 3
    unscored = [s for s in scores if s.status is Status.ERROR]
    assert len(unscored) == 7
    assert "budget spent (max_calls=3); not scored" in unscored[0].errors["tidy"]
    assert usage["unscored"] == 14 and usage["budget_exhausted"] == 1


def test_cost_budget(server: OpenAIServer, tmp_path: Path) -> None:
    scores, usage = run(rubric(server, tmp_path / "j.db", max_concurrency=1,
                               price_per_million_input=1e6, budget={"max_cost": 200}),
                        rollouts(10))
    calls, cost = usage["calls"], usage["cost"]  # one dollar per input token: ~60 a call
    assert 1 < calls < 10 and usage["budget_exhausted"] == 1
    assert cost >= 200 > cost * (calls - 1) / calls  # stops at the first call past the budget
    assert sum(s.status is Status.OK for s in scores) == calls == server.billed


def test_request_rate_limit(server: OpenAIServer, tmp_path: Path) -> None:
    started = time.monotonic()
    run(rubric(server, tmp_path / "j.db", requests_per_minute=1200), rollouts(30))
    # 20 at once (one second's worth), then 20 a second for the other 10
    assert time.monotonic() - started >= 0.45
    assert server.billed == 30


def test_missing_metadata_key_fails_that_rollout_only(server: OpenAIServer,
                                                      tmp_path: Path) -> None:
    items = [Rollout("a", "g", "p", "c", metadata={"topic": "math"}), Rollout("b", "g", "p", "c")]
    scores, _ = run(rubric(server, tmp_path / "j.db", template="{topic}: {completion}"), items)
    assert scores[0].status is Status.OK
    assert "no metadata key 'topic'" in scores[1].errors["helpful"]
    assert server.billed == 1


def test_verifier_and_judge_stay_separate_components(server: OpenAIServer,
                                                     tmp_path: Path) -> None:
    judge = rubric(server, tmp_path / "j.db").components
    both = Rubric.from_dict({"components": {
        "correct": {"reward": "gsm8k"},
        "quality": {"judge": {"base_url": server.base_url, "model": MODEL,
                              "store": str(tmp_path / "j.db"), "template": "{completion}",
                              "criteria": {"helpful": "Helps?", "tidy": "Concise?"}},
                    "weights": {"helpful": 0.5, "tidy": 0.25}}}})
    assert [c.name for c in both.components] == ["correct", "helpful", "tidy"] == [
        "correct", *[c.name for c in judge]]
    items = [Rollout("right", "g", "1+1?", "#### 2", "2"), Rollout("wrong", "g", "1+1?", "#### 3", "2")]
    with Engine(both, workers=0) as engine:
        engine.check()
        right, wrong = engine.score(items)
    assert right.components["correct"] == 1.0 and wrong.components["correct"] == 0.0
    for score in (right, wrong):
        values = score.components
        assert score.reward == pytest.approx(values["correct"] + 0.5 * values["helpful"]  # type: ignore[operator]
                                             + 0.25 * values["tidy"])  # type: ignore[operator]


# ---------------------------------------------------------------- the check before scoring


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def check(rubric: Rubric) -> None:
    with Engine(rubric, workers=0) as engine:
        engine.check()


def test_check_fails_fast_when_unreachable(tmp_path: Path) -> None:
    config = {"base_url": f"http://127.0.0.1:{closed_port()}/v1", "model": MODEL,
              "template": "{completion}", "criteria": {"ok": "ok?"}, "store": str(tmp_path / "j.db")}
    started = time.monotonic()
    with pytest.raises(JudgeError, match="cannot reach the judge endpoint"):
        check(Rubric.from_dict({"components": {"q": {"judge": config}}}))
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(("model", "list_models", "message"), [
    ("judge-2099-01-01", True, "is not served by .*; it serves: .*judge-2024-01-01"),
    ("gpt-x", True, "alias that moves; give an exact snapshot such as 'gpt-x-2024-05-13'"),
    ("judge-2099-01-01", False, "does not serve model 'judge-2099-01-01': HTTP 404"),
])
def test_check_names_a_missing_model(tmp_path: Path, model: str, list_models: bool,
                                     message: str) -> None:
    with OpenAIServer(models=[MODEL, "gpt-x", "gpt-x-2024-05-13"],
                      list_models=list_models) as server:
        with pytest.raises(JudgeError, match=message):
            check(rubric(server, tmp_path / "j.db", model=model))
        check(rubric(server, tmp_path / "j.db", model="gpt-x", allow_alias=True))
        check(rubric(server, tmp_path / "j.db"))  # probes when /models is missing
        assert server.billed == (0 if list_models else 2)


def test_check_reports_a_rejected_or_missing_key(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIServer(models=[MODEL], api_key="right-key") as server:
        with pytest.raises(JudgeError, match=r"JUDGE_TEST_KEY \(api_key_env\) is not set"):
            check(rubric(server, tmp_path / "j.db", api_key_env="JUDGE_TEST_KEY"))
        monkeypatch.setenv("JUDGE_TEST_KEY", "wrong-key")
        with pytest.raises(JudgeError, match=r"rejected the key in \$JUDGE_TEST_KEY \(HTTP 401\)"):
            check(rubric(server, tmp_path / "j.db", api_key_env="JUDGE_TEST_KEY"))
