"""The test runner that executes inside the sandbox (standard library only, never imported).

The host starts it as ``python3 -I -S -c <text>`` inside the sandbox, the text being
``_harness_values.py``, ``_harness_python.py`` and this file joined (``# inlined`` imports
dropped), and sends one JSON job on stdin: the program, its language, the tests and the limits. It compiles the
program once, then runs each test in a fresh child process (a fork of itself for Python, an
``exec`` of the compiled binary or of ``node`` otherwise) with resource limits, a wall-clock
deadline and capped output, and writes one JSON line per event on stdout.

It never judges: expected outputs never enter the sandbox, so the program cannot read them.
It reports what the program printed (stdin tests) or the plain value it returned, encoded
from exact built-in types only (call and expression tests); the host compares.

Run as PID 1 of its own PID namespace, it cannot be killed by the program (``kill(-1, 9)``
spares the namespace's init) and it kills every other process of the namespace after each
test, so nothing the program starts outlives its test.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import resource
import select
import signal
import sys
import time
from importlib import import_module
from typing import Any

from ._harness_files import (  # inlined
    _IS_INIT,  # inlined
    _SCRATCH,  # inlined
    _WORK,  # inlined
    _deny_memfd,  # inlined
    _Fresh,  # inlined
    _Keep,  # inlined
    _memory_file,  # inlined
)  # inlined
from ._harness_python import _python_child, _script_runner, _serve  # inlined
from ._harness_values import _BUILTINS, _exit, _write  # inlined

# Warm the modules solutions import most: each test's fork then shares them.
for _name in ("bisect", "collections", "functools", "heapq", "itertools", "re"):
    import_module(_name)

_STDERR_KEEP = 2000
_VALUE_CAP = 1 << 20


def _emit(event: dict[str, Any]) -> None:
    data = (json.dumps(event) + "\n").encode()
    while data:
        data = data[_write(1, data):]


def _undumpable() -> None:
    # Keep the program's processes (same uid) out of /proc/1/fd and /proc/1/mem.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


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
    _reap()
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


_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}


def _exec_start(argv: list[str]) -> Any:
    def start() -> None:
        os.execve(argv[0], argv, _ENV)

    return start


def _exec_fd_start(name: str) -> Any:
    def start() -> None:  # the binary's descriptor sits just past the test's channels
        os.execve(3, [name], _ENV)

    return start


def _compile_python(source: str) -> tuple[Any, str | None]:
    try:
        return compile(source, "<program>", "exec"), None
    except (SyntaxError, ValueError) as exc:
        import traceback

        return None, "".join(traceback.format_exception_only(type(exc), exc))


def _compile_cpp(job: dict[str, Any], limits: dict[str, Any],
                 seconds: float) -> tuple[int | None, str | None, float]:
    """Compile within ``seconds``; the binary comes back as a descriptor, never left in /tmp."""
    work = _WORK
    src, binary = f"{work}/main.cpp", f"{work}/main"
    with open(src, "w", encoding="utf-8") as handle:
        handle.write(job["source"])
    argv = [*job["runtime"]["compile"], src, "-o", binary]
    result = _run_child(_exec_start(argv), b"", {**limits, "processes": 64,
                                                  "file_mb": 256, "output_bytes": 65536},
                        seconds, False, int(limits["compile_memory_mb"]))
    if result["status"] != "done" or result["exit"] != 0:
        message = (result["stderr"] or result["stdout"])[-_STDERR_KEEP:]
        if result["status"] == "timeout":
            message = f"compilation took longer than {seconds:g} s\n{message}"
        return None, message or f"compiler exited with {result['exit']}", result["seconds"]
    with open(binary, "rb") as handle:
        written = _memory_file("main", handle.read())
    # Executing a file open for writing fails: keep a read-only descriptor of it.
    readonly = os.open(f"/proc/self/fd/{written}", os.O_RDONLY | os.O_CLOEXEC)
    os.close(written)
    return readonly, None, result["seconds"]


_JS_CALL = """
;(function () {
  const __fs = require("fs");
  const __t = JSON.parse(__fs.readFileSync(0, "utf8"));
  let __f = (typeof globalThis[__t.fn] === "function") ? globalThis[__t.fn] : undefined;
  if (__f === undefined) { try { __f = eval(__t.fn); } catch (e) { __f = undefined; } }
  if (typeof __f !== "function") { throw new Error("the program defines no function " + __t.fn); }
  let __v = __f(...__t.args);
  __fs.writeSync(3, JSON.stringify({value: __v === undefined ? null : __v}));
})();
"""


def _start_for(job: dict[str, Any], test: dict[str, Any],
               built: Any) -> tuple[Any, bytes, bool]:
    """What the test's child becomes, what it reads on stdin (files in a fresh /tmp), and
    whether it is the Python test runner (which the program never enters)."""
    language = job["language"]
    kind = test["kind"]
    if language == "python":
        entry: dict[str, Any] = {}
        in_runner = kind == "script"
        if kind == "expr":
            expression = compile(test["expr"], "<test>", "eval")
            # Only a call of one of the program's own names with constant arguments runs in
            # the program's process: anything else (a builtin, a module, a helper) could be
            # the program's version there, so it runs where the program never ran.
            in_runner = not _plain_call(expression)
            entry["script_code" if in_runner else "expr_code"] = expression
        elif kind == "script":
            entry["script_code"] = compile(test["code"], "<test>", "exec")

        def start() -> None:
            if in_runner:
                _script_runner(job["source"], test, entry)
            _python_child(built, test, entry)

        data = test.get("input", "").encode() if kind == "stdin" else b""
        return start, data, in_runner
    if language == "cpp":
        return _exec_fd_start("main"), test.get("input", "").encode(), False
    # javascript
    work = _WORK
    node = job["runtime"]["node"]
    memory_flag = f"--max-old-space-size={max(16, int(job['limits']['memory_mb']) // 2)}"
    if kind == "stdin":
        path = f"{work}/main.js"
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(job["source"])
        return _exec_start([node, memory_flag, path]), test.get("input", "").encode(), False
    path = f"{work}/test.js"
    with open(path, "w", encoding="utf-8") as handle:
        if kind == "call":
            handle.write(job["source"] + "\n" + _JS_CALL)
        else:
            handle.write(job["source"] + "\n;\n" + test["code"]
                         + '\n;require("fs").writeSync(3, "done");\n')
    stdin = json.dumps({"fn": test.get("fn"), "args": test.get("args", [])}).encode()
    return _exec_start([node, memory_flag, path]), stdin, False


_CODE_TYPE = type(_compile_python.__code__)


def _plain_call(expression: Any) -> bool:
    """``f(<constants>)``: one name looked up, not a builtin, no nested code."""
    names = expression.co_names
    return len(names) == 1 and names[0] not in _BUILTINS and not any(
        isinstance(c, _CODE_TYPE) for c in expression.co_consts)


def _bad_test_reason(value: str | None) -> str | None:
    """The Python script runner's word that the test code itself cannot run."""
    if not value or not value.startswith('{"bad_test"'):
        return None
    try:
        return str(json.loads(value)["bad_test"])
    except (ValueError, KeyError, TypeError):
        return None


