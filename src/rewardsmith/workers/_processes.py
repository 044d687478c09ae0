"""How worker processes start: the multiprocessing context (the fork server, else spawn), a start that leaves out the parent's main script, how many workers a machine gets, and the message encoding that batches travel in."""

from __future__ import annotations

import io
import multiprocessing
import multiprocessing.connection
import multiprocessing.spawn
import os
import pickle
import threading
from collections.abc import Sequence
from typing import Any

# What the fork server imports once, so that each process it starts begins warm.
FORKSERVER_PRELOAD = ["rewardsmith.workers._pool", "rewardsmith.workers._child", "rewardsmith.rewards"]
# What callers of the pool add to it (the engine: the programs its workers run). It only grows:
# the fork server starts once per process, with whatever list is set when it starts.
_extra_preload: list[str] = []


def default_worker_count() -> int:
    """The cores this process may use (respects taskset/cgroup affinity), at most 8."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


_spawn_lock = threading.Lock()


def process_context(start_method: str | None = None, preload: Sequence[str] = ()) -> Any:
    """The multiprocessing context helper processes start from: the fork server where there is
    one (processes that replace killed workers then start warm), else spawn; never plain fork,
    which is unsafe in a process with threads. ``preload``: modules the fork server imports too,
    when it has not started yet (a replaced worker then skips importing them)."""
    method = start_method or ("forkserver" if "forkserver" in
                              multiprocessing.get_all_start_methods() else "spawn")
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        _extra_preload.extend(m for m in preload if m not in _extra_preload)
        context.set_forkserver_preload([*FORKSERVER_PRELOAD, *_extra_preload])
    return context


def start_without_main(process: Any) -> None:
    """Start ``process`` without running the parent's ``__main__`` in it.

    multiprocessing re-imports the parent's main script in each new process (``spawn`` and
    ``forkserver``). A script without an ``if __name__ == "__main__":`` guard then runs again
    in every worker, and a script read from stdin cannot be found at all. Workers never need
    it: rewards travel by import path or by value (cloudpickle), so the main module is left out
    of what the new process is told to prepare.
    """
    original = multiprocessing.spawn.get_preparation_data

    def preparation_data(name: str) -> dict[str, Any]:
        data = original(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    with _spawn_lock:
        multiprocessing.spawn.get_preparation_data = preparation_data
        try:
            process.start()
        finally:
            multiprocessing.spawn.get_preparation_data = original


def dumps_fast(message: Any) -> bytes:
    """Pickle without the memo: several times faster for many distinct strings (the texts of a
    batch); a repeated object is written again instead of referenced. Cyclic data, which the
    memo-less mode refuses, is pickled the usual way."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.fast = True
    try:
        pickler.dump(message)
    except ValueError:
        return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return buffer.getvalue()


# How long a worker may take to load a rubric's rewards and run their warm-up hooks (a reward
# function's ``warmup`` attribute), outside every call's own time limit.
WARM_UP_SECONDS = 600.0
