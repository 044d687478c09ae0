"""Warm sandboxes: one started sandbox runs many programs, one after another.

Starting ``bwrap`` and an interpreter, importing and compiling the runner, is most of what a
short program costs. A warm sandbox pays it once: its runner (PID 1 of the sandbox's PID
namespace) reads jobs one line each and, after each, kills every other process of the
namespace and empties the scratch folders, so nothing of one program meets the next; each test
still runs in a fresh child forked from the runner (see ``_harness.py``).

A sandbox that overran its job's wall budget, flooded its report or died is killed and never
reused. Each worker process keeps its own pool (a pool made before a fork is not the child's);
they end with the process that made them.
"""

from __future__ import annotations

import atexit
import os
import selectors
import subprocess
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from ._cgroup import MemoryCgroup
from ._process import job_message, job_result, kill_group, report_cap, start_process
from .jobs import Job, JobResult, SandboxError

__all__ = ["WarmPool", "WarmSandbox"]

_IDLE_LINE = b'{"event": "idle"}\n'
_COMPILE_MARK = b'"event": "compile"'
_KEEP_IDLE = 4  # warm sandboxes kept per kind of job, per process


class _Died(SandboxError):
    """The sandbox ended before it reported a compile: it may have died while idle."""


class WarmSandbox:
    """A started sandbox whose runner serves jobs; ``run`` one at a time."""

    def __init__(self, argv: Sequence[str], user: int | None,
                 group: MemoryCgroup | None) -> None:
        self.group = group
        self.process = start_process(argv, user)
        self.alive = True
        self.jobs = 0

    def run(self, job: Job, runtime: dict[str, Any], what: str,
            after_compile: Callable[[], None] | None = None) -> JobResult:
        message = job_message(job, runtime, await_go=after_compile is not None)
        deadline = time.monotonic() + job.limits.wall_budget()
        out, err, overflow, late, ended = self._exchange(message, report_cap(job), deadline,
                                                         after_compile)
        self.jobs += 1
        if overflow or late or ended:
            self.close()
        if ended and _COMPILE_MARK not in out:
            raise _Died(f"{what} ended before it ran the program: "
                        f"{err[-2000:].decode('utf-8', 'replace').strip() or 'no message'}")
        return job_result(job, out, err, overflow=overflow, late=late, what=what)

    def _exchange(self, message: bytes, cap: int, deadline: float,
                  after_compile: Callable[[], None] | None) -> tuple[bytes, bytes, bool, bool,
                                                                     bool]:
        process = self.process
        assert process.stdin is not None and process.stdout is not None
        assert process.stderr is not None
        stdin, stdout, stderr = (process.stdin.fileno(), process.stdout.fileno(),
                                 process.stderr.fileno())
        out, err = bytearray(), bytearray()
        pending = memoryview(message)
        overflow = late = ended = False
        selector = selectors.DefaultSelector()
        try:
            os.set_blocking(stdin, False)
            selector.register(stdin, selectors.EVENT_WRITE)
            selector.register(stdout, selectors.EVENT_READ)
            selector.register(stderr, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    late = True
                    break
                for key, _ in selector.select(min(left, 1.0)):
                    if key.fd == stdin:
                        try:
                            pending = pending[os.write(stdin, pending[:1 << 16]):]
                        except OSError:
                            pending = pending[:0]
                        if not pending:
                            selector.unregister(stdin)
                        continue
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        ended = True
                        break
                    if key.fd == stderr:
                        err += chunk
                        del err[:-65536]
                        continue
                    out += chunk
                    if after_compile is not None and _COMPILE_MARK in out:
                        after_compile()
                        after_compile = None
                        os.set_blocking(stdin, True)
                        os.write(stdin, b"go\n")
                        os.set_blocking(stdin, False)
                if ended or out.endswith(_IDLE_LINE) or len(out) > cap:
                    overflow = len(out) > cap and not out.endswith(_IDLE_LINE)
                    break
        except OSError:
            ended = True
        finally:
            selector.close()
        return bytes(out), bytes(err), overflow, late, ended

    def close(self) -> None:
        """End the sandbox (every process of it) and remove its cgroup."""
        if self.alive:
            self.alive = False
            kill_group(self.process)
            for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.group is not None:
            self.group.remove()
            self.group = None


class WarmPool:
    """Idle warm sandboxes by kind of job (the command line that starts them)."""

    def __init__(self) -> None:
        self._idle: dict[Hashable, list[WarmSandbox]] = {}
        self._lock = threading.Lock()
        self._owner = os.getpid()
        atexit.register(self.close)

    def run(self, key: Hashable, start: Callable[[], WarmSandbox],
            use: Callable[[WarmSandbox], JobResult]) -> JobResult:
        """``use`` an idle sandbox of this kind (else a new one from ``start``); a reused one
        that turns out to have died is replaced once."""
        warm = self._take(key)
        reused = warm is not None
        try:
            if warm is None:
                warm = start()
            try:
                result = use(warm)
            except _Died:
                if not reused:
                    raise
                warm.close()
                warm = start()
                result = use(warm)
        except BaseException:
            if warm is not None:
                warm.close()
            raise
        self._give(key, warm)
        return result

    def _take(self, key: Hashable) -> WarmSandbox | None:
        with self._lock:
            if os.getpid() != self._owner:  # made before a fork: the parent's, not ours
                self._idle, self._owner = {}, os.getpid()
            idle = self._idle.get(key)
            return idle.pop() if idle else None

    def _give(self, key: Hashable, warm: WarmSandbox) -> None:
        if not warm.alive:
            warm.close()
            return
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if os.getpid() == self._owner and len(idle) < _KEEP_IDLE:
                idle.append(warm)
                return
        warm.close()

    def close(self) -> None:
        with self._lock:
            idle = [w for group in self._idle.values() for w in group]
            self._idle = {}
            mine = os.getpid() == self._owner
        if mine:
            for warm in idle:
                warm.close()
