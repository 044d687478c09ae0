"""Script jobs: a command run over a private copy of a workspace, in a sandbox (bubblewrap here;
a container in ``container.py``), with named output files read back once it has ended.

A ``ScriptJob`` names the workspace (a folder, or a ``.tar``/``.tar.gz`` of one, on the host),
the read-only folders to mount (a task's tests), the command, its time and memory limits, and
the output folder and files to read back. The sandbox's first process is ``_script_runner``: it
unpacks the workspace into a size-capped tmpfs (a private copy, nothing written to the host),
removes workspace links that lead into guarded folders, runs the command, kills everything
else, and reports the output files (see its docstring for why nothing the command starts can
forge that report). The output folder is a tmpfs as well, empty when the command starts.

A backend that runs script jobs has ``run_script(job)`` and ``check_scripts()``; ``none`` has
neither: a script job needs folders mounted where the command expects them.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import stat
import subprocess
import tarfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import IO, Any, Protocol

from ..errors import ConfigError
from ._cgroup import MemoryCgroup
from ._process import kill_group
from .jobs import SandboxError, SandboxUnavailable

__all__ = ["BASE_PATH", "SCRIPT_MARGIN", "SHM_MB", "ScriptJob", "ScriptOutput", "ScriptResult",
           "ScriptRunner", "exchange", "runner_source", "script_unavailable", "stage_mounts",
           "workspace_stream"]

BASE_PATH = "/usr/local/bin:/usr/bin:/bin"
SHM_MB = 64  # /dev/shm
# Seconds allowed on top of the command's limit: starting the sandbox, unpacking, the report.
SCRIPT_MARGIN = 30.0
_REPORT_CAP = 1 << 20


@dataclass(frozen=True)
class ScriptOutput:
    """One output file as the runner found it after the command ended."""

    present: bool
    regular: bool = False  # a plain file (not a link, folder or device)
    text: str = ""
    truncated: bool = False
    reason: str = ""


@dataclass(frozen=True)
class ScriptResult:
    """How a script job ended. ``exit_code`` is None when it timed out; negative when a
    signal killed it (as ``subprocess``)."""

    exit_code: int | None
    timed_out: bool
    seconds: float
    outputs: dict[str, ScriptOutput]
    links_removed: int = 0
    workspace_error: str | None = None  # the workspace could not be unpacked (e.g. too large)
    log_tail: str = ""


@dataclass(frozen=True)
class ScriptJob:
    """A command over a private copy of ``workspace``.

    ``memory_mb`` holds everything the job keeps (a memory cgroup where one can be made): its
    processes and the files in its tmpfs folders, whose sizes must fit in it.

    ``mounts`` maps host folders to read-only places inside. ``workdir`` (the copy) and
    ``output_dir`` are empty tmpfs folders of at most ``workspace_mb``/``output_mb``. Links in
    the workspace that resolve to ``output_dir`` (or into ``guarded``) are removed before the
    command runs. ``path`` folders are put before ``BASE_PATH``; ``image`` and ``dockerfile``
    are for container backends."""

    argv: tuple[str, ...]
    workspace: str | None
    mounts: tuple[tuple[str, str], ...] = ()
    workdir: str = "/app"
    output_dir: str = "/logs/verifier"
    outputs: tuple[str, ...] = ()
    log_name: str = "test-stdout.txt"
    time_limit: float = 600.0
    memory_mb: int = 2048
    processes: int = 256
    file_mb: int = 512
    open_files: int = 1024
    workspace_mb: int = 1024
    output_mb: int = 16
    tmp_mb: int = 512
    env: Mapping[str, str] = field(default_factory=dict)
    path: tuple[str, ...] = ()
    guarded: tuple[str, ...] = ("/proc",)
    image: str | None = None
    dockerfile: str | None = None  # container backends build this image (its folder the context)

    def __post_init__(self) -> None:
        if not self.argv:
            raise ConfigError("a script job needs a command")
        for name in ("time_limit", "memory_mb", "processes", "file_mb", "open_files",
                     "workspace_mb", "output_mb", "tmp_mb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"script job {name}: must be a positive number, got {value!r}")
        if self.workspace_mb + self.output_mb + self.tmp_mb + SHM_MB > self.memory_mb:
            raise ConfigError(f"script job: its tmpfs folders (workspace {self.workspace_mb} MB, "
                              f"output {self.output_mb}, /tmp {self.tmp_mb}, /dev/shm {SHM_MB}) "
                              f"must fit in its memory ({self.memory_mb} MB), which holds them")
        for inside in (self.workdir, self.output_dir, *(m[1] for m in self.mounts)):
            if not inside.startswith("/") or inside in ("/", "/usr", "/proc", "/dev", "/tmp"):
                raise ConfigError(f"script job: {inside!r} cannot be mounted over")

    def runner_job(self) -> dict[str, Any]:
        """What the in-sandbox runner reads (its first stdin line)."""
        env = {"PATH": ":".join([*self.path, BASE_PATH]), "HOME": "/tmp", "LANG": "C.UTF-8",
               "TMPDIR": "/tmp", **self.env}
        return {
            "argv": list(self.argv), "workdir": self.workdir, "output_dir": self.output_dir,
            "outputs": list(self.outputs), "log_name": self.log_name,
            "time_limit": self.time_limit, "env": env,
            "guarded": sorted({self.output_dir, *self.guarded}),
            "scratch": [self.output_dir, "/tmp", "/dev/shm"],
            "keep": [os.path.normpath(inside) for _, inside in self.mounts],
        }


class ScriptRunner(Protocol):
    """A backend that runs script jobs."""

    name: str

    def check_scripts(self, job: ScriptJob) -> None:
        """Raise ``SandboxUnavailable`` (saying what to fix) unless ``job`` could run."""
        ...

    def run_script(self, job: ScriptJob) -> ScriptResult:
        ...


@lru_cache(maxsize=1)
def runner_source() -> str:
    """The in-sandbox runner's text (passed to ``python3 -c``)."""
    folder = resources.files(__package__ or "rewardsmith.sandbox")
    return folder.joinpath("_script_runner.py").read_text(encoding="utf-8")


