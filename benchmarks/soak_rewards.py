"""Rewards for the fault soak (``bench_faults.py``): each misbehaves as its rollout asks.

A completion ``<sync fault>/<async fault>/<id>`` picks what the two components do. Every call
appends ``start <component> <id>`` and, when it returns, ``done <component> <id>`` to the file
in ``SOAK_LOG``, so the soak can count the calls made per rollout.
"""

from __future__ import annotations

import asyncio
import ctypes
import io
import os
import subprocess
import sys
import time


def _log(event: str, component: str, rollout: str) -> None:
    path = os.environ.get("SOAK_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"{event} {component} {rollout}\n")


def _daemon(rollout: str) -> None:
    """Start a daemon (double fork, new session) that sleeps, and note its pid."""
    script = ("import os, sys, time\n"
              "if os.fork(): os._exit(0)\n"
              "os.setsid()\n"
              "if os.fork(): os._exit(0)\n"
              "path = os.environ.get('SOAK_PIDS')\n"
              f"if path: open(path, 'a').write(f'{{os.getpid()}} {rollout}\\n')\n"
              "time.sleep(1000)\n")
    subprocess.run([sys.executable, "-c", script], check=True)


def sync_part(completion: str) -> float:
    """segfault | hang | hog | print | spawn | fork | exit | chdir | stdout | daemon | ok"""
    fault, _async_fault, rollout = completion.split("/")
    _log("start", "sync", rollout)
    if fault == "segfault":
        ctypes.string_at(0)
    elif fault == "hang":
        while True:
            pass
    elif fault == "hog":
        block = b"x" * (2 << 30)  # every page written: the resident size grows to 2 GiB
        time.sleep(30 + len(block))
    elif fault == "print":
        print(("a reward talking to itself " * 40 + "\n") * 100, end="")  # about 100 KB
    elif fault == "spawn":
        child = subprocess.Popen(["sleep", "1000"], start_new_session=False)
        pids = os.environ.get("SOAK_PIDS")
        if pids:
            with open(pids, "a", encoding="utf-8") as handle:
                handle.write(f"{child.pid} {rollout}\n")
    elif fault == "fork":
        os.fork()  # the child must not go on as a second copy of the worker
    elif fault == "exit":
        sys.exit(3)
    elif fault == "chdir":
        os.chdir("/")
    elif fault == "stdout":
        sys.stdout = io.StringIO()
    elif fault == "daemon":
        _daemon(rollout)
    _log("done", "sync", rollout)
    return (sum(map(ord, rollout)) % 10) / 10.0


async def async_part(completion: str) -> float:
    """block | stubborn | ok"""
    _sync_fault, fault, rollout = completion.split("/")
    _log("start", "async", rollout)
    if fault == "block":
        time.sleep(30)  # blocks the event loop: only a kill stops it
    elif fault == "stubborn":
        while True:  # a retry loop that swallows its own cancellation
            try:
                await asyncio.sleep(1000)
            except BaseException:  # noqa: BLE001 - the fault under test
                pass
    await asyncio.sleep(0)
    _log("done", "async", rollout)
    return 1.0
