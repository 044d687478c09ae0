"""Start the in-sandbox harness as a process, send it a job, read its report within limits."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

from .jobs import Job, JobResult, SandboxError, TestRun

__all__ = ["harness_source", "serve_source", "job_message", "job_result", "kill_group", "report_cap",
           "run_harness", "start_process"]

_REPORT_OVERHEAD = 64 * 1024  # bytes of report per test beyond the program's own output


# The in-sandbox runner, in the order its parts are joined into one text.
HARNESS_PARTS = ("_harness_values.py", "_harness_files.py", "_harness_child.py",
                 "_harness_serve.py", "_harness_python.py", "_harness_session.py",
                 "_harness.py")
# What a script test's program interpreter runs: the values and the serving loop only.
SERVE_PARTS = ("_harness_values.py", "_harness_serve.py")
_SERVE_MAIN = """
try:
    _serve()
except BaseException:
    _exit(1)
_exit(0)
"""
_FUTURE = "from __future__ import annotations"


def _joined(parts: Sequence[str]) -> str:
    # The parts import each other for type checkers only: those lines end in ``# inlined``
    # and are dropped, as is every ``__future__`` import after the first part's.
    folder = resources.files(__package__ or "rewardsmith.sandbox")
    texts = []
    for index, name in enumerate(parts):
        lines = folder.joinpath(name).read_text(encoding="utf-8").splitlines()
        kept = [line for line in lines if not line.rstrip().endswith("# inlined")
                and not (index > 0 and line.strip() == _FUTURE)]
        texts.append("\n".join(kept))
    return "\n\n".join(texts) + "\n"


@lru_cache(maxsize=1)
def harness_source() -> str:
    """The runner's text, passed to ``python3 -c`` (so no host file is mounted for it)."""
    return _joined(HARNESS_PARTS)


@lru_cache(maxsize=1)
def serve_source() -> str:
    """The text a script test's program interpreter runs (``python3 -c``): nothing of the
    runner, so that process holds no test."""
    return _joined(SERVE_PARTS) + _SERVE_MAIN


def job_message(job: Job, runtime: dict[str, Any], *, await_go: bool = False) -> bytes:
    """The job as one line of JSON (the runner reads a line; with ``await_go`` it then waits
    for a second one before the first test)."""
    return json.dumps({
        "language": job.language,
        "source": job.source,
        "tests": list(job.tests),
        "limits": job.limits.as_dict(),
        "stop_on_timeout": job.stop_on_timeout,
        "shared_calls": job.shared_calls,
        "runtime": {**runtime, "serve": serve_source()} if job.language == "python" else runtime,
        "await_go": await_go,
    }).encode("utf-8") + b"\n"


def run_harness(argv: Sequence[str], job: Job, runtime: dict[str, Any], *,
                user: int | None = None, what: str = "sandbox",
                after_compile: Callable[[], None] | None = None) -> JobResult:
    """Run ``argv`` (which starts the harness), feed it ``job``, parse its report.

    The whole process group is killed when the job's wall budget passes or the report grows
    past what the job's limits allow; a report cut short leaves the unreported tests failed.
    ``after_compile`` runs once the program is compiled and before its first test (the
    runner waits for it): where the tests' memory limit replaces the compiler's.

    Once the program has compiled, anything that goes wrong (the runner's own failure, a
    report cut short) fails the tests not reported: only a sandbox that could not start or
    compile the program is a ``SandboxError``.
    """
    message = job_message(job, runtime, await_go=after_compile is not None)
    deadline = time.monotonic() + job.limits.wall_budget()
    try:
        process = start_process(argv, user)
    except OSError as exc:
        raise SandboxError(f"{what}: cannot start {argv[0]!r}: {exc}") from exc
    out, err, overflow, late = _exchange(process, message, report_cap(job), deadline,
                                         after_compile)
    if overflow or late:
        kill_group(process)
    code = process.wait()
    return job_result(job, bytes(out), bytes(err), overflow=overflow, late=late,
                      what=f"{what} (exit {code})")


def start_process(argv: Sequence[str], user: int | None) -> subprocess.Popen[bytes]:
    """The sandbox's first process, in a session of its own, as ``user`` when given."""
    return subprocess.Popen(
        list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, close_fds=True, env={"PATH": "/usr/bin:/bin"},
        user=user, group=user, extra_groups=[] if user is not None else None,
    )


