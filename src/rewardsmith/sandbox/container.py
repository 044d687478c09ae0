"""``sandbox: container``: script jobs in a podman or docker container of the task's own image.

A task whose tests need their own system (``environment/Dockerfile``, or ``[environment]
docker_image`` in a Harbor task) runs here. The image is used as it is on this machine: an
image name must already be there (``podman pull``), a Dockerfile is built once per process and
content (tag ``rewardsmith-task-<digest>``); rewardsmith never pulls.

Each job is one fresh container: no network, every capability dropped, no new privileges, as
the unprivileged user 65534, its root file system read-only; the workspace, the output folder
and ``/tmp`` are size-capped tmpfs folders; memory, processes, file size and open files are
capped (``--memory``, ``--pids-limit``, ``--ulimit``); the task's tests are mounted
read-only. Its first process is the same runner as under bubblewrap (``_script_runner``), so
the image needs ``python3`` (3.8 or later, with ``ctypes``) as well as what its tests use.

Code jobs (``reward: code``) do not run here: ``check`` says so at load. Podman is preferred
when both are installed. A machine where podman's default OCI runtime cannot start containers
(crun on a host with hybrid cgroups, say) needs ``runtime = "runc"`` in
``/etc/containers/containers.conf``; the load-time check shows podman's own message.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import uuid

from .bubblewrap import CGROUP_HEADROOM_MB
from .jobs import Job, JobResult, SandboxError, SandboxUnavailable
from .script_jobs import ScriptJob, ScriptResult, exchange, runner_source, stage_mounts

__all__ = ["ContainerSandbox", "USER"]

USER = "65534:65534"
_SEARCH = "/usr/bin:/usr/local/bin:/bin"
_INSTALL = ("the container sandbox needs podman or docker, and neither is installed: run "
            "'apt-get install -y podman' (Debian/Ubuntu) or 'dnf install podman'")
_CODE = ("the container sandbox runs verifier scripts (reward: verifier_script); code rewards "
         "run under bubblewrap (sandbox: bubblewrap)")
_NPROC = 4096  # per user on the host (not per container): the real cap is --pids-limit


class ContainerSandbox:
    """Runs ``ScriptJob``s with podman or docker; ``check_scripts`` fails closed."""

    name = "container"

    def __init__(self, binary: str | None = None) -> None:
        self._binary = binary
        self._lock = threading.Lock()
        self._checked: dict[str, str | None] = {}  # image -> None (works) or the reason
        self._built: dict[str, str] = {}  # Dockerfile folder digest -> image tag

    # -- the Sandbox protocol: code jobs are not run in containers

    def check(self, language: str) -> None:
        raise SandboxUnavailable(_CODE)

    def run(self, job: Job) -> JobResult:
        raise SandboxError(_CODE)

    # -- script jobs

    def runtime(self) -> str:
        """The container runtime's program (podman first, then docker)."""
        found = self._binary
        for name in ("podman", "docker"):
            found = found or shutil.which(name, path=_SEARCH) or shutil.which(name)
        if found is None or not os.access(found, os.X_OK):
            raise SandboxUnavailable(_INSTALL)
        return found

    def image(self, job: ScriptJob) -> str:
        """The job's image: its name, else its Dockerfile built (once per content)."""
        if job.dockerfile is not None:
            return self._build(job.dockerfile)
        if not job.image:
            raise SandboxUnavailable("the container sandbox needs an image: the task's "
                                     "[environment] docker_image, its environment/Dockerfile, "
                                     "or params.image")
        return job.image

    def _build(self, dockerfile: str) -> str:
        context = os.path.dirname(os.path.abspath(dockerfile))
        digest = _folder_digest(context)
        with self._lock:
            found = self._built.get(digest)
            if found is not None:
                return found
            tag = f"localhost/rewardsmith-task-{digest[:16]}:latest"
            done = _call([self.runtime(), "build", "-q", "-t", tag, "-f", dockerfile, context],
                         timeout=1800)
            if done.returncode != 0:
                raise SandboxUnavailable(f"the container sandbox could not build {dockerfile}: "
                                         f"{_tail(done)}")
            self._built[digest] = tag
            return tag

    def check_scripts(self, job: ScriptJob) -> None:
        """Start one container of the job's image (once per image) or raise what to fix; with
        no image named yet (each task brings its own), only the runtime is checked."""
        runtime = self.runtime()
        if job.dockerfile is None and not job.image:
            return
        image = self.image(job)
        with self._lock:
            if image not in self._checked:
                self._checked[image] = self._probe(runtime, image)
            reason = self._checked[image]
        if reason is not None:
            raise SandboxUnavailable(reason)

    def _probe(self, runtime: str, image: str) -> str | None:
        found = _call([runtime, "image", "inspect", "--format", "{{.Id}}", image], timeout=60)
        if found.returncode != 0:
            return (f"the container sandbox: image {image!r} is not on this machine "
                    f"({_tail(found)}); pull or build it first (podman pull {image}): "
                    f"rewardsmith never pulls")
        probe = ScriptJob(("/bin/sh", "-c", "echo ok > /logs/verifier/out"), None,
                          outputs=("out",), time_limit=30.0, image=image)
        try:
            result = self.run_script(probe)
        except SandboxError as exc:
            return f"the container sandbox cannot run {image!r}: {exc}"
        out = result.outputs.get("out")
        if out is None or out.text.strip() != "ok":
            return (f"the container sandbox started {image!r} but a script did not run: exit "
                    f"{result.exit_code}, {result.log_tail.strip()[-300:] or 'no output'}")
        return None

    def argv(self, job: ScriptJob, image: str, mounts: list[tuple[str, str]],
             name: str) -> list[str]:
        """The ``run`` command line for ``job``."""
        memory = job.memory_mb + CGROUP_HEADROOM_MB  # its processes and its tmpfs files
        args = [
            self.runtime(), "run", "--rm", "-i", "--pull", "never", "--name", name,
            "--network", "none",
            "--hostname", "sandbox", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "--user", USER, "--read-only",
            "--pids-limit", str(job.processes), "--memory", f"{memory}m",
            "--memory-swap", f"{memory}m",
            "--ulimit", f"nofile={job.open_files}:{job.open_files}",
            "--ulimit", f"nproc={_NPROC}:{_NPROC}",
            "--ulimit", f"fsize={job.file_mb << 20}:{job.file_mb << 20}",
            "--ulimit", "core=0:0",
            "--tmpfs", f"/tmp:rw,size={job.tmp_mb}m,mode=1777",
            "--tmpfs", f"{job.workdir}:rw,size={job.workspace_mb}m,mode=1777",
            "--tmpfs", f"{job.output_dir}:rw,size={job.output_mb}m,mode=1777",
            "--workdir", "/", "--entrypoint", "python3",
        ]
        for host, inside in mounts:
            args += ["--mount", f"type=bind,source={host},target={inside},readonly"]
        return [*args, image, "-I", "-S", "-c", runner_source()]

    def run_script(self, job: ScriptJob) -> ScriptResult:
        image = self.image(job)
        name = f"rewardsmith-{uuid.uuid4().hex[:16]}"
        staged = tempfile.mkdtemp(prefix="rewardsmith-mounts-")
        try:
            mounts = stage_mounts(job.mounts, staged, copy_all=True)
            result = exchange(self.argv(job, image, mounts, name), job, "the container sandbox")
        finally:
            shutil.rmtree(staged, ignore_errors=True)
            # A container whose client was killed at the deadline keeps running: remove it.
            _call([self.runtime(), "rm", "-f", name], timeout=60)
        return result


def _call(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(argv, 124, "", f"timed out after {exc.timeout} s")
    except OSError as exc:
        return subprocess.CompletedProcess(argv, 127, "", str(exc))


def _tail(done: subprocess.CompletedProcess[str]) -> str:
    text = (done.stderr or done.stdout or "").strip()
    return text[-500:] or f"exit {done.returncode}"


def _folder_digest(folder: str) -> str:
    """The content of a build context: names, modes and bytes of every file, in order."""
    digest = hashlib.blake2b(digest_size=16)
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, folder).encode("utf-8", "surrogateescape"))
            if os.path.islink(path):
                digest.update(b"L" + os.readlink(path).encode("utf-8", "surrogateescape"))
                continue
            digest.update(oct(os.stat(path).st_mode & 0o777).encode())
            with open(path, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 16), b""):
                    digest.update(chunk)
    return digest.hexdigest()
