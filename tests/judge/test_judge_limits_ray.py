"""Judge limits shared by a whole Ray job: four rank actors of one job, each scoring with its
own engine against one real HTTP server on 127.0.0.1, share one limiter actor. The local
cluster is this module's own (private temp dir); only what it started is stopped."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from support.counting_server import CountingServer
from support.limits_worker import Rank

ray = pytest.importorskip("ray")
SUPPORT = str(Path(__file__).parent.parent)

pytestmark = pytest.mark.slow  # a local cluster and four actor processes: about 30 s here
MODEL = "judge-2024-01-01"


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    if ray.is_initialized():
        pytest.skip("a Ray cluster is already connected in this process")
    folder = tempfile.mkdtemp(prefix="rs-lim-", dir="/tmp")  # short: Ray's socket paths
    # HOME stays as it is: a cluster started earlier in this process keeps Ray's token
    # authentication on, and its token is in ~/.ray (another HOME: the new GCS cannot start).
    # The rank actors import tests/support (not installed): put it on the workers' path.
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, _temp_dir=folder,
             runtime_env={"env_vars": {"PYTHONPATH": SUPPORT}})
    try:
        yield
    finally:
        ray.shutdown()  # only the processes this init started
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def server() -> Iterator[CountingServer]:
    with CountingServer(models=[MODEL]) as running:
        yield running


def spec(server: CountingServer, store: Path, prefix: str, count: int,
         judge: dict[str, Any]) -> dict[str, Any]:
    return {"base_url": server.base_url, "store": str(store), "prefix": prefix, "count": count,
            "judge": judge}


def ranks(n: int) -> list[Any]:
    actor = ray.remote(num_cpus=0)(Rank)
    return [actor.remote() for _ in range(n)]


def wait_until(condition: Callable[[], bool], what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def test_concurrency_and_budget_hold_across_the_ranks_of_a_job(
        cluster: None, server: CountingServer, tmp_path: Path) -> None:
    server.latency = 0.05
    group = ranks(4)
    # Each rank has its own store file: the job's actor, not a shared file, holds the limits.
    results = ray.get([rank.score.remote(spec(server, tmp_path / f"r{n}.db", f"p{n}", 12,
                                              {"max_concurrency": 3}))
                       for n, rank in enumerate(group)], timeout=120)
    assert all(s == "ok" for r in results for s in r["statuses"])
    assert server.max_in_flight == 3 and server.billed == 48
    assert not list(tmp_path.glob("*-limits"))  # the store scope was not used

    billed = server.billed
    results = ray.get([rank.score.remote(spec(server, tmp_path / f"b{n}.db", f"b{n}", 8,
                                              {"budget": {"max_calls": 10}}))
                       for n, rank in enumerate(group)], timeout=120)
    assert server.billed - billed == 10
    assert sum(r["usage"]["calls"] for r in results) == 10
    for rank in group:
        ray.kill(rank)


def test_a_killed_rank_gives_its_slots_back(cluster: None, server: CountingServer,
                                            tmp_path: Path) -> None:
    first, second = ranks(2)
    judge = {"max_concurrency": 2}
    server.hold_after(0)
    stuck = first.score.remote(spec(server, tmp_path / "a.db", "a", 6, judge))
    wait_until(lambda: server.held == 2, "the first rank to hold both slots")
    ray.kill(first)  # its process ends at once, both slots still taken
    server.release(drop=True)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(stuck, timeout=60)
    began = time.monotonic()
    result = ray.get(second.score.remote(spec(server, tmp_path / "b.db", "b", 6, judge)),
                     timeout=60)
    assert result["statuses"] == ["ok"] * 6
    assert time.monotonic() - began < 20
    assert server.max_in_flight <= 2
    ray.kill(second)