def main() -> None:
    _undumpable()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    job = json.loads(sys.stdin.buffer.readline().decode("utf-8"))
    limits = job["limits"]
    language = job["language"]
    keep = _Keep(job["runtime"].get("keep") or ())
    fresh = _Fresh(_SCRATCH if _IS_INIT else (_WORK,), _WORK, keep)
    fresh.reset()
    total = float(limits["total_time"])
    spent = 0.0
    built: Any = None
    if language == "python":
        built, message = _compile_python(job["source"])
    elif language == "cpp":
        built, message, spent = _compile_cpp(job, limits,
                                             min(float(limits["compile_time"]), total))
    else:
        built, message = "main.js", None
    _emit({"event": "compile", "ok": built is not None, "message": message,
           "seconds": round(spent, 4)})
    if job.get("await_go"):  # the host sets the tests' memory limit after the compiler's
        sys.stdin.buffer.readline()
    null = os.open(os.devnull, os.O_RDONLY)  # keep fds 0-2 taken: a pipe must never land there
    os.dup2(null, 0)
    os.close(null)
    if built is None:
        _emit({"event": "end"})
        return
    stop = None
    memory_mb = int(limits["memory_mb"])
    exec_fd = built if language == "cpp" else None
    ran = False
    for index, test in enumerate(job["tests"]):
        remaining = total - spent
        if stop is None and remaining <= 0:
            stop = "total_time"
        if stop is not None:
            _emit({"event": "test", "i": index, "status": "skipped", "reason": stop})
            continue
        try:
            fresh.reset()  # nothing one test (or the compiler) wrote is there for the next
            start, stdin, in_runner = _start_for(job, test, built)
        except SyntaxError as exc:
            _emit({"event": "test", "i": index, "status": "bad_test", "reason": str(exc)})
            continue
        except Exception as exc:
            if not ran:
                raise  # the program has not run: the sandbox's own failure
            # What the program left behind broke the runner's set-up: its failure.
            _emit({"event": "test", "i": index, "status": "lost",
                   "reason": f"the test could not be set up after the program ran: {exc}"})
            continue
        ran = True
        result = _run_child(start, stdin, limits, min(float(limits["time"]), remaining),
                            test["kind"] != "stdin", memory_mb, exec_fd=exec_fd,
                            data_limit=language == "javascript",
                            deny_memfd=not job["runtime"].get("cgroup"))
        spent += result["seconds"]
        if in_runner:  # only the runner, out of the program's reach, can say so
            reason = _bad_test_reason(result["value"])
            if reason is not None:
                result["status"], result["reason"] = "bad_test", reason
        _emit({"event": "test", "i": index, **result})
        if result["status"] == "timeout" and job.get("stop_on_timeout", True):
            stop = "an earlier test ran past its time limit"
    _emit({"event": "end"})


if __name__ == "__main__":
    if sys.argv[1:] == ["serve"]:
        try:
            _serve()
        except BaseException:
            _exit(1)
        _exit(0)
    try:
        main()
    except BaseException as exc:  # the harness itself failed: say why, for the host's error
        try:
            _emit({"event": "fatal", "message": f"{type(exc).__name__}: {exc}"})
        except BaseException:
            pass
        _exit(70)
    sys.stdout.flush()
    _exit(0)
