"""The Ray backend against the local worker pool, in the same run.

Rollouts in groups of 16, scored by a reward of about 1 ms of CPU per call
(``ray_rewards.millisecond``) and by the ``math`` verifier on expressions that need its
symbolic checks. Rows:

- local pool: ``Engine(workers=2)``;
- Ray, one node: ``Engine(workers=2, backend="ray")`` on a local cluster of 2 CPUs;
- Ray, two nodes: a two-node cluster on this machine (``ray.cluster_utils.Cluster``), one CPU
  and one worker each: the overhead of going through the cluster.

Each setting scores the same rollouts once to warm up (workers started, rewards loaded) and
then is timed; the Ray rows report their ratio to the local pool.

    python benchmarks/bench_ray.py [--rollouts 8000]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def rollouts(count: int, kind: str) -> list[object]:
    from rewardsmith import Rollout

    rng = random.Random(3)
    out = []
    for index in range(count):
        group = str(index // 16)
        if kind == "math":
            a = rng.randint(2, 40)
            text = rng.choice([f"\\boxed{{\\frac{{{2 * a}}}{{4}}}}", f"\\boxed{{{a}/2}}",
                               f"\\boxed{{\\sqrt{{{a * a}}}/2}}", f"\\boxed{{{a + 1}/2}}"])
            out.append(Rollout(str(index), group, "p", text, f"\\frac{{{a}}}{{2}}"))
        else:
            answer = rng.randint(1, 99)
            out.append(Rollout(str(index), group, "p", f"so it is {answer}", str(answer)))
    return out


def rubric(kind: str) -> object:
    from rewardsmith import Component, Rubric

    if kind == "math":
        return Rubric([Component("math", "boxed_math")])
    return Rubric([Component("ms", f"{HERE / 'ray_rewards.py'}:millisecond")])


def timed(engine: object, items: list[object]) -> tuple[float, list[object]]:
    engine.score(items[: min(len(items), 256)])  # type: ignore[attr-defined]
    started = time.perf_counter()
    scores = engine.score(items)  # type: ignore[attr-defined]
    return time.perf_counter() - started, scores


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=8000)
    args = parser.parse_args()
    import ray
    from ray.cluster_utils import Cluster

    from rewardsmith import Engine

    rows: list[tuple[str, str, float, float]] = []
    problems: list[str] = []
    folder = tempfile.mkdtemp(prefix="rs-bench-ray-", dir="/tmp")
    try:
        for kind in ("1 ms reward", "math"):
            key = "math" if kind == "math" else "ms"
            items = rollouts(args.rollouts, key)
            with Engine(rubric(key), workers=2) as local:  # type: ignore[arg-type]
                base, expected = timed(local, items)
            rows.append((kind, "local pool, 2 workers", base, 1.0))
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                     _temp_dir=folder)
            try:
                with Engine(rubric(key), workers=2, backend="ray") as on_ray:  # type: ignore[arg-type]
                    seconds, got = timed(on_ray, items)
            finally:
                ray.shutdown()
            rows.append((kind, "Ray, 1 node x 2 workers", seconds, base / seconds))
            if [(s.reward, s.status) for s in got] != [  # type: ignore[attr-defined]
                    (s.reward, s.status) for s in expected]:  # type: ignore[attr-defined]
                problems.append(f"{kind}: Ray and the local pool disagree")
            cluster = Cluster(initialize_head=True, head_node_args={
                "num_cpus": 1, "include_dashboard": False, "temp_dir": folder})
            cluster.add_node(num_cpus=1)
            try:
                ray.init(address=cluster.address, log_to_driver=False)
                with Engine(rubric(key), workers=1, backend="ray") as two:  # type: ignore[arg-type]
                    nodes = two._executor_for_work().nodes  # type: ignore[attr-defined]
                    seconds, _ = timed(two, items)
                ray.shutdown()
            finally:
                cluster.shutdown()
            rows.append((kind, f"Ray, {nodes} nodes x 1 worker", seconds, base / seconds))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"{args.rollouts} rollouts, groups of 16, {len(os.sched_getaffinity(0))} cores")
    print()
    print("| reward | setting | seconds | rollouts/s | vs local pool |")
    print("|---|---|---:|---:|---:|")
    for kind, setting, seconds, ratio in rows:
        print(f"| {kind} | {setting} | {seconds:.2f} | {args.rollouts / seconds:,.0f} | "
              f"{ratio:.2f}x |")
    for kind in ("1 ms reward", "math"):
        ratio = next(r for k, s, _, r in rows if k == kind and s.startswith("Ray, 1 node"))
        if ratio < 0.8:
            problems.append(f"{kind}: Ray on one node at {ratio:.2f}x the local pool (< 0.8x)")
    for problem in problems:
        print(f"FAIL: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
