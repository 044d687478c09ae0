"""Faults inside reward calls: each is stopped, reported, and costs nothing it should not.

The fault model: a call that blocks (sync or async), crashes the process, holds too much
memory, prints, or starts processes; a parent killed with SIGKILL; a reward that cannot be
loaded in a worker; a reward that fails the same way every time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from rewardsmith import Component, Engine, Rollout, Rubric, Status
from rewardsmith.errors import LoadError, SystematicFailure
from rewardsmith.workers._proctree import descendants

FAULTY = Path(__file__).parent / "fixtures" / "faulty_rewards.py"


def spec(name: str) -> str:
    return f"{FAULTY}:{name}"


def group(texts: list[str], name: str = "g") -> list[Rollout]:
    return [Rollout(f"{name}-{i}", name, "p", t, None) for i, t in enumerate(texts)]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state != b"Z"


def wait_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def calls(log: Path, tag: str) -> Counter[str]:
    if not log.exists():
        return Counter()
    lines = log.read_text().splitlines()
    return Counter(line.split(" ", 1)[1] for line in lines if line.startswith(tag + " "))


# ---------------------------------------------------------------- async rewards


@pytest.mark.parametrize("kind", ["block", "spin", "slow"])
def test_an_async_reward_that_blocks_or_spins_is_stopped_at_its_timeout(kind: str) -> None:
    rubric = Rubric([Component("a", spec("async_faulty"), timeout=1.0)])
    with Engine(rubric, workers=1) as engine:
        engine.score_group(group(["warm"], "warm"))  # the worker's start is not the call's
        started = time.monotonic()
        scores = engine.score_group(group([f"{kind}:x", "fine", "fine too"]))
        elapsed = time.monotonic() - started
    assert elapsed < 4.0  # not the 8 s sleep, and never forever
    assert scores[0].status is Status.TIMEOUT, scores[0]
    assert "timed out after 1 s" in scores[0].errors["a"]
    assert [s.status for s in scores[1:]] == [Status.OK, Status.OK]


def test_async_calls_blocked_by_another_call_run_again_once_and_finish(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    rubric = Rubric([Component("a", spec("async_faulty"), timeout=1.0,
                               params={"calls_log": str(log)})])
    texts = [f"ok:{i}" for i in range(20)] + ["block:x"] + [f"ok:{i}" for i in range(20, 40)]
    with Engine(rubric, workers=1, max_concurrency=8) as engine:
        scores = engine.score_group(group(texts))
    statuses = Counter(s.status for s in scores)
    assert statuses == {Status.OK: 40, Status.TIMEOUT: 1}
    done = calls(log, "done")
    assert set(done) == {t for t in texts if t.startswith("ok:")}
    assert max(done.values()) == 1  # every call finished exactly once


def test_async_calls_a_block_cut_off_run_again_together(tmp_path: Path) -> None:
    """Twenty calls awaiting 0.5 s are cut off by a call that blocks the loop: they run again
    concurrently (about 0.5 s), not one at a time (10 s)."""
    log = tmp_path / "calls.log"
    rubric = Rubric([Component("a", spec("async_faulty"), timeout=1.0,
                               params={"calls_log": str(log)})])
    waits = [f"wait:{i}" for i in range(20)]
    with Engine(rubric, workers=1, max_concurrency=32) as engine:
        engine.score_group(group(["warm"], "warm"))
        log.unlink()
        started = time.monotonic()
        scores = engine.score_group(group([*waits, "late-block:x"]))
        elapsed = time.monotonic() - started
    assert [s.status for s in scores] == [Status.OK] * 20 + [Status.TIMEOUT]
    assert calls(log, "start") == {**{w: 2 for w in waits}, "late-block:x": 1}
    assert calls(log, "done") == {w: 1 for w in waits}
    assert elapsed < 4.0


def test_async_calls_cut_off_twice_run_alone_and_at_most_three_times(tmp_path: Path) -> None:
    """Three calls that await and then block, among calls that await: each kill cuts off the
    calls in flight; a call cut off twice runs alone, where no other call can cut it off."""
    log = tmp_path / "calls.log"
    rubric = Rubric([Component("a", spec("async_faulty"), timeout=1.0,
                               params={"calls_log": str(log)})])
    texts = ["late-block:a", "late-block:b", "late-block:c", "wait:1", "wait:2", "ok:3"]
    with Engine(rubric, workers=1, max_concurrency=32) as engine:
        scores = engine.score_group(group(texts))
    assert [s.status for s in scores] == [Status.TIMEOUT] * 3 + [Status.OK] * 3
    starts = calls(log, "start")
    assert {k: v for k, v in starts.items() if k != "ok:3"} == {
        "late-block:a": 1, "late-block:b": 2, "late-block:c": 3, "wait:1": 3, "wait:2": 3}
    assert 1 <= starts["ok:3"] <= 3
    assert calls(log, "done") == {"wait:1": 1, "wait:2": 1, "ok:3": 1}


def test_async_rewards_still_run_concurrently_in_a_worker() -> None:
    rubric = Rubric([Component("a", spec("async_faulty"), timeout=5.0)])
    with Engine(rubric, workers=1, max_concurrency=64) as engine:
        engine.score_group(group(["warm"]))
        started = time.monotonic()
        scores = engine.score_group(group([f"ok:{i}" for i in range(200)]))
        elapsed = time.monotonic() - started
    assert all(s.status is Status.OK for s in scores)
    assert elapsed < 1.5  # 200 calls of 10 ms each, run one at a time, would take 2 s


# ---------------------------------------------------------------- crashes and kills


def test_a_crash_never_runs_a_finished_call_again(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    rubric = Rubric([Component("f", spec("faulty"), params={"calls_log": str(log)})])
    texts = [f"ok:{i}" for i in range(300)]
    for position in (5, 77, 150, 151, 299):
        texts[position] = f"segfault:{position}"
    with Engine(rubric, workers=2) as engine:
        scores = engine.score(group(texts))
    started = calls(log, "start")
    assert set(started) == set(texts)
    assert max(started.values()) == 1  # exactly one call per rollout, crashes included
    crashed = [s for s in scores if s.status is Status.ERROR]
    assert sorted(int(s.id.split("-")[1]) for s in crashed) == [5, 77, 150, 151, 299]
    assert all("died while running this call" in s.errors["f"] for s in crashed)
    assert sum(s.status is Status.OK for s in scores) == 295


def test_a_timed_out_call_takes_the_processes_it_started_with_it(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    rubric = Rubric([Component("f", spec("faulty"), timeout=1.0,
                               params={"pid_file": str(pids)})])
    with Engine(rubric, workers=1) as engine:
        scores = engine.score_group(group(["spawn:1", "fine"]))
        assert scores[0].status is Status.TIMEOUT and scores[1].status is Status.OK
        children = [int(p) for p in pids.read_text().split()]
        assert children and wait_gone(children, 2.0) == []


@pytest.mark.parametrize("then", ["segfault:2", "hang:2", None])
def test_processes_a_reward_left_behind_end_with_their_worker(tmp_path: Path,
                                                             then: str | None) -> None:
    pids = tmp_path / "pids"
    rubric = Rubric([Component("f", spec("faulty"), timeout=1.0,
                               params={"pid_file": str(pids)})])
    with Engine(rubric, workers=1) as engine:
        engine.score_group(group(["leave:1", *([then] if then else [])]))
        children = [int(p) for p in pids.read_text().split()]
        if then is not None:  # the worker crashed or was killed: its leftovers go with it
            assert wait_gone(children, 2.0) == []
    assert wait_gone(children, 2.0) == []  # and at the latest when the engine closes


def test_no_worker_outlives_a_parent_killed_with_sigkill(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    pids = tmp_path / "pids"
    script.write_text(textwrap.dedent(f"""
        import sys
        from rewardsmith import Component, Engine, Rollout, Rubric
        rubric = Rubric([Component("f", {spec("faulty")!r}, timeout=600,
                                   params={{"pid_file": {str(pids)!r}}})])
        engine = Engine(rubric, workers=2)
        print("scoring", flush=True)
        engine.score([Rollout(str(i), str(i), "p", t, None)
                      for i, t in enumerate(["hang:1", "spawn:2"])])
    """))
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "scoring"
        deadline = time.monotonic() + 20
        while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        tree = descendants(child.pid)
        assert len(tree) >= 3  # the fork server, the workers, the sleep
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        assert wait_gone(tree, 2.0) == []  # every worker and what they started, within 2 s
    finally:
        if child.poll() is None:
            child.kill()


def _wait_for_children(pids: Path) -> None:
    deadline = time.monotonic() + 30
    while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pids.exists(), "the reward never started"


@pytest.mark.parametrize("verb", ["score", "serve"])
def test_no_worker_outlives_the_cli_killed_with_sigkill(tmp_path: Path, verb: str) -> None:
    pids = tmp_path / "pids"
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text(f"name: k\ntimeout: 600\ncomponents:\n  f: {{reward: '{spec('faulty')}', "
                      f"params: {{pid_file: '{pids}'}}}}\n")
    rollouts = tmp_path / "r.jsonl"
    rollouts.write_text('{"id": "1", "completion": "spawn:1"}\n{"id": "2", "completion": "hang"}\n')
    command = [sys.executable, "-m", "rewardsmith", verb]
    if verb == "score":
        command += [str(rollouts), "--rubric", str(rubric), "--workers", "2", "--no-store"]
    else:
        command += ["--rubric", str(rubric), "--port", "0", "--workers", "2"]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, cwd=tmp_path)
    try:
        if verb == "serve":
            import httpx

            assert child.stderr is not None
            url = None
            while url is None:
                line = child.stderr.readline()
                assert line, "the server did not start"
                if "running on http://127.0.0.1:" in line:
                    url = line.split("running on ", 1)[1].split()[0]
            body = {"rollouts": [{"id": "1", "completion": "spawn:1"},
                                 {"id": "2", "completion": "hang"}]}
            def ask() -> None:
                with contextlib.suppress(httpx.HTTPError):  # the server is killed meanwhile
                    httpx.post(f"{url}/score", json=body, timeout=60)

            threading.Thread(target=ask, daemon=True).start()
        _wait_for_children(pids)
        tree = descendants(child.pid)
        assert len(tree) >= 3
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        assert wait_gone(tree, 2.0) == []
    finally:
        if child.poll() is None:
            child.kill()


# ---------------------------------------------------------------- memory


def test_a_call_over_its_memory_limit_is_an_error_naming_the_limit() -> None:
    rubric = Rubric([Component("f", spec("faulty"), memory_limit=300)])
    with Engine(rubric, workers=1) as engine:
        scores = engine.score_group(group(["hog:1", "fine"]))
        replaced = engine.workers_replaced
    assert scores[0].status is Status.ERROR
    assert "memory limit of 300 MB" in scores[0].errors["f"]
    assert scores[1].status is Status.OK
    assert replaced == 1


def test_a_memory_error_recycles_its_worker() -> None:
    rubric = Rubric([Component("f", spec("faulty")), Component("pid", spec("pid_of_worker"))])
    with Engine(rubric, workers=1) as engine:
        first = engine.score_group(group(["memory_error:1"], "a"))
        second = engine.score_group(group(["fine"], "b"))
    assert first[0].status is Status.ERROR and "MemoryError" in first[0].errors["f"]
    assert second[0].status is Status.OK
    assert first[0].components["pid"] != second[0].components["pid"]  # a fresh process


# ---------------------------------------------------------------- output


def test_what_rewards_print_in_workers_goes_to_stderr(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        from rewardsmith import Component, Engine, Rollout, Rubric
        rubric = Rubric([Component("f", {spec("faulty")!r})])
        with Engine(rubric, workers=1) as engine:
            scores = engine.score_group([Rollout("1", "g", "p", "print:1", None)])
        print("RESULT", scores[0].status)
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "RESULT ok\n"
    assert "noise from a reward" in done.stderr and "raw noise on fd 1" in done.stderr


# ---------------------------------------------------------------- loading


UNGUARDED = """
import os
from rewardsmith import Component, Engine, Rollout, Rubric

