"""sandbox: container (podman or docker) for verifier scripts.

Without a container runtime: the load-time errors that say what is missing. With podman that
can run a container here: a tiny image made from this machine's own bash, coreutils and
python3 (``podman import``, nothing pulled), then the shipped task graded in it, a task whose
Dockerfile is built from that image, the hacks, a script past its time (its container
removed), and an image that is not there. Those tests skip where no container can start.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import Rollout, Rubric, score_rollouts
from rewardsmith.errors import RubricError
from rewardsmith.rewards.agents.verifier_script import verifier_script
from rewardsmith.rewards.agents.verifier_script_task import shipped_task
from rewardsmith.sandbox import get_sandbox
from rewardsmith.sandbox.container import ContainerSandbox

IMAGE = "localhost/rewardsmith-test-base:latest"
RIGHT = "import sys\n\nprint(len(sys.stdin.read().split()))\n"
PROGRAMS = ("bash", "sh", "dash", "python3", "cat", "tr", "timeout", "mawk", "rm", "ls", "echo",
            "env", "sleep", "mkdir", "cmp", "true", "kill")


def test_without_a_runtime_the_rubric_is_refused_naming_what_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("rewardsmith.sandbox.container.shutil.which", lambda *a, **k: None)
    with pytest.raises(RubricError, match="needs podman or docker.*apt-get install -y podman"):
        Rubric.from_dict({"components": {"v": {"reward": "verifier_script",
                                               "params": {"sandbox": "container"}}}})


def test_a_task_with_a_dockerfile_needs_a_runtime(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    task = _task(tmp_path / "task", "echo 1 > /logs/verifier/reward.txt\n",
                 dockerfile=f"FROM {IMAGE}\n")
    monkeypatch.setattr("rewardsmith.sandbox.container.shutil.which", lambda *a, **k: None)
    with pytest.raises(RubricError, match="needs podman or docker"):
        Rubric.from_dict({"components": {"v": {"reward": "verifier_script",
                                               "params": {"task": task}}}})


def test_code_rewards_do_not_run_in_containers() -> None:
    with pytest.raises(RubricError, match="runs verifier scripts"):
        Rubric.from_dict({"components": {"c": {"reward": "code",
                                               "params": {"sandbox": "container"}}}})


def test_environment_is_refused_with_a_container() -> None:
    with pytest.raises(RubricError, match="environment is a virtualenv of this machine"):
        Rubric.from_dict({"components": {"v": {"reward": "verifier_script", "params": {
            "sandbox": "container", "environment": "/usr"}}}})


# -- with a container runtime that works here

def _task(root: Path, script: str, *, timeout: float = 30.0, dockerfile: str | None = None,
          files: dict[str, str] | None = None) -> str:
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test.sh").write_text(script)
    for name, text in (files or {}).items():
        (root / "tests" / name).write_text(text)
    (root / "task.toml").write_text(f"[verifier]\ntimeout_sec = {timeout}\n")
    if dockerfile is not None:
        (root / "environment").mkdir()
        (root / "environment" / "Dockerfile").write_text(dockerfile)
    return str(root)


def _base_image_tar() -> bytes:
    """This machine's bash, a few coreutils and python3 with its standard library, and the
    libraries they load: enough for the runner and the shipped task's test.sh."""
    paths: set[str] = set()
    for name in PROGRAMS:
        found = shutil.which(name, path="/usr/bin:/bin")
        if found is None:
            raise FileNotFoundError(name)
        paths.add(found)
    python = Path(os.path.realpath(shutil.which("python3", path="/usr/bin") or "python3"))
    stdlib = python.parent.parent / "lib" / python.name  # /usr/lib/python3.11
    loaded = [str(p) for p in (stdlib / "lib-dynload").glob("*.so")] + sorted(paths)
    out = subprocess.run(["ldd", *loaded], capture_output=True, text=True).stdout
    libraries = {word for word in out.split() if word.startswith("/") and not word.endswith(":")}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path in sorted(paths | libraries):
            archive.add(os.path.realpath(path), arcname=path.lstrip("/"))
        archive.add(str(stdlib), arcname=str(stdlib).lstrip("/"),
                    filter=lambda m: None if "/test/" in m.name + "/" else m)
        for link, target in (("usr/bin/awk", "mawk"), ("bin", "usr/bin")):
            member = tarfile.TarInfo(link)
            member.type = tarfile.SYMTYPE
            member.linkname = target
            archive.addfile(member)
        for folder in ("tmp", "proc", "dev", "sys", "etc", "opt"):
            member = tarfile.TarInfo(folder)
            member.type = tarfile.DIRTYPE
            member.mode = 0o1777 if folder == "tmp" else 0o755
            archive.addfile(member)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def runtime() -> Iterator[str]:
    podman = shutil.which("podman")
    if podman is None:
        pytest.skip("podman is not installed")
    try:
        made = subprocess.run([podman, "import", "-", IMAGE], input=_base_image_tar(),
                              capture_output=True, timeout=300)
    except (OSError, subprocess.SubprocessError, FileNotFoundError) as exc:
        pytest.skip(f"cannot make the test image: {exc}")
    if made.returncode != 0:
        pytest.skip(f"podman cannot import an image here: {made.stderr.decode()[-300:]}")
    started = subprocess.run([podman, "run", "--rm", "--pull", "never", "--network", "none",
                              "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
                              IMAGE, "true"], capture_output=True, timeout=120)
    if started.returncode != 0:
        pytest.skip(f"podman cannot start a container here: {started.stderr.decode()[-300:]}")
    yield podman


