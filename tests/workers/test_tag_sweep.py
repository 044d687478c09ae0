"""The last look a closing pool takes for what its workers' calls started."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from rewardsmith.workers import WorkerPool
from rewardsmith.workers._child import worker_tag
from rewardsmith.workers._proctree import TAG_VARIABLE, kill_tagged_any


def sleeper(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            env={**os.environ, **env})


def gone(process: subprocess.Popen[bytes]) -> bool:
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_one_pass_ends_exactly_the_processes_with_one_of_the_tags() -> None:
    tagged = sleeper({TAG_VARIABLE: "1.2"})
    other = sleeper({TAG_VARIABLE: "1.20"})
    inside = sleeper({"NOTE": f"x{TAG_VARIABLE}=1.2"})  # the name inside another's value
    try:
        time.sleep(0.2)
        assert kill_tagged_any(["1.2", "9.9"]) == 1
        assert gone(tagged)
        assert other.poll() is None and inside.poll() is None
    finally:
        for process in (tagged, other, inside):
            process.kill()
            process.wait()


def test_a_closing_pool_ends_what_carries_the_tag_of_any_worker_it_started() -> None:
    pool = WorkerPool(1)
    worker = pool._spawn()
    escaped = sleeper({TAG_VARIABLE: worker_tag(os.getpid(), worker.process.pid)})
    stranger = sleeper({TAG_VARIABLE: worker_tag(os.getpid(), 1)})
    try:
        pool._kill(worker, replaced=False)  # ends the escaped one too, by its tag
        assert gone(escaped)
        late = sleeper({TAG_VARIABLE: worker_tag(os.getpid(), worker.process.pid)})
        pool.close()  # a process that took the tag after the worker's end: the last look
        assert gone(late)
        assert stranger.poll() is None  # no worker of this pool: left alone
    finally:
        for process in (escaped, stranger):
            process.kill()
            process.wait()