def workspace_stream(workspace: str | None, sink: IO[bytes]) -> None:
    """Write ``workspace`` to ``sink`` as a tar stream: a folder is archived (links kept as
    links, never followed; sockets left out), a tarball is copied as it is (the runner reads
    plain, gzip, bzip2 and xz tar). None is an empty workspace."""
    if workspace is None:
        with tarfile.open(fileobj=sink, mode="w|"):
            return
    if os.path.isdir(workspace):
        with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as archive:
            archive.add(workspace, arcname=".", recursive=True)
        return
    with open(workspace, "rb") as handle:
        while chunk := handle.read(1 << 16):
            sink.write(chunk)


def _check_workspace(workspace: str | None) -> None:
    if workspace is None:
        return
    if os.path.isdir(workspace):
        return
    if os.path.isfile(workspace):
        if not tarfile.is_tarfile(workspace):
            raise ValueError(f"workspace {workspace!r} is a file but not a tar archive "
                             f"(.tar, .tar.gz, .tar.bz2, .tar.xz)")
        return
    raise ValueError(f"workspace {workspace!r} does not exist")


def exchange(argv: list[str], job: ScriptJob, what: str, *, user: int | None = None,
             cgroup: MemoryCgroup | None = None) -> ScriptResult:
    """Start ``argv`` (a sandbox whose first process is the runner), send it the job and the
    workspace, and read its report; the whole sandbox is killed at the job's time limit plus
    ``SCRIPT_MARGIN``. ``ValueError`` for a workspace that is not there or not a tarball;
    ``SandboxError`` when the sandbox fails (no report)."""
    _check_workspace(job.workspace)
    command = argv
    if cgroup is not None:  # the first process joins the cgroup, then becomes the sandbox
        command = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', cgroup.procs, *argv]
    try:
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, close_fds=True,
            env={"PATH": "/usr/bin:/bin"}, user=user, group=user,
            extra_groups=[] if user is not None else None)
    except OSError as exc:
        raise SandboxError(f"{what}: cannot start {argv[0]!r}: {exc}") from exc
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    unread: list[OSError] = []  # the workspace could not be read here (not the sandbox's doing)
    feeder = threading.Thread(target=_feed, args=(process.stdin, job, unread), daemon=True)
    feeder.start()
    out, err, late = _collect(process, time.monotonic() + job.time_limit + SCRIPT_MARGIN)
    if late or len(out) > _REPORT_CAP:
        kill_group(process)
    code = process.wait()
    feeder.join(timeout=5.0)
    report = _last_json_line(bytes(out))
    if unread:
        raise ValueError(f"the workspace {job.workspace!r} could not be read: {unread[0]}")
    if late:
        return ScriptResult(None, True, job.time_limit, {})
    if report is None:
        detail = err[-2000:].decode("utf-8", "replace").strip() or "no message"
        raise SandboxError(f"{what} ended (exit {code}) without a report: {detail}")
    if "fatal" in report:
        raise SandboxError(f"{what}: the runner failed: {report['fatal']}")
    return _result(report)


