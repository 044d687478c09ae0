"""Concurrent requests sharing engine calls, the direct /score route, and the shortcuts they take:
each answer must be what a request alone would get."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rewardsmith import Rubric
from rewardsmith.advantages import CONVENTIONS, compute_advantages
from rewardsmith.files.rollouts import rollout_from_dict
from rewardsmith.server import ServerConfig, ServerThread
from rewardsmith.server._models import RolloutIn
from rewardsmith.server._service import _plain_rollout, fill_advantages
from rewardsmith.types import Score

REWARDS = """
import asyncio

from rewardsmith import group_reward

async def delayed(completion, answer):
    # "<seconds> <value>": wait, then return the value.
    seconds, value = completion.split()
    await asyncio.sleep(float(seconds))
    return float(value)

@group_reward
def by_group(completions):
    return [float(len(completions))] * len(completions)
"""


@pytest.fixture(scope="module")
def reward_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path: Path = tmp_path_factory.mktemp("batching") / "batching_rewards.py"
    path.write_text(REWARDS)
    return path


@pytest.fixture(scope="module")
def url(reward_file: Path) -> Iterator[str]:
    rubric = Rubric.single(f"{reward_file}:delayed", timeout=30)
    config = ServerConfig(rubric, port=0, workers=0, log_level="warning")
    with ServerThread(config) as server:
        yield server.url


def group_body(tag: int, values: list[float], seconds: float = 0.0) -> dict[str, Any]:
    return {"groups": [[{"id": f"{tag}-{i}", "completion": f"{seconds} {value}"}
                        for i, value in enumerate(values)]]}


def metric(text: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert found is not None, name
    return float(found.group(1))


def test_concurrent_requests_share_calls_and_get_their_own_scores(url: str) -> None:
    bodies = [group_body(tag, [tag % 3, tag % 5, 1.0], seconds=0.05) for tag in range(40)]

    async def post_all() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            return await asyncio.gather(*(http.post("/score", json=body) for body in bodies))

    replies = asyncio.run(post_all())
    for tag, reply in enumerate(replies):
        assert reply.status_code == 200, reply.text
        scores = reply.json()["scores"]
        assert [s["id"] for s in scores] == [f"{tag}-{i}" for i in range(3)]
        rewards = [float(tag % 3), float(tag % 5), 1.0]
        assert [s["reward"] for s in scores] == rewards
        alone = json.loads(httpx.post(f"{url}/score", json=bodies[tag]).text)["scores"]
        assert [s["advantage"] for s in scores] == [s["advantage"] for s in alone]
    text = httpx.get(f"{url}/metrics").text
    calls = metric(text, "rewardsmith_engine_calls_total")
    requests = metric(text, "rewardsmith_engine_call_requests_total")
    assert requests >= 80 and calls < requests  # some calls carried several requests


def test_a_slow_call_does_not_hold_up_the_next_request(url: str) -> None:
    async def run() -> float:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            slow = asyncio.ensure_future(http.post("/score", json=group_body(1, [1.0], 3.0)))
            await asyncio.sleep(0.3)  # the slow call is running
            started = time.perf_counter()
            quick = await http.post("/score", json=group_body(2, [2.0]))
            took = time.perf_counter() - started
            assert quick.json()["scores"][0]["reward"] == 2.0
            assert (await slow).json()["scores"][0]["reward"] == 1.0
            return took

    assert asyncio.run(run()) < 1.5


def test_fast_route_replies_as_the_framework_did(url: str) -> None:
    body = group_body(7, [1.0, 0.0])
    for kind in ("application/json", "application/json; charset=utf-8",
                 "application/vnd.rollouts+json"):
        reply = httpx.post(f"{url}/score", content=json.dumps(body),
                           headers={"content-type": kind})
        assert reply.status_code == 200 and reply.headers["content-type"] == "application/json"
        assert reply.headers["content-length"] == str(len(reply.content))
        assert reply.content == json.dumps(reply.json(), ensure_ascii=False,
                                           separators=(",", ":")).encode()
    # Not JSON by its content type, or not valid: the framework's own replies.
    plain = httpx.post(f"{url}/score", content=json.dumps(body),
                       headers={"content-type": "text/plain"})
    assert plain.status_code == 422
    wrong = httpx.post(f"{url}/score", json={"groups": [[{"completion": 5}]]})
    assert wrong.status_code == 422
    assert wrong.json()["detail"][0]["loc"][:4] == ["body", "groups", 0, 0]


def test_group_rewards_keep_group_boundaries_across_requests(reward_file: Path) -> None:
    rubric = Rubric.single(f"{reward_file}:by_group")
    config = ServerConfig(rubric, port=0, workers=0, log_level="warning")
    sizes = [1, 2, 3, 4, 5] * 4
    with ServerThread(config) as server:
        async def post_all() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
                return await asyncio.gather(*(
                    http.post("/score", json={"groups": [
                        [{"completion": "x", "group": "same"}] * size,
                        [{"completion": "y", "group": "same"}] * (size + 1)]})
                    for size in sizes))

        replies = asyncio.run(post_all())
    for size, reply in zip(sizes, replies):
        rewards = [s["reward"] for s in reply.json()["scores"]]
        assert rewards == [float(size)] * size + [float(size + 1)] * (size + 1)


def _scores(rewards: list[float | None], tag: str) -> list[Score]:
    return [Score(f"{tag}{i}", tag, r) for i, r in enumerate(rewards)]


def _advantages(groups: list[list[Score]]) -> list[float | None]:
    return [s.advantage for group in groups for s in group]


@pytest.mark.parametrize("trainer", [None, *sorted(CONVENTIONS)])
@pytest.mark.parametrize("method", [None, "grpo", "dr_grpo", "rloo"])
def test_advantages_computed_together_equal_each_alone(trainer: str | None,
                                                       method: str | None) -> None:
    def requests() -> list[list[list[Score]]]:
        return [
            [_scores([1.0, 0.0, 0.5, None], "a"), _scores([0.3], "b")],
            [_scores([2.0, 2.0, 2.0], "c"), _scores([0.1, 1e-9, 7.25, -3.0, 0.1], "d")],
            [_scores([None, None], "e"), _scores([1e12, 1e12 + 1, 0.0], "f")],
        ]

    together = requests()
    assert fill_advantages(together, [(method, trainer)] * 3) == [None] * 3
    for index, alone in enumerate(requests()):
        assert fill_advantages([alone], [(method, trainer)]) == [None]
        assert _advantages(together[index]) == _advantages(alone)


def test_an_advantage_failure_stays_with_its_request() -> None:
    good = [_scores([1.0, 0.0], "a")]
    bad = [_scores([math.inf, 0.0], "b")]
    skipped = [_scores([1.0, 0.0], "c")]
    failures = fill_advantages([good, bad, skipped], [(None, None), (None, None), None])
    assert failures[0] is None and failures[2] is None
    assert failures[1] is not None and "advantages=false" in str(failures[1])
    assert _advantages(good) == compute_advantages([1.0, 0.0], [0, 0])
    assert _advantages(bad) == [None, None]
    assert _advantages(skipped) == [None, None]


def _by_dict(payload: dict[str, Any], label: str | None) -> Any:
    """What the server made of a rollout before the shortcut: a dict, then rollout_from_dict."""
    data = RolloutIn.model_validate(payload).model_dump(exclude_unset=True)
    if label is not None and not any(data.get(k) is not None for k in
                                     ("group", "group_id", "prompt_id", "group_index")):
        data["group"] = label
    return rollout_from_dict(data, default_id="9")


def test_plain_rollouts_equal_those_read_through_a_dict() -> None:
    absent = object()
    options: dict[str, list[Any]] = {
        "id": [absent, None, 3, "r-1"],
        "group": [absent, None, 0, "g"],
        "prompt": [absent, None, "", "What is 6 x 7?"],
        "completion": [absent, None, "#### 42"],
        "response": [absent, None, "42"],
        "answer": [absent, None, "42", 42, [1, {"a": None}]],
        "metadata": [absent, None, {"k": [1]}],
        "truncated": [absent, None, True, False],
        "finish_reason": [absent, None, "length", "stop"],
    }
    checked = 0
    for values in itertools.product(*options.values()):
        payload = {k: v for k, v in zip(options, values) if v is not absent}
        if "completion" not in payload and "response" not in payload:
            continue
        for label in (None, "5"):
            model = RolloutIn.model_validate(payload)
            plain = _plain_rollout(model, "9", label)
            assert plain is not None, payload
            assert plain == _by_dict(payload, label), payload
            checked += 1
    assert checked > 1000
    # Chat messages and extra keys (aliases, metadata) take the dict route.
    chat = RolloutIn.model_validate({"completion": [{"role": "assistant", "content": "hi"}]})
    assert _plain_rollout(chat, "0", None) is None
