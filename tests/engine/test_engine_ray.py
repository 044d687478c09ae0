"""The Ray backend on a local cluster that this module starts (private temp dir) and stops.

Every guarantee of the local engine must hold: hard timeouts, crash isolation, a worker death
costing one rollout, input order, identical statuses and rewards.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rewardsmith import Component, Engine, Rollout, Rubric, Status

ray = pytest.importorskip("ray")

USER = Path(__file__).parent.parent / "fixtures" / "user_rewards.py"
FAULTY = Path(__file__).parent.parent / "faults" / "fixtures" / "faulty_rewards.py"


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    if ray.is_initialized():
        pytest.skip("a Ray cluster is already connected in this process")
    folder = tempfile.mkdtemp(prefix="rs-ray-", dir="/tmp")  # short: Ray's socket paths
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=folder)
    try:
        yield
    finally:
        ray.shutdown()  # only the processes this init started
        shutil.rmtree(folder, ignore_errors=True)


def rollouts(texts: list[str]) -> list[Rollout]:
    return [Rollout(str(i), f"g{i // 4}", "p", t, "4") for i, t in enumerate(texts)]


def test_ray_scores_like_the_local_pool_faults_included(cluster: None) -> None:
    rubric = Rubric([
        Component("crash", f"{USER}:crash_on_empty"),
        Component("hang", f"{USER}:loop_forever", timeout=1.0),
        Component("die", f"{USER}:die"),
        Component("right", "gsm8k"),
    ])
    texts = ["#### 4", "", "hang", "die", "#### 5", "fine", "#### 4", "x"] * 3
    with Engine(rubric, workers=2) as local:
        expected = local.score(rollouts(texts))
    with Engine(rubric, workers=2, backend="ray") as remote:
        got = remote.score(rollouts(texts))
        replaced = remote.workers_replaced
    assert [s.id for s in got] == [str(i) for i in range(len(texts))]  # input order
    assert [(s.status, s.reward, s.components) for s in got] == [
        (s.status, s.reward, s.components) for s in expected]
    assert {s.status for s in got} == {Status.OK, Status.ERROR, Status.TIMEOUT}
    assert replaced >= 6  # three hangs and three deaths, each costing its worker


def test_ray_runs_async_rewards_under_hard_limits_and_keeps_finished_calls(
        cluster: None, tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    rubric = Rubric([
        Component("a", f"{FAULTY}:async_faulty", timeout=1.0),
        Component("f", f"{FAULTY}:faulty", params={"calls_log": str(log)}),
    ])
    texts = [f"ok:{i}" for i in range(40)]
    texts[7] = "block:7"
    texts[20] = "segfault:20"
    with Engine(rubric, workers=2, backend="ray") as engine:
        scores = engine.score(rollouts(texts))
    assert scores[7].status is Status.TIMEOUT
    assert scores[20].status is Status.ERROR
    assert sum(s.status is Status.OK for s in scores) == 38
    started = [line.split()[1] for line in log.read_text().splitlines()
               if line.startswith("start ")]
    assert sorted(started) == sorted(texts)  # one call per rollout, the crash included


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown backend"):
        Engine(Rubric([Component("right", "gsm8k")]), backend="spark")


@pytest.mark.slow
def test_two_nodes_on_one_machine_share_the_batches(tmp_path: Path) -> None:
    if ray.is_initialized():
        pytest.skip("a Ray cluster is already connected in this process")
    from ray.cluster_utils import Cluster

    folder = tempfile.mkdtemp(prefix="rs-ray2-", dir="/tmp")
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "temp_dir": folder})
    cluster.add_node(num_cpus=1)
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        rubric = Rubric([Component("hang", f"{USER}:loop_forever", timeout=1.0),
                         Component("right", "gsm8k")])
        texts = ["#### 4", "hang", "#### 5", "x"] * 12
        with Engine(rubric, workers=1, backend="ray", batch_rollouts=32) as engine:
            executor = engine._executor_for_work()
            scores = engine.score(rollouts(texts))
            assert executor.nodes == 2  # type: ignore[attr-defined]
            busy = [n for n in executor._replaced if n]  # type: ignore[attr-defined]
        assert len(busy) == 2  # both nodes ran (and killed) hanging calls
        assert [s.status for s in scores[:4]] == [Status.OK, Status.TIMEOUT, Status.OK,
                                                  Status.OK]
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(folder, ignore_errors=True)
