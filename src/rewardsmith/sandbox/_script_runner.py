"""The first process (PID 1) of a script job's sandbox, run as ``python3 -c`` (see ``script_jobs``).

It reads the job (one JSON line) and then the workspace (a tar stream, maybe compressed) from
stdin; unpacks the workspace into the job's work folder (a size-capped tmpfs); removes every
link of the workspace that leads into a guarded folder (the log folder, ``/proc``, the root);
empties the scratch folders, so nothing the unpacking planted survives; runs the command with
no stdin, its output to a file; then kills every other process of the sandbox, waits until
none is left, reads the named output files (regular files only, never through a link) and
writes one JSON line, its report, to stdout.

Nothing the command starts can reach that report: this process makes itself not dumpable
first (no ptrace, no ``/proc/1/fd`` or ``/proc/1/mem`` for a process of the same user), and
the report is written after every other process is dead. Standard library only: it runs in
whatever Python the sandbox has (a container image's included), from 3.8 on.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import stat
import subprocess
import sys
import tarfile
import time
from typing import IO, Any

_OUTPUT_CAP = 1 << 16  # bytes read of each output file
_TAIL = 4096  # bytes of the command's own output sent back, for diagnostics
# Each member is checked here; tarfile's own filters (3.12+) would refuse absolute links, which
# a workspace's virtualenv holds (bin/python -> /usr/bin/python3).
_TRUSTED: dict[str, Any] = ({"filter": tarfile.fully_trusted_filter}
                            if hasattr(tarfile, "fully_trusted_filter") else {})


def _undumpable() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _parent_is_link(root: str, relative: str) -> bool:
    """Whether a folder on the way to ``root/relative`` is a link (writing there would
    follow it out of the work folder)."""
    here = root
    for part in relative.split("/")[:-1]:
        here = os.path.join(here, part)
        if os.path.islink(here):
            return True
    return False


def _unpack(source: IO[bytes], root: str) -> dict[str, int]:
    """Unpack the tar stream into ``root``; members that would leave it are skipped."""
    counts = {"files": 0, "skipped": 0}
    with tarfile.open(fileobj=source, mode="r|*") as archive:
        for member in archive:
            name = os.path.normpath(member.name.lstrip("/"))
            if name in (".", "") or name == ".." or name.startswith("../") or \
                    not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
                counts["skipped"] += 1
                continue
            if member.islnk():
                linked = os.path.normpath(member.linkname.lstrip("/"))
                if linked == ".." or linked.startswith("../") or \
                        _parent_is_link(root, linked + "/x"):
                    counts["skipped"] += 1
                    continue
                member.linkname = linked
            if _parent_is_link(root, name):
                counts["skipped"] += 1
                continue
            target = os.path.join(root, name)
            member.name = name
            member.uid = member.gid = os.getuid()
            member.uname = member.gname = ""
            member.mode = (member.mode & 0o777) | 0o600 if member.isreg() else \
                (member.mode & 0o777) | 0o700
            try:
                if os.path.islink(target) or (os.path.lexists(target) and not member.isdir()
                                              and not os.path.isdir(target)):
                    os.unlink(target)  # never write through a link an earlier member made
                archive.extract(member, root, set_attrs=not member.issym(), **_TRUSTED)
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.ENOMEM):
                    raise  # the workspace is too large: the report says so
                counts["skipped"] += 1  # a member that cannot be made (a file over a folder)
                continue
            counts["files"] += 1
    return counts


def _neutralize_links(root: str, guarded: list[str]) -> int:
    """Remove each link under ``root`` that resolves to a guarded folder, into one, or to
    one of their parents (through which a guarded folder is reached)."""
    removed = 0
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                continue
            target = os.path.realpath(path)
            if any(_inside(target, g) or _inside(g, target) for g in guarded):
                os.unlink(path)
                removed += 1
    return removed


def _empty(folder: str, keep: list[str]) -> None:
    """Remove everything in ``folder`` but the folders in ``keep`` (mounts: left whole) and
    the folders above them."""
    if not os.path.isdir(folder):
        return
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if path in keep:
            continue
        if any(_inside(k, path) for k in keep):
            if os.path.isdir(path) and not os.path.islink(path):
                _empty(path, keep)
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            for sub, dirs, files in os.walk(path, topdown=False):
                for item in files:
                    os.unlink(os.path.join(sub, item))
                for item in dirs:
                    child = os.path.join(sub, item)
                    (os.unlink if os.path.islink(child) else os.rmdir)(child)
            os.rmdir(path)
        else:
            os.unlink(path)


def _first_to_kill() -> None:
    """In the command's process, before it starts (this runner has one thread, so a
    ``preexec_fn`` is safe): out of memory, the kernel kills the command's processes before
    this one, whose death would leave the job without a report."""
    try:
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("1000")
    except OSError:
        pass


def _kill_all_others() -> None:
    """As PID 1: kill every other process of the sandbox and reap them all."""
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        try:
            os.kill(-1, signal.SIGKILL)  # everyone but PID 1
        except ProcessLookupError:
            pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        alive = [p for p in os.listdir("/proc") if p.isdigit() and p != "1"
                 and _state(p) not in ("Z", "X", "")]
        if not alive:
            return
        time.sleep(0.01)
    raise RuntimeError("processes of the command survived SIGKILL")


def _state(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read().decode("ascii", "replace")
        return text.rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _read_output(path: str) -> dict[str, Any]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return {"present": False}
    except OSError as exc:  # a link (ELOOP) or anything else that is not a plain file
        return {"present": True, "regular": False, "reason": exc.strerror or str(exc)}
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return {"present": True, "regular": False, "reason": "not a regular file"}
        data = os.read(fd, _OUTPUT_CAP + 1)
        return {"present": True, "regular": True, "truncated": len(data) > _OUTPUT_CAP,
                "text": data[:_OUTPUT_CAP].decode("utf-8", "replace")}
    finally:
        os.close(fd)


def _tail(path: str) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - _TAIL), os.SEEK_SET)
        return os.read(fd, _TAIL).decode("utf-8", "replace")
    finally:
        os.close(fd)


def _run(job: dict[str, Any]) -> dict[str, Any]:
    report: dict[str, Any] = {}
    work = job["workdir"]
    started = time.monotonic()
    try:
        report["unpacked"] = _unpack(sys.stdin.buffer, work)
    except (tarfile.TarError, OSError, EOFError, ValueError) as exc:
        report["workspace_error"] = f"{type(exc).__name__}: {exc}"
        return report
    report["unpack_seconds"] = round(time.monotonic() - started, 3)
    report["links_removed"] = _neutralize_links(work, job["guarded"])
    for folder in job["scratch"]:
        _empty(folder, [work, *job["keep"]])
    output_dir = job["output_dir"]
    os.makedirs(output_dir, exist_ok=True)
    log_path = os.path.join(output_dir, job["log_name"])
    env = dict(job["env"])
    began = time.monotonic()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(job["argv"], cwd=work, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, env=env, close_fds=True,
                                   preexec_fn=_first_to_kill)
    try:
        code: int | None = process.wait(timeout=job["time_limit"])
        report["timed_out"] = False
    except subprocess.TimeoutExpired:
        code = None
        report["timed_out"] = True
    report["seconds"] = round(time.monotonic() - began, 3)
    _kill_all_others()
    report["exit_code"] = code
    report["outputs"] = {name: _read_output(os.path.join(output_dir, name))
                         for name in job["outputs"]}
    report["log_tail"] = _tail(log_path)
    return report


def _main() -> None:
    _undumpable()
    line = sys.stdin.buffer.readline()
    job = json.loads(line)
    try:
        report = _run(job)
    except Exception as exc:  # noqa: BLE001 - reported, the host decides
        report = {"fatal": f"{type(exc).__name__}: {exc}"}
    out = sys.stdout.buffer
    out.write(b"\n" + json.dumps(report).encode("utf-8") + b"\n")
    out.flush()


if __name__ == "__main__":
    _main()
