"""Which scope a judge's limits hold in, and the parts that need no second process: a judge
without limits never opens the limits file; two engines of one process share the store's
limits; a run whose event loop ended gives its slots back; the shared bucket's arithmetic."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import ConfigError, Engine, JudgeError, Rollout, Rubric, Status
from rewardsmith.judge import Judge, JudgeConfig
from rewardsmith.judge.limits import Limits, LimitSettings, bucket_reserve, limits_path
from support.counting_server import CountingServer

MODEL = "judge-2024-01-01"


@pytest.fixture
def server() -> Iterator[CountingServer]:
    with CountingServer(models=[MODEL]) as running:
        yield running


def config(server: CountingServer, store: Path, **extra: Any) -> dict[str, Any]:
    return {"base_url": server.base_url, "model": MODEL, "store": str(store),
            "template": "Question: {prompt}\nAnswer: {completion}",
            "criteria": {"helpful": "Does the answer help the user?"}, **extra}


def rollouts(prefix: str, n: int) -> list[Rollout]:
    return [Rollout(f"{prefix}{i}", f"{prefix}g{i // 4}", f"{prefix} {i}?", f"#### {i}", str(i))
            for i in range(n)]


def settings(**extra: Any) -> LimitSettings:
    base = {"base_url": "http://127.0.0.1:1/v1", "model": MODEL, "template": "{completion}",
            "criteria": {"c": "d"}}
    return LimitSettings.of("k", JudgeConfig.parse({**base, **extra}))


def test_scope_follows_the_limits_a_judge_sets() -> None:
    assert settings().resolve() == "process"  # nothing set: the default 16 per process
    assert settings(max_concurrency=16).resolve() == "store"  # set, even to the default
    assert settings(requests_per_minute=60).resolve() == "store"
    assert settings(tokens_per_minute=1000).resolve() == "store"
    assert settings(budget={"max_cost": 1.0}).resolve() == "store"
    assert settings(budget={"max_cost": 1.0}, limit_scope="process").resolve() == "process"
    assert settings(limit_scope="store").resolve() == "store"
    assert not settings(budget={"max_calls": 5}).shared_concurrency


def test_a_bad_scope_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="limit_scope"):
        Judge("q", {"base_url": "http://127.0.0.1:1/v1", "model": MODEL, "template": "{completion}",
                    "criteria": {"c": "d"}, "limit_scope": "cluster"})


def test_a_judge_without_limits_never_opens_the_limits_file(server: CountingServer,
                                                            tmp_path: Path) -> None:
    store = tmp_path / "judge.db"
    judge = Judge("quality", config(server, store))
    with Engine(Rubric(judge.components()), workers=0) as engine:
        scores = engine.score(rollouts("a", 8))
    assert all(s.status is Status.OK for s in scores)
    assert store.exists() and not Path(limits_path(str(store))).exists()


def test_limits_set_open_the_file_beside_the_store(server: CountingServer,
                                                  tmp_path: Path) -> None:
    store = tmp_path / "judge.db"
    judge = Judge("quality", config(server, store, max_concurrency=2))
    with Engine(Rubric(judge.components()), workers=0) as engine:
        engine.score(rollouts("a", 4))
    with sqlite3.connect(limits_path(str(store))) as db:
        assert db.execute("SELECT COUNT(*) FROM limit_members").fetchone()[0] == 0  # left
        assert db.execute("SELECT COUNT(*) FROM limit_state").fetchone()[0] == 1


def test_ray_scope_without_ray_fails_the_check(server: CountingServer, tmp_path: Path) -> None:
    ray = __import__("sys").modules.get("ray")
    if ray is not None and ray.is_initialized():
        pytest.skip("this process is connected to Ray")
    judge = Judge("quality", config(server, tmp_path / "j.db", limit_scope="ray"))
    with Engine(Rubric(judge.components()), workers=0) as engine:
        with pytest.raises(JudgeError, match="limit_scope: ray needs"):
            engine.check()


def test_two_engines_in_one_process_share_the_limit(server: CountingServer,
                                                    tmp_path: Path) -> None:
    server.latency = 0.05
    store = tmp_path / "judge.db"
    results: dict[str, list[Status]] = {}
    errors: list[str] = []

    def score(prefix: str) -> None:
        judge = Judge("quality", config(server, store, max_concurrency=3))
        with Engine(Rubric(judge.components()), workers=0) as engine:
            scores = engine.score(rollouts(prefix, 12))
            results[prefix] = [s.status for s in scores]
            errors.extend(e for s in scores for e in s.errors.values())

    threads = [threading.Thread(target=score, args=(p,)) for p in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results["a"] == results["b"] == [Status.OK] * 12, sorted(set(errors))
    assert server.max_in_flight == 3


def test_a_run_whose_loop_ended_gives_its_slots_back(tmp_path: Path) -> None:
    store = str(tmp_path / "judge.db")
    held = Limits(settings(max_concurrency=1), store)

    async def take_and_walk_away() -> None:
        await held.open()
        await held.call().__aenter__()  # never given back: its loop ends

    asyncio.run(take_and_walk_away())
    other = Limits(settings(max_concurrency=1), store)

    async def take() -> bool:
        try:
            await asyncio.wait_for(other.call().__aenter__(), 1.0)
            return True
        except asyncio.TimeoutError:
            return False

    assert asyncio.run(take()) is False  # the slot is held by a member still listed
    held.abandon()  # what a judge does when its run's loop is found gone
    assert asyncio.run(take()) is True
    other.abandon()


def test_the_shared_bucket_matches_the_in_process_one() -> None:
    # 60 a minute: one a second, a bucket of 1. The first goes at once; the next waits.
    level, wait = bucket_reserve(1.0, 100.0, 100.0, 60.0, 1.0, 0.0)
    assert (level, wait) == (0.0, 0.0)
    level, wait = bucket_reserve(level, 100.0, 100.0, 60.0, 1.0, 0.0)
    assert wait == pytest.approx(0.001) and level == -1.0
    level, wait = bucket_reserve(level, 100.0, 100.0, 60.0, 1.0, 0.0)
    assert wait == pytest.approx(1.001)  # queued behind the one before
    # Refill is capped at the bucket's size; a debt (an estimate that was too low) is charged.
    level, wait = bucket_reserve(-2.0, 0.0, 100.0, 60.0, 1.0, 0.5)
    assert (level, wait) == (-0.5, 0.0)


def test_a_reward_models_budget_is_shared_by_two_engines(server: CountingServer,
                                                         tmp_path: Path) -> None:
    from rewardsmith.judge import RewardModel

    store = tmp_path / "rm.db"
    done: dict[str, list[Status]] = {}

    def score(prefix: str) -> None:
        model = RewardModel("rm", {"base_url": server.base_url, "api": "openrlhf",
                                   "store": str(store), "budget": {"max_calls": 3}})
        with Engine(Rubric(model.components()), workers=0) as engine:
            done[prefix] = [s.status for s in engine.score(rollouts(prefix, 16))]

    threads = [threading.Thread(target=score, args=(p,)) for p in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert server.billed == 3  # one request per group of 4: 3 of the 8 groups were paid for
    assert sum(s is Status.OK for statuses in done.values() for s in statuses) == 12
