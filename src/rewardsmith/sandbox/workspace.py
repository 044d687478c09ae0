"""Workspace jobs: one trusted Python program run over a private, throw-away workspace.

A code ``Job`` runs one program against tests the harness drives; a workspace job instead
runs a program of ours (a test runner, say) with whatever it is sent on stdin (a repository
to unpack), inside a fresh sandbox: the bubblewrap isolation of ``bubblewrap.py`` (no
network, no host files, ``/usr`` and the Python environment read-only, a size-capped tmpfs on
``/tmp`` where the workspace lives and dies with the sandbox), as an unprivileged user, in a
memory cgroup where one can be made. The program's stdout comes back, cut at
``output_bytes``; past ``time`` seconds the whole sandbox is killed and what it had written
comes back with ``timed_out``. ``sandbox: none`` runs the same program on the host in a
temporary folder (only for workspaces you trust).
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass

from ..errors import ConfigError
from . import get_sandbox
from ._cgroup import MemoryCgroup, memory_cgroups_available
from .bubblewrap import CGROUP_HEADROOM_MB, NOBODY, BubblewrapSandbox
from .jobs import Limits, SandboxError
from .runtimes import Runtime, find_runtime

__all__ = ["WorkspaceJob", "WorkspaceLimits", "WorkspaceResult", "check_workspace",
           "run_workspace", "WORKSPACE_SANDBOXES"]

WORKSPACE_SANDBOXES = ("bubblewrap", "none")
# Seconds allowed for starting the sandbox and the interpreter, on top of the job's own time.
STARTUP_MARGIN = 10.0
_STDERR_KEPT = 64 << 10


@dataclass(frozen=True)
class WorkspaceLimits:
    """What one workspace job may use, all of it together."""

    time: float = 60.0  # wall-clock seconds for the whole job
    memory_mb: int = 2048  # the job's memory: a cgroup where one can be made, else address space
    tmpfs_mb: int = 1024  # /tmp, where the workspace lives (never more than memory_mb)
    output_bytes: int = 16 << 20  # stdout kept; more kills the job

    def __post_init__(self) -> None:
        # The same checks as a code job's limits, with their messages.
        Limits(time=self.time, memory_mb=self.memory_mb, tmpfs_mb=self.tmpfs_mb,
               output_bytes=self.output_bytes)


@dataclass(frozen=True)
class WorkspaceJob:
    """``program`` (Python source, run with ``-I -c`` by the environment's interpreter, with
    ``/tmp`` as its working folder) reads ``stdin``. ``environment``: a virtualenv or an
    interpreter (see ``runtimes.py``), None for the system's ``python3``."""

    program: str
    stdin: bytes
    environment: str | None
    limits: WorkspaceLimits = WorkspaceLimits()


@dataclass(frozen=True)
class WorkspaceResult:
    exit_code: int | None
    stdout: bytes
    stderr: bytes  # the last 64 KiB
    timed_out: bool
    overflow: bool  # stdout passed output_bytes: the job was killed there
    seconds: float


def _runtime(environment: str | None) -> Runtime:
    return find_runtime("python", environment)


def check_workspace(sandbox: str, environment: str | None) -> None:
    """Raise ``SandboxUnavailable`` (or ``ConfigError`` for a sandbox that cannot run
    workspace jobs) unless a workspace job can start here, before anything is scored."""
    if sandbox not in WORKSPACE_SANDBOXES:
        raise ConfigError(f"sandbox {sandbox!r} cannot run workspace jobs; use one of "
                          f"{', '.join(WORKSPACE_SANDBOXES)}")
    _runtime(environment)
    if sandbox == "bubblewrap":
        backend = get_sandbox("bubblewrap")
        backend.check("python")
        if environment is not None:
            check_environment = getattr(backend, "check_environment", None)
            if check_environment is not None:
                check_environment(environment)


