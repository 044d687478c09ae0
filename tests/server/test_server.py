"""The reward server's routes, served by a real uvicorn on 127.0.0.1 and called over HTTP."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from importlib import resources
from typing import Any

import httpx
import pytest

from rewardsmith import Component, ComponentResult, Rollout, Rubric
from rewardsmith.advantages import compute_advantages
from rewardsmith.server import ServerConfig, ServerThread


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    data = resources.files("rewardsmith") / "data"
    with resources.as_file(data / "demo_rubric.yaml") as path:
        rubric = Rubric.from_yaml(path)
    config = ServerConfig(rubric, port=0, workers=1, log_level="warning")
    with ServerThread(config) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        yield http


def rollout(completion: str, *, group: str | None = "q1", answer: str = "72", **extra: Any
            ) -> dict[str, Any]:
    row: dict[str, Any] = {"prompt": "How many clips?", "completion": completion,
                           "answer": answer, **extra}
    if group is not None:
        row["group"] = group
    return row


def test_score_flat_batch_groups_by_label_with_advantages(client: httpx.Client) -> None:
    body = {"rollouts": [
        rollout("#### 72", id="a"), rollout("#### 71", id="b", group="q2"),
        rollout("72", id="c"), rollout("", id="d", group="q2", finish_reason="length"),
    ]}
    reply = client.post("/score", json=body)
    assert reply.status_code == 200, reply.text
    data = reply.json()
    assert data["rubric"] == "gsm8k-demo" and data["groups"] == 2
    assert data["counts"] == {"ok": 4, "error": 0, "timeout": 0, "masked": 0}
    scores = data["scores"]
    assert [s["id"] for s in scores] == ["a", "c", "b", "d"]  # groups flattened in order
    assert [s["reward"] for s in scores] == [1.25, 1.0, 0.25, -0.5]
    assert scores[0]["components"] == {"correct": 1.0, "format": 1.0, "overlong": 0.0}
    expected = compute_advantages([1.25, 1.0, 0.25, -0.5], ["q1", "q1", "q2", "q2"])
    assert [s["advantage"] for s in scores] == expected


def test_score_whole_groups_trainer_convention_and_exact_zero(client: httpx.Client) -> None:
    body = {"groups": [[rollout("#### 72", group=None)] * 3,
                       [rollout("#### 72", group=None), rollout("#### 70", group=None)]],
            "trainer": "trl"}
    data = client.post("/score", json=body).json()
    assert [s["group"] for s in data["scores"]] == ["0", "0", "0", "1", "1"]
    advantages = [s["advantage"] for s in data["scores"]]
    assert advantages[:3] == [0.0, 0.0, 0.0]  # a group that teaches nothing: exactly 0
    assert advantages[3:] == compute_advantages([1.25, 0.25], ["g", "g"], trainer="trl")
    plain = client.post("/score", json={**body, "advantages": False}).json()
    assert all(s["advantage"] is None for s in plain["scores"])


def test_score_chat_messages_and_aliases(client: httpx.Client) -> None:
    body = {"rollouts": [{
        "prompt": [{"role": "user", "content": "How many?"}],
        "response": [{"role": "assistant", "content": [{"type": "text", "text": "#### 72"}]}],
        "label": "72", "group_id": 5, "extra_field": "kept as metadata"}]}
    data = client.post("/score", json=body).json()
    assert data["scores"][0]["reward"] == 1.25 and data["scores"][0]["group"] == "5"


def test_group_aliases_are_typed_in_the_schema_and_checked(client: httpx.Client) -> None:
    # The aliases of group are fields of the schema, typed as group is: an object there is a
    # 422 that the schema announces, not a surprise to a client that follows the schema.
    schema = client.get("/openapi.json").json()["components"]["schemas"]["RolloutIn"]
    for alias in ("group_id", "prompt_id", "group_index"):
        types = {branch.get("type") for branch in schema["properties"][alias]["anyOf"]}
        assert types == {"string", "integer", "null"}, alias
        reply = client.post("/score", json={"rollouts": [rollout("#### 72", group=None,
                                                                 **{alias: {"a": 1}})]})
        assert reply.status_code == 422 and alias in reply.text
    grouped = client.post("/score", json={"rollouts": [
        rollout("#### 72", group=None, group_index=3), rollout("#### 7", group=None,
                                                               prompt_id="p")]}).json()
    assert [s["group"] for s in grouped["scores"]] == ["3", "p"]


def test_score_bad_rollouts_are_422_naming_the_place(client: httpx.Client) -> None:
    reply = client.post("/score", json={"rollouts": [rollout("ok"), {"prompt": "no completion"}]})
    assert reply.status_code == 422
    detail = reply.json()["detail"]
    assert detail[0]["loc"][:3] == ["body", "rollouts", 1]
    assert "completion" in detail[0]["msg"]
    reply = client.post("/score", json={"rollouts": [rollout("x", metadata=[1])]})
    assert reply.status_code == 422
    bodies: list[dict[str, Any]] = [{"rollouts": []}, {"groups": [[]]}, {},
                                    {"rollouts": [], "groups": []}]
    for body in bodies:
        assert client.post("/score", json=body).status_code == 422, body
    assert client.post("/score", content=b"{not json", headers={
        "content-type": "application/json"}).status_code == 422


def test_openrlhf_route(client: httpx.Client) -> None:
    body = {"query": ["Q: clips? A: #### 72", "Q: clips? A: 70"], "prompts": ["Q: clips? A:"] * 2,
            "labels": ["72", "72"]}
    for path in ("/get_reward", "/openrlhf"):
        data = client.post(path, json=body).json()
        assert data["rewards"] == [1.25, 0.0] and data["scores"] == [1.25, 0.0]
        assert data["extra_logs"]["acc"] == [1.0, 0.0]
        assert data["extra_logs"]["masked"] == [0.0, 0.0]
    reply = client.post("/get_reward", json={"query": ["a"], "labels": ["1", "2"]})
    assert reply.status_code == 422 and "2 labels for 1 queries" in reply.text


def test_slime_remote_rm_route(client: httpx.Client) -> None:
    body = {"prompt": "How many?", "response": "#### 72", "label": "72"}
    assert client.post("/slime", json=body).json() == 1.25  # what remote_rm returns as reward
    detail = client.post("/slime", params={"detail": "true"}, json=body).json()
    assert detail == {"reward": 1.25, "masked": 0.0, "acc": 1.0, "status": "ok",
                      "correct": 1.0, "format": 1.0, "overlong": 0.0}
    assert client.post("/slime", json={"prompt": "x"}).status_code == 422


def test_health_metrics_and_openapi(client: httpx.Client) -> None:
    client.post("/score", json={"rollouts": [rollout("#### 72")]})
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["components"] == ["correct", "format", "overlong"]
    assert health["in_flight"] == 0
    metrics = client.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    assert 'rewardsmith_http_requests_total{code="200",method="POST",route="/score"}' in text
    assert 'rewardsmith_rollouts_scored_total{status="ok"}' in text
    assert "rewardsmith_http_request_duration_seconds_bucket" in text
    assert "rewardsmith_rollouts_in_flight 0.0" in text
    assert "# TYPE rewardsmith_judge_calls gauge" in text
    schema = client.get("/openapi.json").json()
    assert {"/score", "/get_reward", "/openrlhf", "/slime", "/health", "/metrics"} <= set(
        schema["paths"])
    score_op = schema["paths"]["/score"]["post"]
    assert {"200", "401", "413", "422", "429", "504"} <= set(score_op["responses"])


def test_trainer_names_in_the_schema_match_the_advantage_conventions() -> None:
    from typing import get_args

    from rewardsmith.advantages import CONVENTIONS
    from rewardsmith.server._models import ScoreRequest

    annotation = ScoreRequest.model_fields["trainer"].annotation
    names = {arg for option in get_args(annotation) for arg in get_args(option)}
    assert names == set(CONVENTIONS)


class CountingJudge:
    """An evaluator (the protocol judges implement) that reports its usage like a judge client."""

    def __init__(self) -> None:
        self.calls = 0

    def identity(self) -> str:
        return "counting-judge-v1"

    async def evaluate(self, rollouts: Sequence[Rollout]) -> list[ComponentResult]:
        self.calls += len(rollouts)
        return [ComponentResult(0.5) for _ in rollouts]

    def usage_key(self) -> str:
        return "local-judge"

    def usage(self) -> dict[str, float]:
        return {"calls": float(self.calls), "cost_usd": 0.25 * self.calls, "tokens": 7.0}


def test_judge_calls_and_cost_in_metrics() -> None:
    rubric = Rubric([Component("judge", evaluator=CountingJudge())], name="judged")
    config = ServerConfig(rubric, port=0, workers=0, log_level="warning")
    with ServerThread(config) as server, httpx.Client(base_url=server.url) as http:
        reply = http.post("/score", json={"rollouts": [rollout("a"), rollout("b")]})
        assert [s["reward"] for s in reply.json()["scores"]] == [0.5, 0.5]
        text = http.get("/metrics").text
    assert 'rewardsmith_judge_calls{client="local-judge"} 2.0' in text
    assert 'rewardsmith_judge_cost_usd{client="local-judge"} 0.5' in text
    assert 'rewardsmith_judge_usage{client="local-judge",field="tokens"} 7.0' in text
