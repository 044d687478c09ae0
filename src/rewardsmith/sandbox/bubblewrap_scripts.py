"""Script jobs under bubblewrap: the code sandbox's isolation, with a workspace and mounts.

The same namespaces, user and read-only ``/usr`` as ``bubblewrap.py``; in addition the
workspace folder and the output folder are size-capped tmpfs folders, the job's mounts
(a task's tests, a Python environment) are read-only binds, and ``/etc/alternatives`` is
mounted read-only so that ``awk`` and its kin resolve. Memory is capped by a memory cgroup
where one can be made (every byte the job holds: its processes and its tmpfs files), else by
each process's address space and the tmpfs sizes; processes, file size and open files by
resource limits (``prlimit``), which the sandbox inherits.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading

from ._cgroup import MemoryCgroup, memory_cgroups_available
from .bubblewrap import CGROUP_HEADROOM_MB, NOBODY, BubblewrapSandbox
from .jobs import SandboxUnavailable
from .runtimes import SYSTEM_TREE, python_runtime
from .script_jobs import (
    BASE_PATH,
    SHM_MB,
    ScriptJob,
    ScriptResult,
    exchange,
    runner_source,
    stage_mounts,
)

__all__ = ["BubblewrapScripts"]

_PRLIMIT = ("/usr/bin/prlimit", "/bin/prlimit")


class BubblewrapScripts:
    """Runs ``ScriptJob``s under ``bwrap``; ``check_scripts`` fails closed with what to fix."""

    name = "bubblewrap"

    def __init__(self, bwrap: str | None = None) -> None:
        self._code = BubblewrapSandbox(bwrap)
        self._checked: str | None | bool = False  # False: not yet; None: works; str: reason
        self._lock = threading.Lock()

    def argv(self, job: ScriptJob, mounts: list[tuple[str, str]]) -> list[str]:
        """The ``bwrap`` command line, with ``mounts`` (host, inside) bound read-only."""
        bwrap = self._code._binary()
        python, python_mounts = python_runtime()
        args = [
            bwrap, "--unshare-all", "--unshare-user", "--disable-userns",
            "--die-with-parent", "--new-session", "--as-pid-1",
            "--uid", str(NOBODY), "--gid", str(NOBODY), "--hostname", "sandbox",
            "--cap-drop", "ALL", "--clearenv",
            "--setenv", "PATH", BASE_PATH, "--setenv", "HOME", "/tmp", "--setenv", "LANG",
            "C.UTF-8",
            "--ro-bind", SYSTEM_TREE, SYSTEM_TREE,
        ]
        for name in ("bin", "lib", "lib64", "lib32", "sbin"):
            path = f"/{name}"
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        if os.path.isdir("/etc/alternatives"):
            args += ["--ro-bind", "/etc/alternatives", "/etc/alternatives"]
        for mount in python_mounts:
            args += ["--ro-bind", mount, mount]
        args += [
            "--proc", "/proc", "--dev", "/dev",
            "--size", str(SHM_MB << 20), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
            "--size", str(job.tmp_mb << 20), "--perms", "1777", "--tmpfs", "/tmp",
            "--size", str(job.workspace_mb << 20), "--perms", "0755",
            "--tmpfs", job.workdir,
            "--size", str(job.output_mb << 20), "--perms", "0755", "--tmpfs", job.output_dir,
        ]
        for host, inside in mounts:
            args += ["--ro-bind", host, inside]
        args += ["--remount-ro", "/", "--chdir", "/", python, "-I", "-S", "-c", runner_source()]
        return args

    def _limits(self, job: ScriptJob, cgroup: bool) -> list[str]:
        prlimit = next((p for p in _PRLIMIT if os.access(p, os.X_OK)), None) or \
            shutil.which("prlimit")
        if prlimit is None:
            raise SandboxUnavailable("verifier scripts need 'prlimit' (util-linux): run "
                                     "'apt-get install -y util-linux'")
        limits = [prlimit, f"--nproc={job.processes}", f"--fsize={job.file_mb << 20}",
                  f"--nofile={job.open_files}", "--core=0"]
        if not cgroup:  # no cgroup: each process's address space is capped instead
            limits.append(f"--as={(job.memory_mb + CGROUP_HEADROOM_MB) << 20}")
        return [*limits, "--"]

    def run_script(self, job: ScriptJob) -> ScriptResult:
        user = NOBODY if os.geteuid() == 0 else None
        staged = tempfile.mkdtemp(prefix="rewardsmith-mounts-")
        cgroup = None
        try:
            mounts = stage_mounts(job.mounts, staged) if user is not None else list(job.mounts)
            if memory_cgroups_available():
                # Everything the job holds counts: its processes and its tmpfs files.
                cgroup = MemoryCgroup.create((job.memory_mb + CGROUP_HEADROOM_MB) << 20,
                                             owner=user)
            argv = [*self._limits(job, cgroup is not None), *self.argv(job, mounts)]
            return exchange(argv, job, "the bubblewrap sandbox", user=user, cgroup=cgroup)
        finally:
            shutil.rmtree(staged, ignore_errors=True)
            if cgroup is not None:
                cgroup.remove()

    def check_scripts(self, job: ScriptJob) -> None:
        """Run a one-line script once per process (bubblewrap works, the runner reports)."""
        with self._lock:
            if self._checked is False:
                self._checked = self._probe()
        if isinstance(self._checked, str):
            raise SandboxUnavailable(self._checked)

    def _probe(self) -> str | None:
        try:
            self._code._binary()
            probe = ScriptJob(("/bin/sh", "-c", "echo ok > /logs/verifier/out"), None,
                              outputs=("out",), time_limit=10.0)
            result = self.run_script(probe)
        except SandboxUnavailable as exc:
            return str(exc)
        except Exception as exc:  # noqa: BLE001 - any failure here means it cannot run
            return f"the bubblewrap sandbox cannot run verifier scripts: {exc}"
        found = result.outputs.get("out")
        if found is None or found.text.strip() != "ok":
            return (f"the bubblewrap sandbox started but a script did not run: exit "
                    f"{result.exit_code}, {result.log_tail.strip()[-300:] or 'no output'}")
        return None
