"""The default sandbox: bubblewrap (``bwrap``), unprivileged Linux namespaces.

Each job runs in a fresh set of namespaces: its own network (no interface but a loopback of
its own), PID space (the harness is PID 1; when it ends every process of the job ends), IPC,
UTS and user namespace, mapped to an unprivileged uid (and, when rewardsmith runs as root,
started as the host's ``nobody`` so that no process of the job is root on the host kernel,
and process limits apply). The file system is ``/usr`` read-only, a private ``/proc`` and
``/dev``, and a size-capped tmpfs on ``/tmp``: no home folder, no project, no store, no
rollout file. The environment is empty but for PATH, HOME=/tmp and LANG.
"""

from __future__ import annotations

import os
import shutil
import threading
from functools import partial
from typing import Any

from ._cgroup import MemoryCgroup, memory_cgroups_available
from ._process import harness_source
from ._warm import WarmPool, WarmSandbox
from .jobs import Job, JobResult, Limits, SandboxError, SandboxUnavailable
from .runtimes import SYSTEM_TREE, Runtime, find_runtime

__all__ = ["BubblewrapSandbox", "CGROUP_HEADROOM_MB", "NOBODY"]

NOBODY = 65534
# A job's memory cgroup holds its limit plus this much for the runner and bwrap themselves.
CGROUP_HEADROOM_MB = 64
_INSTALL = ("install bubblewrap: 'apt-get install -y bubblewrap' (Debian/Ubuntu), "
            "'dnf install bubblewrap' (Fedora), or run 'make sandbox' in a rewardsmith checkout")
_USERNS = ("unprivileged user namespaces are not allowed here. Allow them with "
           "'sysctl -w kernel.unprivileged_userns_clone=1' (older Debian), "
           "'sysctl -w user.max_user_namespaces=15000', or on Ubuntu 24.04+ "
           "'sysctl -w kernel.apparmor_restrict_unprivileged_userns=0'; in a container, "
           "start it with a seccomp profile that allows unshare/clone of namespaces "
           "(e.g. docker run --security-opt seccomp=unconfined)")
_NONE_HINT = ("Only for code you trust: 'sandbox: none' in the component's params runs "
              "programs on this machine without isolation.")


