"""``reward_model:`` against the local server's vLLM (/score, /classify) and OpenRLHF
(/get_reward) routes: request shapes, one request per group, paid once across reruns."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import Engine, Rollout, Rubric, RubricError, Score, Status
from support.openai_server import Fault, OpenAIServer

MODEL = "Skywork-Reward-8B"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(models=[MODEL]) as running:
        yield running


def root(server: OpenAIServer) -> str:
    return f"http://127.0.0.1:{server.port}"


def rubric(server: OpenAIServer, store: Path, **config: Any) -> Rubric:
    return Rubric.from_dict({"components": {"rm": {"reward_model": {
        "base_url": root(server), "store": str(store), **config}}}})


def rollouts(groups: int, size: int) -> list[Rollout]:
    return [Rollout(f"r{g}-{i}", f"g{g}", f"Say {g}.", f"{g} and {i}")
            for g in range(groups) for i in range(size)]


def run(rubric: Rubric, items: list[Rollout]) -> tuple[list[Score], dict[str, float]]:
    with Engine(rubric, workers=0) as engine:
        engine.check()
        return engine.score(items), engine.usage()["reward_model:rm"]


@pytest.mark.parametrize("api", ["vllm_score", "vllm_classify", "openrlhf"])
def test_one_request_per_group_then_replayed(server: OpenAIServer, tmp_path: Path,
                                             api: str) -> None:
    store = tmp_path / "rm.db"
    config: dict[str, Any] = {"api": api, "model": MODEL}
    if api == "vllm_classify":
        config["class_index"] = 1
    items = rollouts(3, 4)
    scores, usage = run(rubric(server, store, **config), items)
    assert server.billed == 3 and server.reward_batches == [4, 4, 4] and usage["calls"] == 3
    assert all(s.status is Status.OK for s in scores)
    for item, result in zip(items, scores, strict=True):
        expected = server.reward(f"{item.prompt}\n{item.completion}")
        assert result.components["rm"] == pytest.approx(expected)
    body = server.bodies[0]
    if api == "vllm_score":
        assert body["model"] == MODEL and len(body["text_1"]) == len(body["text_2"]) == 4
        assert body["text_1"][0] == "Say 0." and body["text_2"][0] == "0 and 0"
    elif api == "vllm_classify":
        assert body["model"] == MODEL and body["input"][0] == "Say 0.\n0 and 0"
    else:
        assert body["query"][0] == "Say 0.\n0 and 0" and body["prompts"][0] == "Say 0."

    _, usage = run(rubric(server, store, **config), items)
    assert server.billed == 3 and usage["calls"] == 0 and usage["replayed"] == 12


def test_a_server_error_is_retried(server: OpenAIServer, tmp_path: Path) -> None:
    server.inject(Fault.status_code(503))
    scores, usage = run(rubric(server, tmp_path / "rm.db", api="openrlhf", retries=2,
                               retry_backoff=0.01), rollouts(1, 2))
    assert usage["retries"] == 1 and all(s.status is Status.OK for s in scores)


def test_a_bad_config_names_the_key(server: OpenAIServer, tmp_path: Path) -> None:
    with pytest.raises(RubricError, match="needs model"):
        rubric(server, tmp_path / "rm.db", api="vllm_score")
    with pytest.raises(RubricError, match="api"):
        rubric(server, tmp_path / "rm.db", api="triton", model=MODEL)


def test_classify_with_several_classes_needs_class_index(server: OpenAIServer,
                                                          tmp_path: Path) -> None:
    scores, usage = run(rubric(server, tmp_path / "rm.db", api="vllm_classify", model=MODEL),
                        rollouts(1, 2))
    assert usage["failed"] == 1
    assert all("class_index" in (s.errors.get("rm") or "") for s in scores)


def test_a_model_not_served_fails_the_check(server: OpenAIServer, tmp_path: Path) -> None:
    from rewardsmith import JudgeError

    with Engine(rubric(server, tmp_path / "rm.db", api="vllm_score", model="other"),
                workers=0) as engine, pytest.raises(JudgeError, match="not served"):
        engine.check()


def test_a_request_refused_is_an_error_for_the_group(server: OpenAIServer,
                                                     tmp_path: Path) -> None:
    server.inject(Fault.status_code(400))
    scores, usage = run(rubric(server, tmp_path / "rm.db", api="openrlhf"), rollouts(1, 2))
    assert usage["failed"] == 1
    assert all("request failed: HTTP 400" in (s.errors.get("rm") or "") for s in scores)


def test_the_budget_stops_requests_cleanly(server: OpenAIServer, tmp_path: Path) -> None:
    scores, usage = run(rubric(server, tmp_path / "rm.db", api="openrlhf", max_concurrency=1,
                               budget={"max_calls": 2}), rollouts(4, 2))
    assert server.billed == 2 and usage["calls"] == 2 and usage["unscored"] == 4
    assert sum(s.status is Status.OK for s in scores) == 4
    assert all("budget spent (max_calls=2)" in (s.errors.get("rm") or "") for s in scores
               if s.status is not Status.OK)
