"""Judge limits shared by real processes through one store: concurrency, requests per minute,
the budget, and a killed process's slots. Each process scores its own rollouts with the engine
against one real HTTP server on 127.0.0.1, which counts what arrives from all of them."""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pytest

from support.counting_server import CountingServer, most_in_any_window
from support.limits_worker import main_to_file

MODEL = "judge-2024-01-01"


@pytest.fixture(scope="module")
def processes() -> ForkServerContext:
    # A fork server that has imported rewardsmith once: each scoring process is a fork of it
    # (a fresh process, no threads inherited), so four of them start in well under a second.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["support.limits_worker", "rewardsmith.engine",
                                    "rewardsmith.judge"])
    return context


@pytest.fixture
def server() -> Iterator[CountingServer]:
    with CountingServer(models=[MODEL]) as running:
        yield running


class Worker:
    def __init__(self, process: BaseProcess, result: Path):
        self.process = process
        self.result = result


_started = 0


def start(context: ForkServerContext, server: CountingServer, store: Path, prefix: str,
          count: int, judge: dict[str, Any]) -> Worker:
    global _started
    _started += 1
    spec = {"base_url": server.base_url, "store": str(store), "prefix": prefix, "count": count,
            "judge": judge}
    result = store.parent / f"result-{_started}.json"
    process = context.Process(target=main_to_file, args=(spec, str(result)))
    process.start()
    return Worker(process, result)


def finish(worker: Worker) -> dict[str, Any]:
    worker.process.join(90)
    assert worker.process.exitcode == 0, f"scoring process exited {worker.process.exitcode}"
    return json.loads(worker.result.read_text())  # type: ignore[no-any-return]


def run_all(context: ForkServerContext, server: CountingServer, store: Path, processes: int,
            count: int, judge: dict[str, Any]) -> list[dict[str, Any]]:
    started = [start(context, server, store, f"p{n}", count, judge) for n in range(processes)]
    return [finish(p) for p in started]


