"""Ray: a dead node is not a lost run.

``kill -9`` of a node's actor (here: the only node's, on a local cluster this module starts)
used to end the run with ``ActorDiedError``, exit 1 and nothing written. The parts of a batch
that the dead actor had not answered are sent again (to a fresh actor on the node, which is
still alive), the parts it had answered are kept, and the run finishes with every rollout
scored.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from rewardsmith import Component, Engine, Rollout, Rubric, Status
from rewardsmith.engine import ray_backend

ray = pytest.importorskip("ray")

REWARDS = Path(__file__).parent / "fixtures" / "long_run_rewards.py"


@pytest.fixture
def cluster() -> Iterator[None]:
    if ray.is_initialized():
        pytest.skip("a Ray cluster is already connected in this process")
    folder = tempfile.mkdtemp(prefix="rs-raydeath-", dir="/tmp")  # short: Ray's socket paths
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=folder)
    try:
        yield
    finally:
        ray.shutdown()  # only the processes this init started
        shutil.rmtree(folder, ignore_errors=True)


def node_actor_pids() -> list[int]:
    """The processes of this cluster's node actors (Ray names them after the class)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                command = handle.read()
        except OSError:
            continue
        if command.startswith(b"ray::_NodePool"):
            pids.append(int(entry))
    return pids


def done_calls(log: Path) -> Counter[str]:
    if not log.exists():
        return Counter()
    return Counter(line.split(" ", 1)[1] for line in log.read_text().splitlines())


@pytest.mark.slow
def test_a_killed_node_actor_costs_only_the_parts_it_had_not_answered(
        cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_backend, "_PART_CALLS", 20)
    log = tmp_path / "calls.log"
    rubric = Rubric([Component("a", f"{REWARDS}:logged",
                               params={"calls_log": str(log), "seconds": 0.02})])
    rollouts = [Rollout(str(i), f"g{i // 4}", "p", f"r{i}", None) for i in range(200)]
    with Engine(rubric, workers=1, backend="ray") as engine:
        engine.score(rollouts[:1])  # the cluster's actor started, the reward loaded
        log.unlink()
        killed: list[int] = []

        def kill_when_half_done() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and sum(done_calls(log).values()) < 70:
                time.sleep(0.01)
            for pid in node_actor_pids():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

        killer = threading.Thread(target=kill_when_half_done)
        killer.start()
        scores = engine.score(rollouts)
        killer.join()
        executor = engine._executor_for_work()
        retried = executor.retried  # type: ignore[attr-defined]
    assert killed, "no node actor was found to kill"
    assert [s.status for s in scores] == [Status.OK] * 200
    assert [s.id for s in scores] == [r.id for r in rollouts]
    assert retried >= 1
    counts = done_calls(log)
    assert set(counts) == {r.completion for r in rollouts}
    # Only the part running when the actor died ran again (at most 20 calls); every part
    # answered before is kept.
    assert sum(1 for n in counts.values() if n > 1) <= 20, counts
    assert max(counts.values()) <= 2


@pytest.mark.slow
def test_a_node_whose_processes_are_killed_leaves_its_parts_to_the_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if ray.is_initialized():
        pytest.skip("a Ray cluster is already connected in this process")
    from ray.cluster_utils import Cluster

    monkeypatch.setattr(ray_backend, "_PART_CALLS", 20)
    folder = tempfile.mkdtemp(prefix="rs-raynode-", dir="/tmp")
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "temp_dir": folder,
        "_system_config": {"health_check_period_ms": 500,
                           "health_check_failure_threshold": 3}})
    doomed = cluster.add_node(num_cpus=1)
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        log = tmp_path / "calls.log"
        rubric = Rubric([Component("a", f"{REWARDS}:logged",
                                   params={"calls_log": str(log), "seconds": 0.02})])
        rollouts = [Rollout(str(i), f"g{i // 4}", "p", f"r{i}", None) for i in range(300)]
        with Engine(rubric, workers=1, backend="ray") as engine:
            engine.score(rollouts[:1])
            log.unlink()

            def kill_when_started() -> None:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and sum(done_calls(log).values()) < 60:
                    time.sleep(0.01)
                cluster.remove_node(doomed, allow_graceful=False)  # kill -9, raylet included

            killer = threading.Thread(target=kill_when_started)
            killer.start()
            scores = engine.score(rollouts)
            killer.join()
            executor = engine._executor_for_work()
            assert executor.nodes == 1  # type: ignore[attr-defined]
            assert executor.retried >= 1  # type: ignore[attr-defined]
        assert [s.status for s in scores] == [Status.OK] * 300
        counts = done_calls(log)
        assert set(counts) == {r.completion for r in rollouts}
        assert sum(1 for n in counts.values() if n > 1) <= 20, counts
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]
        shutil.rmtree(folder, ignore_errors=True)
