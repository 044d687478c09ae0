"""The test runner that executes inside the sandbox (standard library only, never imported).

The host starts it as ``python3 -I -S -c <text> jobs`` inside the sandbox, the text being the
parts named in ``_process.HARNESS_PARTS`` joined (``# inlined`` imports dropped), and sends
jobs on stdin, one JSON line each: the program, its language, the tests and the limits. For
each it compiles the program once, then runs each test in a fresh child process (a fork of
itself for Python, an ``exec`` of the compiled binary or of ``node`` otherwise; see
``_harness_child.py``) with resource limits, a wall-clock deadline and capped output, and
writes one JSON line per event on stdout. Between programs it kills every other process and
empties the scratch folders (a warm sandbox: see ``_warm.py``); without ``jobs`` it runs one
job and exits.

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
import os
import signal
import sys
from importlib import import_module
from typing import Any

from ._harness_child import _STDERR_KEEP, _kill_stragglers, _run_child  # inlined
from ._harness_files import _IS_INIT, _SCRATCH, _WORK, _Fresh, _Keep, _memory_file  # inlined
from ._harness_python import _SERVE, _python_child, _script_runner  # inlined
from ._harness_session import _Session, _session_cpu_seconds  # inlined
from ._harness_values import _BUILTINS, _exit, _write  # inlined

# Warm the modules solutions import most, and ``ast`` (the test runner reads test code with
# it): each test's fork then shares them.
for _name in ("ast", "bisect", "collections", "functools", "heapq", "itertools", "re"):
    import_module(_name)


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
            # This child's copy of the job keeps only its own test: the others' code is not
            # reachable from the program's frames or objects.
            job["tests"].clear()
            job["tests"].append(test)
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


_PENDING = bytearray()  # what was read from stdin past the last line
_FRESH: list[_Fresh] = []  # made once: the scratch folders' modes as the sandbox made them


def _read_line() -> bytes:
    """One line from the host (a job, or "go"); empty when the host has closed the pipe."""
    while b"\n" not in _PENDING:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        _PENDING.extend(chunk)
    end = _PENDING.find(b"\n")
    end = len(_PENDING) if end < 0 else end + 1
    line = bytes(_PENDING[:end])
    del _PENDING[:end]
    return line


def _fresh_for(job: dict[str, Any]) -> _Fresh:
    if not _FRESH:
        keep = _Keep(job["runtime"].get("keep") or ())
        _FRESH.append(_Fresh(_SCRATCH if _IS_INIT else (_WORK,), _WORK, keep))
    return _FRESH[0]


def _start() -> None:
    _undumpable()
    for number in (signal.SIGPIPE, signal.SIGINT):  # as PID 1: nothing inside can signal it
        signal.signal(number, signal.SIG_DFL)


def main() -> None:
    """One job from stdin, then exit (``python -c <runner>``)."""
    _start()
    _run_job(json.loads(_read_line().decode("utf-8")))


def serve_jobs() -> None:
    """Jobs one after another, one line each, until stdin closes (``-c <runner> jobs``): the
    warm sandbox. After each job ``{"event": "idle"}``; every process but this one is killed
    and the scratch folders are emptied, so nothing of one program meets the next."""
    _start()
    while True:
        try:
            job = _next_job()
            if job is None:
                return
            _run_job(job)
        except BaseException as exc:  # reported; the host decides whose fault it was
            _emit({"event": "fatal", "message": f"{type(exc).__name__}: {exc}"})
        job = None
        _kill_stragglers()
        if _FRESH:
            try:
                _FRESH[0].reset()
            except OSError:
                pass
        _emit({"event": "idle"})


def _next_job() -> dict[str, Any] | None:
    # Parsed here so that no frame keeps the job's text while its tests run.
    line = _read_line()
    return json.loads(line.decode("utf-8")) if line.strip() else None


def _run_job(job: dict[str, Any]) -> None:
    limits = job["limits"]
    language = job["language"]
    _SERVE[:] = [job["runtime"].get("serve") or ""]
    fresh = _fresh_for(job)
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
        _read_line()
    if built is not None:
        try:
            _run_tests(job, built, spent, fresh)
        finally:
            if language == "cpp":
                os.close(built)  # the binary's descriptor: the next job is another program
    _emit({"event": "end"})


def _run_tests(job: dict[str, Any], built: Any, spent: float, fresh: _Fresh) -> None:
    limits = job["limits"]
    language = job["language"]
    total = float(limits["total_time"])
    stop = None
    memory_mb = int(limits["memory_mb"])
    exec_fd = built if language == "cpp" else None
    deny_memfd = not job["runtime"].get("cgroup")
    ran = False
    session: _Session | None = None
    tests = job["tests"]
    # Which tests share the program's process (None: an expression that does not compile).
    shared: list[bool | None] = [False] * len(tests)
    if language == "python":
        together = job.get("shared_calls", True)
        shared = [_in_session(t) if together else _compiles(t) for t in tests]
    try:
        for index, test in enumerate(tests):
            remaining = total - spent
            if stop is None and remaining <= 0:
                stop = "total_time"
            if stop is not None:
                _emit({"event": "test", "i": index, "status": "skipped", "reason": stop})
                continue
            try:
                if shared[index] is None:  # an expression that does not compile
                    compile(test["expr"], "<test>", "eval")
                if session is not None and not (shared[index] and session.alive):
                    session.close()
                    session = None
                if shared[index] and session is None:
                    fresh.reset()  # nothing an earlier test (or the compiler) wrote is there
                    cpu_s = _session_cpu_seconds(limits, len(tests) - index, remaining)
                    session = _Session(built, job, cpu_s, memory_mb, deny_memfd)
                elif not shared[index]:
                    fresh.reset()
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
            deadline_s = min(float(limits["time"]), remaining)
            if session is not None:
                last = index + 1 == len(tests) or not shared[index + 1]
                result = session.call(test, deadline_s, last)
            else:
                result = _run_child(start, stdin, limits, deadline_s, test["kind"] != "stdin",
                                    memory_mb, exec_fd=exec_fd,
                                    data_limit=language == "javascript", deny_memfd=deny_memfd)
                if in_runner:  # only the runner, out of the program's reach, can say so
                    reason = _bad_test_reason(result["value"])
                    if reason is not None:
                        result["status"], result["reason"] = "bad_test", reason
            spent += result["seconds"]
            _emit({"event": "test", "i": index, **result})
            if result["status"] == "timeout" and job.get("stop_on_timeout", True):
                stop = "an earlier test ran past its time limit"
    finally:
        if session is not None:
            session.close()


def _compiles(test: dict[str, Any]) -> bool | None:
    """False (no session) for a test that can run; None for an expression that does not
    compile."""
    return None if _in_session(test) is None else False


def _in_session(test: dict[str, Any]) -> bool | None:
    """A Python test that runs in the program's process anyway: a call, or an expression that
    is a plain call of the program's name; None for an expression that does not compile."""
    if test["kind"] == "call":
        return True
    if test["kind"] != "expr":
        return False
    try:
        return _plain_call(compile(test["expr"], "<test>", "eval"))
    except (SyntaxError, ValueError):
        return None


if __name__ == "__main__":
    try:
        if sys.argv[1:] == ["jobs"]:
            serve_jobs()
            _exit(0)
        main()
    except BaseException as exc:  # the harness itself failed: say why, for the host's error
        try:
            _emit({"event": "fatal", "message": f"{type(exc).__name__}: {exc}"})
        except BaseException:
            pass
        _exit(70)
    sys.stdout.flush()
    _exit(0)
