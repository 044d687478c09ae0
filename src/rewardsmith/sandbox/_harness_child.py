"""Running one test's process: a fork with resource limits, a deadline and capped output.

Part of the in-sandbox runner (see ``_harness.py``): the child becomes the test's program;
the runner reads its stdout (capped: more is an output-limit failure), its stderr (drained
to the end, only the tail kept: never a failure) and its value channel, then kills every
process the test left.
"""

from __future__ import annotations

import math
import os
import resource
import select
import signal
import time
from typing import Any

from ._harness_files import _IS_INIT, _deny_memfd, _memory_file  # inlined
from ._harness_values import _exit  # inlined

_STDERR_KEEP = 2000
_VALUE_CAP = 1 << 20


def _set_limits(limits: dict[str, Any], *, memory_mb: int, cpu_s: int,
                data_limit: bool = False) -> None:
    def cap(which: int, value: int) -> None:
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY and value > hard:
                resource.setrlimit(which, (hard, hard))

    try:  # the soft limit sends SIGXCPU (reported as a timeout), the hard one kills
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    except (ValueError, OSError):
        pass
    if memory_mb > 0:
        # V8 reserves address space far past what it uses: JavaScript is held by its data
        # (written memory, buffers outside the heap included), everything else by its space.
        cap(resource.RLIMIT_DATA if data_limit else resource.RLIMIT_AS, memory_mb << 20)
    cap(resource.RLIMIT_NPROC, int(limits["processes"]))
    cap(resource.RLIMIT_FSIZE, int(limits["file_mb"]) << 20)
    cap(resource.RLIMIT_NOFILE, int(limits["open_files"]))
    cap(resource.RLIMIT_CORE, 0)


def _child_fds(stdin_fd: int, out_w: int, err_w: int, value_w: int | None,
               exec_fd: int | None) -> None:
    os.dup2(stdin_fd, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    first_free = 3
    if value_w is not None:
        os.dup2(value_w, 3)
        first_free = 4
    if exec_fd is not None:  # the compiled program, run by descriptor (never a path in /tmp)
        os.dup2(exec_fd, first_free)
        os.set_inheritable(first_free, False)
        first_free += 1
    os.closerange(first_free, 65536)
    for fd in (0, 1, 2, 3) if value_w is not None else (0, 1, 2):
        os.set_inheritable(fd, True)


def _mark_first_to_kill() -> None:
    # Under a memory cgroup the kernel kills the test's processes, never the runner.
    try:
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("1000")
    except OSError:
        pass


def _read_some(fd: int, sink: bytearray, cap: int) -> bool:
    """Read what is there; False at end of stream. Keeps at most ``cap`` bytes."""
    try:
        chunk = os.read(fd, 65536)
    except BlockingIOError:
        return True
    except OSError:
        return False
    if not chunk:
        return False
    room = cap - len(sink)
    if room > 0:
        sink += chunk[:room]
    if len(chunk) > room:
        sink.extend(b"\0")  # a marker byte past the cap: the output overflowed
    return True


def _read_tail(fd: int, sink: bytearray, keep: int) -> bool:
    """Read what is there, keeping only the last ``keep`` bytes: stderr never overflows."""
    try:
        chunk = os.read(fd, 65536)
    except BlockingIOError:
        return True
    except OSError:
        return False
    if not chunk:
        return False
    sink += chunk
    if len(sink) > keep:
        del sink[:-keep]
    return True


def _kill_rest(pid: int) -> None:
    """Kill the test's process and, as init of the namespace, everything else it started."""
    if _IS_INIT:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
    else:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _kill_stragglers() -> None:
    """As init: kill and reap until no other process is left; a process forked while
    ``kill(-1)`` ran (a fork bomb's) can escape one round."""
    if not _IS_INIT:
        return
    for round_ in range(500):
        _reap()
        others = [n for n in os.listdir("/proc") if n.isdigit() and n != "1"]
        if not others:
            return
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if round_ > 2:
            time.sleep(0.001)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _run_child(start: Any, stdin_data: bytes, limits: dict[str, Any], deadline_s: float,
               want_value: bool, memory_mb: int, *, exec_fd: int | None = None,
               data_limit: bool = False, deny_memfd: bool = False) -> dict[str, Any]:
    """Fork, let ``start()`` become the test's program, collect its output within limits.

    Only stdout (and the value channel) can overflow; stderr is drained to the end and only
    its last bytes are kept, so debug prints of any size never fail a test.
    """
    stdin_fd = _memory_file("stdin", stdin_data)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    val_r, val_w = os.pipe() if want_value else (None, None)
    cpu_s = max(1, int(math.ceil(deadline_s)) + 1)
    began = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            _mark_first_to_kill()
            _child_fds(stdin_fd, out_w, err_w, val_w, exec_fd)
            _set_limits(limits, memory_mb=memory_mb, cpu_s=cpu_s, data_limit=data_limit)
            if deny_memfd:
                _deny_memfd()
            start()
        except BaseException:
            pass
        _exit(127)
    os.close(stdin_fd)
    os.close(out_w)
    os.close(err_w)
    if val_w is not None:
        os.close(val_w)
    out, err, val = bytearray(), bytearray(), bytearray()
    caps = {out_r: (out, int(limits["output_bytes"]))}
    if val_r is not None:
        caps[val_r] = (val, _VALUE_CAP)
    for fd in (*caps, err_r):
        os.set_blocking(fd, False)
    pidfd = os.pidfd_open(pid)
    open_fds = {*caps, err_r}
    status, exit_code = "done", None
    deadline = began + deadline_s

    def drain(fd: int) -> bool:
        if fd == err_r:
            return _read_tail(fd, err, _STDERR_KEEP * 4)
        sink, cap = caps[fd]
        return _read_some(fd, sink, cap)

    def overflowed() -> bool:
        return any(len(sink) > cap for sink, cap in caps.values())

    exited = False
    while True:
        now = time.monotonic()
        if now >= deadline:
            status = "timeout"
            break
        ready, _, _ = select.select([*open_fds, pidfd], [], [], deadline - now)
        for fd in ready:
            if fd == pidfd:
                exited = True
            elif not drain(fd):
                open_fds.discard(fd)
        if overflowed():
            status = "output_limit"
            break
        if exited:
            # Drain what is already in the pipes; a grandchild may hold them open.
            for fd in list(open_fds):
                while fd in open_fds and not overflowed():
                    if not drain(fd):
                        open_fds.discard(fd)
                    elif not select.select([fd], [], [], 0)[0]:
                        break
            if overflowed():
                status = "output_limit"
            break
    seconds = time.monotonic() - began
    _kill_rest(pid)
    try:
        _, raw = os.waitpid(pid, 0)
        if os.WIFEXITED(raw):
            exit_code = os.WEXITSTATUS(raw)
        elif os.WIFSIGNALED(raw):
            exit_code = -os.WTERMSIG(raw)
            if os.WTERMSIG(raw) == signal.SIGXCPU and status == "done":
                status = "timeout"
    except ChildProcessError:
        pass
    _kill_stragglers()
    for fd in (*caps, err_r, pidfd):
        os.close(fd)
    return {
        "status": status,
        "exit": exit_code,
        "stdout": bytes(out[: int(limits["output_bytes"])]).decode("utf-8", "replace"),
        "stderr": bytes(err[-_STDERR_KEEP:]).decode("utf-8", "replace"),
        "value": bytes(val).decode("utf-8", "replace") if val_r is not None else None,
        "seconds": round(seconds, 4),
    }