def reward(completion):
    return float(len(completion))

rubric = Rubric([Component("n", reward)])
with Engine(rubric, workers=2) as engine:
    scores = engine.score([Rollout(str(i), str(i), "p", "x" * i, None) for i in range(8)])
print([s.reward for s in scores], [s.status.value for s in scores][:1])
"""


def test_a_script_without_a_main_guard_scores_in_workers(tmp_path: Path) -> None:
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0] ['ok']"


def test_a_script_read_from_stdin_scores_in_workers(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-"], input=UNGUARDED, capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0] ['ok']"


def test_a_reward_that_cannot_be_sent_to_workers_fails_before_scoring() -> None:
    lock = threading.Lock()

    def locked(completion: str) -> float:
        with lock:
            return 1.0

    rubric = Rubric([Component("locked", locked)])
    with Engine(rubric, workers=1) as engine, pytest.raises(LoadError) as caught:
        engine.score_group(group(["x"]))
    assert "cannot be sent to worker processes" in str(caught.value)
    assert "workers=0" in str(caught.value)


def test_a_reward_that_cannot_be_imported_in_a_worker_fails_before_scoring(
        tmp_path: Path) -> None:
    module = tmp_path / "vanishing_reward.py"
    module.write_text("def reward(completion):\n    return 1.0\n")
    sys.path.insert(0, str(tmp_path))
    try:
        rubric = Rubric([Component("gone", "vanishing_reward:reward")])
        rubric.resolve()
    finally:
        sys.path.remove(str(tmp_path))
    module.unlink()  # importable here at load time, gone when the worker imports it
    with Engine(rubric, workers=1) as engine, pytest.raises(LoadError) as caught:
        engine.score_group(group(["x"]))
    assert "could not be loaded in a worker process" in str(caught.value)


def test_a_reward_failing_the_same_way_every_time_raises_instead_of_masking() -> None:
    rubric = Rubric([Component("broken", spec("always_fails"))])
    rollouts = [Rollout(f"{g}-{i}", f"g{g}", "p", f"t{i}", str(g)) for g in range(4)
                for i in range(8)]
    with Engine(rubric, workers=1) as engine, pytest.raises(SystematicFailure) as caught:
        engine.score(rollouts)
    assert "settings missing" in str(caught.value)
    # The same failure within one group, or on rollouts that share one answer (a missing
    # reference), is the data's: per-rollout errors, not a broken reward.
    for same_answer in (group([f"t{i}" for i in range(20)]),
                        [Rollout(f"{g}-{i}", f"g{g}", "p", "#### 4", None) for g in range(4)
                         for i in range(8)]):
        with Engine(Rubric([Component("broken", spec("always_fails")),
                            Component("correct", "gsm8k")]), workers=1) as engine:
            scores = engine.score(same_answer)
        assert all(s.status is Status.ERROR for s in scores)


def test_closing_an_engine_stops_calls_still_running_at_once() -> None:
    rubric = Rubric([Component("f", spec("faulty"), timeout=600)])
    engine = Engine(rubric, workers=1)
    engine.score_group(group(["warm"], "warm"))
    outcome: list[object] = []

    def score() -> None:
        try:
            outcome.append(engine.score_group(group(["hang:1"])))
        except Exception as exc:  # noqa: BLE001 - what the caller sees is checked below
            outcome.append(exc)

    running = threading.Thread(target=score)
    running.start()
    time.sleep(1.0)
    started = time.monotonic()
    engine.close()
    assert time.monotonic() - started < 3.0  # not the 5 s join, not the 600 s call
    running.join(10)
    assert outcome  # the caller got an answer: scores with an error, or an exception