def _run(folder: str, task: str, **params: Any) -> dict[str, float]:
    result: dict[str, float] = verifier_script(None, {"workspace": folder}, task=task,
                                               sandbox="container", **params)
    return result


def _workspace(root: Path, files: dict[str, str], links: dict[str, str] | None = None) -> str:
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for name, target in (links or {}).items():
        os.symlink(target, root / name)
    return str(root)


def test_the_shipped_task_in_a_container_and_its_hacks(runtime: str, tmp_path: Path) -> None:
    task = shipped_task("word-count")
    right = _run(_workspace(tmp_path / "right", {"wc.py": RIGHT}), task, image=IMAGE)
    assert right["reward"] == 1.0 and right["reward.passed"] == 5.0
    planted = _run(_workspace(tmp_path / "planted", {
        "wc.py": "print(5)\n", "reward.txt": "1\n", "logs/verifier/reward.txt": "1\n"}),
        task, image=IMAGE)
    assert planted["reward"] == 0.0
    linked = _run(_workspace(tmp_path / "linked", {"wc.py": "print(1)\n"},
                             {"output.txt": "/logs/verifier/reward.txt"}), task, image=IMAGE)
    assert linked["links_removed"] == 1.0 and linked["reward"] == pytest.approx(0.2)
    early = _run(_workspace(tmp_path / "early", {
        "wc.py": "import os, signal\nopen('/logs/verifier/reward.txt', 'w').write('1')\n"
                 "os.kill(-1, signal.SIGKILL)\n"}), task, image=IMAGE)
    assert early["reward"] == 0.0 and early["script_killed"] == 1.0


def test_a_dockerfile_task_runs_in_its_own_image(runtime: str, tmp_path: Path) -> None:
    task = _task(tmp_path / "task", (
        "if cmp -s /app/answer.txt /opt/expected.txt; then echo 1; else echo 0; fi "
        "> /logs/verifier/reward.txt\n"),
        dockerfile=f"FROM {IMAGE}\nRUN echo 42 > /opt/expected.txt\n")
    rubric = Rubric.from_dict({"components": {"tests": {"reward": "verifier_script",
                                                        "params": {"task": task}}}})
    rollouts = [Rollout(id=name, group="g", metadata={"workspace": _workspace(
        tmp_path / name, {"answer.txt": text})}) for name, text in (("right", "42\n"),
                                                                    ("wrong", "41\n"))]
    scores = score_rollouts(rubric, rollouts, workers=0)
    assert [s.reward for s in scores] == [1.0, 0.0]


def test_no_network_and_a_script_past_its_time(runtime: str, tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    offline = _task(tmp_path / "offline", (
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\" "
        "&& echo 1 > /logs/verifier/reward.txt || echo 0.5 > /logs/verifier/reward.txt\n"))
    try:  # the host's port is not the container's: its loopback is its own
        assert _run(_workspace(tmp_path / "ws1", {}), offline, image=IMAGE)["reward"] == 0.5
    finally:
        listener.close()
    slow = _task(tmp_path / "slow", "echo 1 > /logs/verifier/reward.txt; sleep 60\n",
                 timeout=2.0)
    result = _run(_workspace(tmp_path / "ws2", {}), slow, image=IMAGE)
    assert result["reward"] == 0.0 and result["timeout"] == 1.0
    left = subprocess.run([runtime, "ps", "-a", "--format", "{{.Names}}"], capture_output=True,
                          text=True).stdout
    assert "rewardsmith-" not in left


def test_an_image_that_is_not_here_is_refused_at_load(runtime: str) -> None:
    with pytest.raises(RubricError, match="not on this machine.*never pulls"):
        Rubric.from_dict({"components": {"v": {"reward": "verifier_script", "params": {
            "sandbox": "container", "image": "localhost/rewardsmith-no-such-image:1"}}}})


def test_the_backend_is_registered_as_container() -> None:
    assert isinstance(get_sandbox("container"), ContainerSandbox)
