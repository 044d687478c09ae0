"""The OpenAPI schema says what the routes enforce, and the routes enforce what it says.

``advantages`` (and ``truncated``) take only booleans; a list that may be left out may not be
``null``; the error replies a route can give (400, 408, 503 with ``Retry-After``) are declared;
``--max-batch`` is the schema's ``maxItems``; ``/get_reward`` states that prompts and labels
match the queries in number. Property-based checks of all of it are in test_server_schema.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rewardsmith import Rubric
from rewardsmith.server import ServerConfig, ServerThread

MAX_BATCH = 16
ROLLOUT = {"completion": "#### 72", "answer": "72"}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    config = ServerConfig(Rubric.single("gsm8k"), port=0, workers=0, max_batch=MAX_BATCH,
                          log_level="warning")
    with ServerThread(config) as server:
        yield server.url


@pytest.fixture(scope="module")
def schema(url: str) -> dict[str, Any]:
    document: dict[str, Any] = httpx.get(f"{url}/openapi.json").json()
    return document


@pytest.mark.parametrize("value", ["yes", "true", 1, 0, "1", None, [True]])
def test_advantages_takes_only_a_boolean(url: str, value: object) -> None:
    reply = httpx.post(f"{url}/score", json={"rollouts": [ROLLOUT], "advantages": value})
    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"][0]["loc"] == ["body", "advantages"]


@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_advantages_is_fine(url: str, value: bool) -> None:
    reply = httpx.post(f"{url}/score", json={"rollouts": [ROLLOUT], "advantages": value})
    assert reply.status_code == 200
    assert (reply.json()["scores"][0]["advantage"] is None) is (not value)


def test_truncated_takes_only_a_boolean(url: str) -> None:
    reply = httpx.post(f"{url}/score", json={"rollouts": [{**ROLLOUT, "truncated": "yes"}]})
    assert reply.status_code == 422
    assert reply.json()["detail"][0]["loc"][:4] == ["body", "rollouts", 0, "truncated"]


@pytest.mark.parametrize("body", [{"rollouts": None, "groups": [[ROLLOUT]]},
                                  {"rollouts": [ROLLOUT], "groups": None}])
def test_a_null_list_is_refused_not_taken_as_absent(url: str, body: dict[str, Any]) -> None:
    reply = httpx.post(f"{url}/score", json=body)
    assert reply.status_code == 422
    assert "not null" in reply.text


def test_the_schema_offers_lists_not_null(schema: dict[str, Any]) -> None:
    request = schema["components"]["schemas"]["ScoreRequest"]["properties"]
    for key in ("rollouts", "groups"):
        assert request[key]["type"] == "array" and "anyOf" not in request[key]
    assert request["advantages"]["type"] == "boolean"


def test_max_batch_is_the_schemas_max_items(schema: dict[str, Any], url: str) -> None:
    models = schema["components"]["schemas"]
    score = models["ScoreRequest"]["properties"]
    assert score["rollouts"]["maxItems"] == MAX_BATCH
    assert score["groups"]["maxItems"] == MAX_BATCH
    assert score["groups"]["items"]["maxItems"] == MAX_BATCH
    assert f"At most {MAX_BATCH} rollouts in all (--max-batch)" in score["groups"]["description"]
    openrlhf = models["OpenRLHFRequest"]["properties"]
    assert openrlhf["query"]["maxItems"] == MAX_BATCH
    # And the route refuses one more, as the schema says.
    reply = httpx.post(f"{url}/get_reward", json={"query": ["x"] * (MAX_BATCH + 1)})
    assert reply.status_code == 422


def test_get_reward_states_that_the_lists_match_in_length(schema: dict[str, Any],
                                                          url: str) -> None:
    openrlhf = schema["components"]["schemas"]["OpenRLHFRequest"]["properties"]
    for key in ("prompts", "labels"):
        assert "as many as there are queries (422 otherwise)" in openrlhf[key]["description"]
        reply = httpx.post(f"{url}/get_reward", json={"query": ["a", "b"], key: ["a"]})
        assert reply.status_code == 422
        assert "for 2 queries" in reply.text


@pytest.mark.parametrize("path", ["/score", "/get_reward", "/openrlhf", "/slime"])
def test_every_error_reply_a_post_route_gives_is_declared(schema: dict[str, Any],
                                                          path: str) -> None:
    responses = schema["paths"][path]["post"]["responses"]
    assert {"400", "401", "408", "413", "422", "429", "503", "504"} <= set(responses)
    for code in ("429", "503"):
        assert "Retry-After" in responses[code]["headers"]
    assert responses["400"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ErrorReply")


@pytest.mark.parametrize("path", ["/score", "/get_reward", "/slime"])
def test_a_body_that_is_not_utf8_is_the_declared_400(url: str, path: str) -> None:
    reply = httpx.post(f"{url}{path}", content=b'{"query": ["\xff"]}',
                       headers={"content-type": "application/json"})
    assert reply.status_code == 400
    assert reply.headers["content-type"] == "application/json"
    assert isinstance(reply.json()["detail"], str)


@pytest.mark.parametrize("path", ["/score", "/get_reward", "/slime"])
def test_nan_in_a_refused_body_is_a_422_not_a_500(url: str, path: str) -> None:
    # Python's JSON reader takes NaN; the 422 that echoes the input must still be JSON.
    reply = httpx.post(f"{url}{path}", content=b'{"unknown": NaN, "completion": Infinity}',
                       headers={"content-type": "application/json"})
    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"]