def _feed(stdin: IO[bytes], job: ScriptJob, unread: list[OSError]) -> None:
    try:
        stdin.write(json.dumps(job.runner_job()).encode("utf-8") + b"\n")
        workspace_stream(job.workspace, stdin)
    except BrokenPipeError:
        pass  # the sandbox ended or refused the rest: its report says why
    except OSError as exc:
        if exc.filename is not None:  # a file of the workspace, not the pipe
            unread.append(exc)
    except ValueError:
        pass  # the pipe was closed under the writer: as a broken pipe
    finally:
        try:
            stdin.close()
        except OSError:
            pass


def _collect(process: subprocess.Popen[bytes], deadline: float) -> tuple[bytearray, bytearray,
                                                                          bool]:
    assert process.stdout is not None and process.stderr is not None
    out, err = bytearray(), bytearray()
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ, out)
    selector.register(process.stderr, selectors.EVENT_READ, err)
    try:
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return out, err, True
            for key, _ in selector.select(min(left, 1.0)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                sink: bytearray = key.data
                sink += chunk
                if len(err) > 65536:
                    del err[:-65536]
                if len(out) > _REPORT_CAP:
                    return out, err, False
    finally:
        selector.close()
        process.stdout.close()
        process.stderr.close()
    return out, err, False


def _last_json_line(out: bytes) -> dict[str, Any] | None:
    lines = [line for line in out.split(b"\n") if line.strip()]
    if not lines:
        return None
    try:
        found = json.loads(lines[-1])
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _result(report: dict[str, Any]) -> ScriptResult:
    if report.get("workspace_error"):
        return ScriptResult(None, False, 0.0, {}, workspace_error=str(report["workspace_error"]))
    outputs = {}
    for name, found in (report.get("outputs") or {}).items():
        if isinstance(found, dict):
            outputs[str(name)] = ScriptOutput(
                bool(found.get("present")), bool(found.get("regular")),
                str(found.get("text") or ""), bool(found.get("truncated")),
                str(found.get("reason") or ""))
    code = report.get("exit_code")
    return ScriptResult(
        exit_code=code if isinstance(code, int) else None,
        timed_out=bool(report.get("timed_out")),
        seconds=float(report.get("seconds") or 0.0),
        outputs=outputs,
        links_removed=int(report.get("links_removed") or 0),
        log_tail=str(report.get("log_tail") or ""),
    )


def stage_mounts(mounts: tuple[tuple[str, str], ...], staged: str, *,
                 copy_all: bool = False) -> list[tuple[str, str]]:
    """Copies of the mounts' folders that the sandbox's user (nobody) can read: the originals
    may sit under a folder only root may enter, or hold files only root may read. A folder
    mounted at its own path (a Python environment: large, and it must stay where it was made)
    is mounted as it is unless ``copy_all``."""
    os.chmod(staged, 0o755)
    found = []
    for index, (host, inside) in enumerate(mounts):
        if not os.path.exists(host):
            raise SandboxUnavailable(f"cannot mount {host!r}: it does not exist")
        if (copy_all or inside != host) and os.path.isdir(host):
            copy = os.path.join(staged, str(index))
            shutil.copytree(host, copy, symlinks=True)
            for folder, _dirs, files in os.walk(copy):
                os.chmod(folder, 0o755)
                for name in files:
                    path = os.path.join(folder, name)
                    if not os.path.islink(path):
                        os.chmod(path, 0o644 | (os.stat(path).st_mode & 0o111))
            host = copy
        else:
            _check_reachable(host)
        found.append((host, inside))
    return found


def _check_reachable(path: str) -> None:
    """A folder mounted as it is: the sandbox's user (nobody, not root) must be able to enter
    every folder above it."""
    here = os.path.dirname(os.path.abspath(path))
    while here not in ("/", ""):
        if not os.stat(here).st_mode & stat.S_IXOTH:
            raise SandboxUnavailable(f"cannot mount {path!r}: the sandbox's user (nobody) "
                                     f"cannot enter {here!r}; make it searchable "
                                     f"('chmod o+x {here}') or put it elsewhere")
        here = os.path.dirname(here)


def script_unavailable(name: str) -> SandboxUnavailable:
    return SandboxUnavailable(
        f"sandbox {name!r} cannot run verifier scripts: they need folders mounted where the "
        f"script expects them; use sandbox: bubblewrap or sandbox: container")