def run_workspace(job: WorkspaceJob, sandbox: str = "bubblewrap") -> WorkspaceResult:
    """Run ``job`` in a fresh sandbox; ``SandboxError`` only when the sandbox cannot start."""
    runtime = _runtime(job.environment)
    limits = job.limits
    if sandbox == "none":
        return _run_unsandboxed(job, runtime)
    if sandbox != "bubblewrap":
        raise ConfigError(f"sandbox {sandbox!r} cannot run workspace jobs")
    backend = get_sandbox("bubblewrap")
    if not isinstance(backend, BubblewrapSandbox):
        raise ConfigError("sandbox 'bubblewrap' is not the bubblewrap backend here")
    isolation = Limits(memory_mb=limits.memory_mb, tmpfs_mb=limits.tmpfs_mb)
    argv = [*backend.isolation_argv(runtime, isolation),
            runtime.python, *runtime.flags, "-c", job.program]
    user = NOBODY if os.geteuid() == 0 else None
    group = None
    if memory_cgroups_available():
        group = MemoryCgroup.create((limits.memory_mb + CGROUP_HEADROOM_MB) << 20, owner=user)
    if group is not None:
        # The first process joins the cgroup, then becomes bwrap: nothing runs outside it.
        argv = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', group.procs, *argv]
    try:
        return _run(argv, job, user, env={"PATH": "/usr/bin:/bin"}, cwd=None)
    finally:
        if group is not None:
            group.remove()


def _run_unsandboxed(job: WorkspaceJob, runtime: Runtime) -> WorkspaceResult:
    work = tempfile.mkdtemp(prefix="rewardsmith-workspace-")
    try:
        argv = [runtime.python, *runtime.flags, "-c", job.program]
        return _run(argv, job, None, env={"PATH": "/usr/bin:/bin", "HOME": work,
                                          "LANG": "C.UTF-8"}, cwd=work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(argv: list[str], job: WorkspaceJob, user: int | None, env: dict[str, str],
         cwd: str | None) -> WorkspaceResult:
    started = time.monotonic()
    deadline = started + job.limits.time + STARTUP_MARGIN
    try:
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, close_fds=True, env=env, cwd=cwd,
            user=user, group=user, extra_groups=[] if user is not None else None)
    except OSError as exc:
        raise SandboxError(f"the workspace sandbox: cannot start {argv[0]!r}: {exc}") from exc
    try:
        out, err, overflow, late = _exchange(process, job.stdin, job.limits.output_bytes,
                                             deadline)
    finally:
        _kill_group(process)  # nothing of the job outlives it, whatever happened
        code = process.wait()
    return WorkspaceResult(None if late or overflow else code, bytes(out),
                           bytes(err[-_STDERR_KEPT:]), late, overflow,
                           time.monotonic() - started)


def _exchange(process: subprocess.Popen[bytes], message: bytes, cap: int,
              deadline: float) -> tuple[bytearray, bytearray, bool, bool]:
    """Write ``message`` to stdin while reading stdout and stderr, until both close, the
    deadline passes (late) or stdout passes ``cap`` (overflow)."""
    assert process.stdin and process.stdout and process.stderr
    out, err = bytearray(), bytearray()
    pending = memoryview(message)
    selector = selectors.DefaultSelector()
    os.set_blocking(process.stdin.fileno(), False)
    if pending:
        selector.register(process.stdin, selectors.EVENT_WRITE)
    else:
        process.stdin.close()
    selector.register(process.stdout, selectors.EVENT_READ, out)
    selector.register(process.stderr, selectors.EVENT_READ, err)
    try:
        while any(key.fileobj is not process.stdin for key in selector.get_map().values()):
            left = deadline - time.monotonic()
            if left <= 0:
                return out, err, False, True
            for key, _ in selector.select(min(left, 1.0)):
                if key.fileobj is process.stdin:
                    try:
                        pending = pending[os.write(process.stdin.fileno(), pending[:1 << 16]):]
                    except OSError:  # the program stopped reading: it gets no more
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(process.stdin)
                        process.stdin.close()
                    continue
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                sink: bytearray = key.data
                sink += chunk
                if sink is err and len(err) > 2 * _STDERR_KEPT:
                    del err[:-_STDERR_KEPT]
                if len(out) > cap:
                    return out, err, True, False
    finally:
        selector.close()
        for stream in (process.stdin, process.stdout, process.stderr):
            if not stream.closed:
                stream.close()
    return out, err, False, False


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        if process.poll() is None:
            process.kill()