class BubblewrapSandbox:
    """Runs jobs under ``bwrap``; ``check(language)`` fails closed with what to fix."""

    name = "bubblewrap"

    def __init__(self, bwrap: str | None = None) -> None:
        self._bwrap = bwrap
        self._checked: dict[str, str | None] = {}  # language -> None (works) or the reason
        self._lock = threading.Lock()
        self._pool = WarmPool()

    def _binary(self) -> str:
        found = self._bwrap or shutil.which("bwrap") or shutil.which(
            "bwrap", path="/usr/bin:/usr/local/bin:/bin")
        if found is None or not os.access(found, os.X_OK):
            raise SandboxUnavailable(f"the bubblewrap sandbox cannot start: 'bwrap' is not "
                                     f"installed; {_INSTALL}. {_NONE_HINT}")
        return found

    def argv(self, runtime: Runtime, limits: Limits) -> list[str]:
        """The command line that starts the harness inside a fresh sandbox."""
        return [*self.isolation_argv(runtime, limits),
                runtime.python, *runtime.flags, "-c", harness_source()]

    def isolation_argv(self, runtime: Runtime, limits: Limits) -> list[str]:
        """``bwrap`` and its options: the command to run inside the sandbox comes after."""
        args = [
            self._binary(),
            "--unshare-all", "--unshare-user", "--disable-userns",
            "--die-with-parent", "--new-session", "--as-pid-1",
            "--uid", str(NOBODY), "--gid", str(NOBODY), "--hostname", "sandbox",
            "--cap-drop", "ALL",
            "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
            "--setenv", "LANG", "C.UTF-8",
            "--ro-bind", SYSTEM_TREE, SYSTEM_TREE,
        ]
        for name in ("bin", "lib", "lib64", "lib32", "sbin"):
            path = f"/{name}"
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        outside_tmp = [m for m in runtime.mounts if m not in runtime.keep]
        for mount in outside_tmp:
            args += ["--ro-bind", mount, mount]
        # Every writable place is a tmpfs no larger than the memory limit; /dev itself is
        # read-only (its own tmpfs would have no cap).
        args += [
            "--proc", "/proc", "--dev", "/dev",
            "--size", str(min(limits.shm_mb, limits.memory_mb) << 20), "--tmpfs", "/dev/shm",
            "--remount-ro", "/dev",
            "--size", str(min(limits.tmpfs_mb, limits.memory_mb) << 20), "--tmpfs", "/tmp",
        ]
        for mount in runtime.keep:  # an environment under /tmp: mounted on the tmpfs
            args += ["--ro-bind", mount, mount]
        args += ["--remount-ro", "/", "--chdir", "/tmp"]
        return args

    def check(self, language: str) -> None:
        """Start one sandbox for ``language`` (once per process) or raise what to fix."""
        with self._lock:
            if language not in self._checked:
                self._checked[language] = self._probe(language)
        reason = self._checked[language]
        if reason is not None:
            raise SandboxUnavailable(reason)

    def _probe(self, language: str, environment: str | None = None) -> str | None:
        try:
            self._binary()
            result = self.run(_probe_job(language, environment))
        except SandboxUnavailable as exc:
            return str(exc)
        except SandboxError as exc:
            text = str(exc)
            if "namespace" in text.lower() or "Operation not permitted" in text:
                return f"the bubblewrap sandbox cannot start: {_USERNS}. ({text}) {_NONE_HINT}"
            return f"the bubblewrap sandbox cannot start: {text}. {_NONE_HINT}"
        runs = result.runs
        if not result.compiled or not runs or runs[0].status != "done" or \
                runs[0].stdout.strip() != "sandbox ok":
            detail = result.compile_message or (runs[0].stderr if runs else "") or "no output"
            return (f"the bubblewrap sandbox started but could not run a {language} program: "
                    f"{detail.strip()[-500:]}")
        return None

    def run(self, job: Job) -> JobResult:
        """Run ``job`` in a warm sandbox of its kind (started on first use, see ``_warm``)."""
        runtime = find_runtime(job.language, job.environment)
        user = NOBODY if os.geteuid() == 0 else None
        argv = [*self.argv(runtime, job.limits), "jobs"]
        limits = job.limits
        cgroup = memory_cgroups_available()
        tests_limit = (limits.memory_mb + CGROUP_HEADROOM_MB) << 20
        compile_limit = (max(limits.memory_mb, limits.compile_memory_mb)
                         + CGROUP_HEADROOM_MB) << 20
        compiles = job.language == "cpp"

        def start() -> WarmSandbox:
            group = MemoryCgroup.create(tests_limit, owner=user) if cgroup else None
            command = argv
            if group is not None:
                # The first process joins the cgroup, then becomes bwrap: nothing runs outside.
                command = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', group.procs, *argv]
            try:
                return WarmSandbox(command, user, group)
            except OSError as exc:
                if group is not None:
                    group.remove()
                raise SandboxError(f"the bubblewrap sandbox: cannot start {argv[0]!r}: "
                                   f"{exc}") from exc

        def use(warm: WarmSandbox) -> JobResult:
            group = warm.group
            after_compile = None
            if group is not None and compiles:  # the compiler's limit, then the tests'
                group.set_limit(compile_limit)
                after_compile = partial(group.set_limit, tests_limit)
            extra = {**runtime.extra, "keep": list(runtime.keep), "cgroup": group is not None}
            return warm.run(job, extra, "the bubblewrap sandbox", after_compile)

        return self._pool.run((tuple(argv), compiles, cgroup), start, use)

    def check_environment(self, environment: str) -> None:
        """Raise ``SandboxUnavailable`` unless Python programs run in ``environment``."""
        with self._lock:
            key = f"python@{environment}"
            if key not in self._checked:
                self._checked[key] = self._probe("python", environment)
        reason = self._checked[key]
        if reason is not None:
            raise SandboxUnavailable(reason)


_PROBES: dict[str, str] = {
    "python": 'print("sandbox " + input())',
    "cpp": '#include <iostream>\n#include <string>\nint main(){std::string s;std::cin>>s;'
           'std::cout<<"sandbox "<<s<<"\\n";}',
    "javascript": 'const s=require("fs").readFileSync(0,"utf8").trim();'
                  'console.log("sandbox "+s);',
}


def _probe_job(language: str, environment: str | None = None) -> Job:
    source: Any = _PROBES.get(language)
    if source is None:
        raise SandboxUnavailable(f"language {language!r} is not supported")
    return Job(language, source, ({"kind": "stdin", "input": "ok\n"},),
               Limits(time=10.0, total_time=10.0), environment=environment)