def wait_until(condition: Callable[[], bool], what: str, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def members(store: Path) -> int:
    with sqlite3.connect(f"{store}-limits", timeout=10) as db:
        return int(db.execute("SELECT COUNT(*) FROM limit_members").fetchone()[0])


def slots_held(store: Path) -> int:
    with sqlite3.connect(f"{store}-limits", timeout=10) as db:
        return int(db.execute("SELECT COALESCE(SUM(held), 0) FROM limit_members")
                   .fetchone()[0])


@pytest.mark.parametrize(("scope", "shared"), [("auto", True), ("process", False)])
def test_max_concurrency_holds_across_four_processes(processes: ForkServerContext,
                                                     server: CountingServer, tmp_path: Path,
                                                     scope: str, shared: bool) -> None:
    server.latency = 0.08  # calls overlap: each process alone would keep 3 in flight
    results = run_all(processes, server, tmp_path / "judge.db", 4, 12,
                      {"max_concurrency": 3, "limit_scope": scope})
    assert all(s == "ok" for r in results for s in r["statuses"]), [r["errors"] for r in results]
    assert server.billed == 48
    if shared:
        assert server.max_in_flight == 3  # reached, never passed, across the processes
        assert slots_held(tmp_path / "judge.db") == 0  # every slot was given back
    else:  # the control: per-process limits let the processes together pass it
        assert server.max_in_flight > 3
        assert not Path(f"{tmp_path / 'judge.db'}-limits").exists()


@pytest.mark.parametrize("others", [{}, {"max_concurrency": 8, "budget": {"max_calls": 999}}],
                         ids=["rate-only", "with-ticket"])  # a ticket reserves the 1st request
def test_requests_per_minute_hold_across_four_processes(processes: ForkServerContext,
                                                        server: CountingServer, tmp_path: Path,
                                                        others: dict[str, Any]) -> None:
    # 1200 a minute: 20 a second, a bucket of 20. Alone, each process could send 20 at once.
    # The replies are held until all four have joined: a process that joins after the others
    # have left starts the bucket afresh (limits cover the processes that run together), which
    # on a busy machine, where the later ones start late, would be a second burst.
    store = tmp_path / "judge.db"
    server.hold_after(0)
    started = [start(processes, server, store, f"p{n}", 15,
                     {"requests_per_minute": 1200, **others}) for n in range(4)]
    try:
        wait_until(lambda: server.held > 0 and members(store) == 4,
                   "all four processes to join the limits")
    finally:
        server.release()
    results = [finish(p) for p in started]
    assert all(s == "ok" for r in results for s in r["statuses"]), [r["errors"] for r in results]
    times = server.request_times
    assert len(times) == 60
    # A bucket lets through at most its size plus its rate times the window (plus the one
    # that takes it below zero); requests sent on time can arrive a little bunched on a busy
    # machine. Per-process limits would let all 60 through in the first moment.
    slack = 6
    assert most_in_any_window(times, 1.0) <= 20 + 20 + 1 + slack
    assert most_in_any_window(times, 0.5) <= 20 + 10 + 1 + slack
    # 60 requests, 20 at once, the other 40 at 20 a second: about two seconds end to end.
    assert max(times) - min(times) >= 40 / 20 * 0.85


def test_max_calls_is_exact_across_processes(processes: ForkServerContext,
                                             server: CountingServer, tmp_path: Path) -> None:
    # A budget covers the processes that run at the same time (one that joins after the
    # others have left starts afresh), so the first calls are held until all four processes
    # have joined: on a busy machine the later ones could otherwise start after the first
    # ones ended.
    store = tmp_path / "judge.db"
    server.hold_after(0)
    started = [start(processes, server, store, f"p{n}", 8,
                     {"budget": {"max_calls": 10}, "max_concurrency": 2}) for n in range(4)]
    try:
        wait_until(lambda: server.held == 2, "the two shared slots to be taken")
        wait_until(lambda: members(store) == 4, "all four processes to join the limits")
    finally:
        server.release()
    results = [finish(p) for p in started]
    assert server.billed == 10
    assert sum(r["usage"]["calls"] for r in results) == 10
    assert sum(r["usage"]["unscored"] for r in results) == 32 - 10
    refused = [e for r in results for e in r["errors"]]
    assert refused and all("budget spent (max_calls=10)" in e for e in refused)


def test_max_cost_is_passed_by_at_most_the_calls_in_flight(processes: ForkServerContext,
                                                            server: CountingServer,
                                                            tmp_path: Path) -> None:
    server.latency = 0.05
    price = {"price_per_million_input": 1000.0, "price_per_million_output": 1000.0}
    results = run_all(processes, server, tmp_path / "judge.db", 4, 10,
                      {"budget": {"max_cost": 0.5}, "max_concurrency": 2, **price})
    cost = sum(r["usage"]["cost"] for r in results)
    calls = sum(r["usage"]["calls"] for r in results)
    per_call = cost / calls
    assert 0.5 <= cost <= 0.5 + 2 * per_call * 1.5  # in flight: at most the 2 shared slots
    assert calls < 40 and server.billed == calls
    assert sum(r["usage"]["unscored"] for r in results) == 40 - calls


def test_a_killed_process_gives_its_slots_back(processes: ForkServerContext,
                                               server: CountingServer, tmp_path: Path) -> None:
    store = tmp_path / "judge.db"
    judge = {"max_concurrency": 2}
    server.hold_after(0)  # the first process's two calls stay in flight
    first = start(processes, server, store, "killed", 6, judge)
    try:
        wait_until(lambda: server.held == 2, "the first process to hold both slots")
        wait_until(lambda: slots_held(store) == 2, "both slots to be recorded")
    finally:
        first.process.kill()  # SIGKILL: nothing of it runs again
        first.process.join(30)
    server.release(drop=True)
    wait_until(lambda: server.held == 0, "held requests to be dropped")
    assert slots_held(store) == 2  # left behind by the dead process
    began = time.monotonic()
    second = finish(start(processes, server, store, "after", 6, judge))
    assert second["statuses"] == ["ok"] * 6
    assert time.monotonic() - began < 20
    assert server.max_in_flight <= 2
    assert slots_held(store) == 0


def test_the_budget_starts_afresh_for_a_later_run(processes: ForkServerContext,
                                                   server: CountingServer,
                                                   tmp_path: Path) -> None:
    store = tmp_path / "judge.db"
    judge = {"budget": {"max_calls": 3}}
    first = finish(start(processes, server, store, "one", 5, judge))
    second = finish(start(processes, server, store, "two", 5, judge))
    assert first["usage"]["calls"] == 3 and second["usage"]["calls"] == 3
    assert server.billed == 6
    assert os.path.exists(f"{store}-limits")