def report_cap(job: Job) -> int:
    """The most report a job's limits allow; past it the sandbox is killed."""
    return len(job.tests) * (job.limits.output_bytes * 2 + _REPORT_OVERHEAD) + _REPORT_OVERHEAD


def job_result(job: Job, out: bytes, err: bytes, *, overflow: bool, late: bool,
               what: str) -> JobResult:
    """The runner's report as a ``JobResult``: ``SandboxError`` when it never compiled the
    program; tests it did not report, once it had, are ``lost`` (the program's failure)."""
    lines = _parse_lines(out)
    fatal = [e for e in lines if e.get("event") == "fatal"]
    compiled = next((e for e in lines if e.get("event") == "compile"), None)
    if compiled is None:
        detail = fatal[0]["message"] if fatal else err[-2000:].decode("utf-8", "replace")
        if late:
            detail = f"no report within {job.limits.wall_budget():.0f} s. {detail}"
        raise SandboxError(f"{what} did not run the program: {detail.strip() or 'no message'}")
    runs: dict[int, TestRun] = {}
    for event in lines:
        if event.get("event") == "test" and isinstance(event.get("i"), int):
            runs[event["i"]] = _test_run(event)
    lost = "the run was cut short" + (" (report too large)" if overflow else "") + (
        " (wall-clock budget spent)" if late else "") + (
        f" (the runner failed: {fatal[0].get('message')})" if fatal else "")
    complete = tuple(runs.get(i) or TestRun(i, "lost", reason=lost) for i in range(len(job.tests)))
    if not compiled.get("ok"):
        complete = ()
    return JobResult(bool(compiled.get("ok")), compiled.get("message"), complete)


def _exchange(process: subprocess.Popen[bytes], message: bytes, cap: int, deadline: float,
              after_compile: Callable[[], None] | None) -> tuple[bytearray, bytearray, bool,
                                                                  bool]:
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    out, err = bytearray(), bytearray()
    selector = selectors.DefaultSelector()
    os.set_blocking(process.stdin.fileno(), False)
    pending = memoryview(message)
    selector.register(process.stdin, selectors.EVENT_WRITE)
    selector.register(process.stdout, selectors.EVENT_READ, out)
    selector.register(process.stderr, selectors.EVENT_READ, err)
    overflow = late = False
    try:
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                late = True
                break
            for key, _ in selector.select(min(left, 1.0)):
                if key.fileobj is process.stdin:
                    try:
                        sent = os.write(process.stdin.fileno(), pending[:65536])
                        pending = pending[sent:]
                    except (BrokenPipeError, OSError):
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(process.stdin)
                        if after_compile is None:
                            process.stdin.close()
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                sink: bytearray = key.data
                sink += chunk
                if after_compile is not None and sink is out and b"\n" in chunk:
                    after_compile = _go_if_compiled(process, out, after_compile)
                if sink is err and len(err) > 65536:
                    del err[:-65536]
                if len(out) > cap:
                    overflow = True
                    return out, err, overflow, late
    finally:
        selector.close()
        if not process.stdin.closed:
            process.stdin.close()
        process.stdout.close()
        process.stderr.close()
    return out, err, overflow, late


def _go_if_compiled(process: subprocess.Popen[bytes], out: bytearray,
                    after_compile: Callable[[], None]) -> Callable[[], None] | None:
    """Once the compile line is in: run ``after_compile``, then let the tests start."""
    if b'"event": "compile"' not in out:
        return after_compile
    assert process.stdin is not None
    after_compile()
    try:
        os.write(process.stdin.fileno(), b"go\n")
        process.stdin.close()
    except OSError:
        pass
    return None


def kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


def _parse_lines(data: bytes) -> list[dict[str, Any]]:
    events = []
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line cut by the kill: its test is reported lost
        if isinstance(event, dict):
            events.append(event)
    return events


def _test_run(event: dict[str, Any]) -> TestRun:
    exit_code = event.get("exit")
    return TestRun(
        index=int(event["i"]),
        status=str(event.get("status", "lost")),
        exit_code=exit_code if isinstance(exit_code, int) else None,
        stdout=str(event.get("stdout") or ""),
        stderr=str(event.get("stderr") or ""),
        value=event.get("value") if isinstance(event.get("value"), str) else None,
        seconds=float(event.get("seconds") or 0.0),
        reason=str(event.get("reason") or ""),
    )
