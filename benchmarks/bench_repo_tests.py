"""Repository tests: the sandboxed ``repo_tests`` reward against the loop users write today.

A repository of five modules and 50 tests (one injected bug: ``median`` of an even count
takes the upper middle value; three tests fail on it). ``--diffs`` seeded diffs against it,
each different (an attempt number in a comment): the fix, two kinds of half fix, a fix that
breaks another function, a change elsewhere, and a diff that does not apply.

The peer, in the same run on the same cores, as many diffs at a time as the reward has
workers (threads): for each diff, a fresh copy of the repository (``shutil.copytree``),
``git apply``, then ``python -m pytest -rA`` in a plain subprocess with no sandbox, its
``PASSED`` lines read for the test ids. The reward runs the same diffs through the engine with
that many worker processes: a fresh bubblewrap sandbox per diff, the repository unpacked into
the sandbox's tmpfs. Both use the same Python environment and pytest with plugin autoloading
off, and must agree on every diff's fail_to_pass and pass_to_pass counts, else the benchmark
fails. The reward's time includes starting the engine's workers (each checks the sandbox and
the environment once) and recording every result in a store.

Then the same rollouts scored again against that store, and rescored under a renamed rubric:
both must run no test (no reward call), paid once.

    python benchmarks/bench_repo_tests.py [--diffs 200] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from rewardsmith import Rollout, Rubric, ScoreJob  # noqa: E402
from rewardsmith.jobs.rescore import rescore  # noqa: E402
from rewardsmith.rewards.agents.repo_tasks import RepoTask, diff_of, write_repo  # noqa: E402
from rewardsmith.sandbox.pytest_env import make_pytest_environment  # noqa: E402
from rewardsmith.store import Store  # noqa: E402

STATS_BUGGY = '''"""Order statistics."""


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle]


def spread(values):
    return max(values) - min(values)
'''
STATS_FIXED = STATS_BUGGY.replace("    return ordered[middle]\n", (
    "    if len(ordered) % 2:\n        return ordered[middle]\n"
    "    return (ordered[middle - 1] + ordered[middle]) / 2\n"))
# Fixes the two-value case only.
STATS_HALF = STATS_BUGGY.replace("    return ordered[middle]\n", (
    "    if len(ordered) == 2:\n        return (ordered[0] + ordered[1]) / 2\n"
    "    return ordered[middle]\n"))
# Averages the wrong pair.
STATS_OFF = STATS_BUGGY.replace("    return ordered[middle]\n", (
    "    if len(ordered) % 2:\n        return ordered[middle]\n"
    "    return (ordered[middle] + ordered[min(middle + 1, len(ordered) - 1)]) / 2\n"))
MODULES = {
    "arith": ("def add(a, b):\n    return a + b\n\n\ndef scale(values, k):\n"
              "    return [v * k for v in values]\n"),
    "text": ("def shout(s):\n    return s.upper() + '!'\n\n\ndef words(s):\n"
             "    return len(s.split())\n"),
    "seq": ("def pairs(values):\n    return list(zip(values, values[1:]))\n\n\n"
            "def chunks(values, n):\n    return [values[i:i + n] for i in range(0, len(values), n)]\n"),
    "geo": ("def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n"
            "    return 2 * (w + h)\n"),
}
TESTS = {
    "arith": [f"assert add({i}, {i + 1}) == {2 * i + 1}" for i in range(5)]
    + [f"assert scale([1, {i}], {i}) == [{i}, {i * i}]" for i in range(5)],
    "text": [f"assert shout('a{i}') == 'A{i}!'" for i in range(5)]
    + [f"assert words('x ' * {i + 1}) == {i + 1}" for i in range(5)],
    "seq": [f"assert pairs(list(range({i + 2}))) == [(k, k + 1) for k in range({i + 1})]"
            for i in range(5)]
    + [f"assert len(chunks(list(range(10)), {i + 1})) == {-(-10 // (i + 1))}" for i in range(5)],
    "geo": [f"assert area({i}, 3) == {3 * i}" for i in range(5)]
    + [f"assert perimeter({i}, 1) == {2 * (i + 1)}" for i in range(5)],
    # Three fail on the bug (even counts); seven pass before and after the fix.
    "stats": ["assert median([1, 3]) == 2", "assert median([4, 1, 3, 2]) == 2.5",
              "assert median([10, 20, 30, 40, 50, 60]) == 35"]
    + [f"assert median(list(range({2 * i + 1}))) == {i}" for i in range(4)]
    + [f"assert spread([{i}, {i + 5}]) == 5" for i in range(3)],
}
FAILING = {"stats": (0, 1, 2)}


def make_task() -> RepoTask:
    repo = {"pyproject.toml": '[project]\nname = "numlib"\nversion = "0.1"\n',
            "numlib/__init__.py": "", "numlib/stats.py": STATS_BUGGY}
    fail, keep = [], []
    for name, source in MODULES.items():
        repo[f"numlib/{name}.py"] = source
    for name, checks in TESTS.items():
        lines = [f"from numlib.{name} import *\n"]
        for index, check in enumerate(checks):
            lines.append(f"\n\ndef test_{name}_{index}():\n    {check}\n")
            test_id = f"tests/test_{name}.py::test_{name}_{index}"
            (fail if index in FAILING.get(name, ()) else keep).append(test_id)
        repo[f"tests/test_{name}.py"] = "".join(lines)
    assert len(fail) + len(keep) == 50
    return RepoTask("numlib", "median of an even count", repo, tuple(fail), tuple(keep), "", ())


def make_diffs(task: RepoTask, count: int, seed: int = 5) -> list[tuple[str, str]]:
    """(kind, diff) for ``count`` attempts, each different."""
    rng = random.Random(seed)
    kinds = ["fix"] * 8 + ["half"] * 4 + ["off"] * 3 + ["breaks"] * 2 + ["elsewhere"] * 2 \
        + ["no-apply"]
    out = []
    for attempt in range(count):
        kind = rng.choice(kinds)
        note = f"# attempt {attempt}\n"
        changes: dict[str, str | None] = {}
        if kind in ("fix", "half", "off"):
            changes["numlib/stats.py"] = note + {"fix": STATS_FIXED, "half": STATS_HALF,
                                                 "off": STATS_OFF}[kind]
        elif kind == "breaks":
            changes["numlib/stats.py"] = note + STATS_FIXED
            changes["numlib/geo.py"] = MODULES["geo"].replace("2 * (w + h)", "2 * w + h")
        elif kind == "elsewhere":
            changes["numlib/text.py"] = note + MODULES["text"]
        diff = diff_of(task, changes)
        if kind == "no-apply":
            diff = diff_of(task, {"numlib/stats.py": note + STATS_FIXED}).replace(
                " def median(values):", " def middle_of(values):")
        out.append((kind, diff))
    return out


def peer_one(task: RepoTask, base: str, diff: str, python: str,
             scratch: str) -> tuple[int, int] | None:
    """A fresh copy, git apply, pytest in a subprocess: (fail_to_pass, pass_to_pass) passed,
    None when the diff does not apply."""
    work = tempfile.mkdtemp(dir=scratch)
    try:
        repo = os.path.join(work, "repo")
        shutil.copytree(base, repo)
        applied = subprocess.run(["git", "apply", "-"], input=diff.encode(), cwd=repo,
                                 capture_output=True)
        if applied.returncode != 0:
            return None
        files = sorted({test_id.split("::")[0] for test_id in (*task.fail_to_pass,
                                                                *task.pass_to_pass)})
        run = subprocess.run([python, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                              *files], cwd=repo, capture_output=True, text=True, timeout=120,
                             env={"PATH": "/usr/bin:/bin", "HOME": work,
                                  "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
        passed = {line.split()[1] for line in run.stdout.splitlines()
                  if line.startswith("PASSED ")}
        return (sum(t in passed for t in task.fail_to_pass),
                sum(t in passed for t in task.pass_to_pass))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def rubric(environment: str, name: str = "repo-bench") -> Rubric:
    return Rubric.from_dict({"name": name, "components": {"tests": {
        "reward": "repo_tests", "params": {"environment": environment, "mode": "fraction"}}}})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--diffs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    task = make_task()
    diffs = make_diffs(task, args.diffs)
    scratch = tempfile.mkdtemp(prefix="rewardsmith-bench-repo-", dir="/tmp")
    os.chmod(scratch, 0o755)  # the sandbox's user reads the environment and the repository
    try:
        environment = make_pytest_environment(os.path.join(scratch, "env"))
        python = os.path.join(environment, "bin", "python3")
        base = write_repo(task, os.path.join(scratch, "base"))
        for folder, dirs, _ in os.walk(base):
            for name in dirs:
                os.chmod(os.path.join(folder, name), 0o755)
        answer: dict[str, Any] = {"repo": base, "fail_to_pass": list(task.fail_to_pass),
                                  "pass_to_pass": list(task.pass_to_pass)}
        rollouts = [Rollout(id=f"d{i}", group=f"g{i // 8}", prompt="Fix median().",
                            completion=diff, answer=answer) for i, (_, diff) in enumerate(diffs)]

        started = time.perf_counter()
        with ThreadPoolExecutor(args.workers) as pool:
            peer = list(pool.map(lambda d: peer_one(task, base, d[1], python, scratch), diffs))
        peer_seconds = time.perf_counter() - started

        db = os.path.join(scratch, "bench.db")
        first = rubric(environment)
        started = time.perf_counter()
        job = ScoreJob(first, workers=args.workers, store=db).run_rollouts(rollouts)
        reward_seconds = time.perf_counter() - started
        scores = job.scores

        started = time.perf_counter()
        again = ScoreJob(first, workers=args.workers, store=db,
                         keep_scores=False).run_rollouts(rollouts)
        again_seconds = time.perf_counter() - started
        with Store(db) as store:
            started = time.perf_counter()
            later = rubric(environment, "repo-bench-renamed")
            later.resolve()
            # The reward's code identity covers rewardsmith's files it runs: edited while the
            # benchmark ran (a working tree), stored results are rightly not reused.
            code_changed = later.components[0].identity() != first.components[0].identity()
            renamed = rescore(store, later, workers=args.workers, keep_scores=False)
            rescore_seconds = time.perf_counter() - started
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    disagree = []
    reward_runs = 0
    for (kind, _), counted, score in zip(diffs, peer, scores):
        m = score.metrics
        mine = None if m["tests.patch_failed"] else (int(m["tests.fail_to_pass_passed"]),
                                                     int(m["tests.pass_to_pass_passed"]))
        reward_runs += mine is not None
        if mine != counted or score.status.value != "ok":
            disagree.append((score.id, kind, counted, mine, score.status.value))
    counts: dict[str, int] = {}
    for kind, _ in diffs:
        counts[kind] = counts.get(kind, 0) + 1
    ratio = peer_seconds / reward_seconds
    again_calls = int(again.summary.extra["reward_calls"])
    print(f"# repo_tests benchmark: {len(diffs)} diffs against a repository with 50 tests "
          f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})\n")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs "
          f"({len(os.sched_getaffinity(0))} usable), {args.workers} at a time on both sides\n")
    print("| run | seconds | diffs/s | work |")
    print("|---|---:|---:|---:|")
    peer_runs = sum(counted is not None for counted in peer)
    print(f"| peer: fresh copy + git apply + pytest subprocess, no sandbox | {peer_seconds:.1f} | "
          f"{len(diffs) / peer_seconds:.1f} | {peer_runs} pytest runs |")
    print(f"| repo_tests reward, sandboxed (engine, store) | {reward_seconds:.1f} | "
          f"{len(diffs) / reward_seconds:.1f} | {reward_runs} pytest runs |")
    print(f"| the same rollouts again, same store | {again_seconds:.1f} | "
          f"{len(diffs) / again_seconds:.0f} | {again_calls} reward calls |")
    print(f"| rescore under a renamed rubric | {rescore_seconds:.1f} | "
          f"{len(diffs) / rescore_seconds:.0f} | {renamed.reward_calls} reward calls |")
    print(f"\nreward vs peer: {ratio:.2f}x (target >= 1.0x)")
    failed = False
    if disagree:
        print(f"the reward and the peer disagree on {len(disagree)} diffs: {disagree[:5]}",
              file=sys.stderr)
        failed = True
    if code_changed:
        print("\nrewardsmith's files changed during the run: the renamed rescore re-ran the tests, "
              "as it must")
    if again_calls or (renamed.reward_calls and not code_changed):
        print("a rescore of unchanged rollouts ran tests", file=sys.stderr)
        failed = True
    if ratio < 1.0:
        print(f"below target: {ratio:.2f}x", file=sys.stderr)
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
