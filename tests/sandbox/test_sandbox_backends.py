"""Sandbox backends: failing closed at load, ``sandbox: none``, and other backends."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rewardsmith import Rollout, Rubric, score_rollouts
from rewardsmith.errors import RubricError
from rewardsmith.sandbox import (
    Job,
    JobResult,
    Limits,
    Sandbox,
    SandboxError,
    SandboxUnavailable,
    TestRun,
    get_sandbox,
    register_sandbox,
)
from rewardsmith.sandbox.bubblewrap import BubblewrapSandbox

NEEDS_ROOT_OR_USERNS = pytest.mark.skipif(
    BubblewrapSandbox()._probe("python") is not None, reason="bubblewrap cannot start here")


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder every user can enter (the sandbox is started as nobody when run as root)."""
    folder = Path(tempfile.mkdtemp(prefix="rs-fake-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _fake_bwrap(folder: Path, message: str) -> str:
    """A real executable that fails the way bwrap does when namespaces are not allowed."""
    script = folder / "bwrap"
    script.write_text(f"#!/bin/sh\necho '{message}' >&2\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(script)


def _rubric(sandbox: str) -> Rubric:
    return Rubric.from_dict({"components": {"tests": {"reward": "code",
                                                      "params": {"sandbox": sandbox}}}},
                            source="rubric.yaml")


def test_missing_bwrap_refuses_the_rubric_with_how_to_install(tmp_path: Path) -> None:
    register_sandbox("missing-bwrap", lambda: BubblewrapSandbox(str(tmp_path / "no-bwrap")))
    with pytest.raises(RubricError) as info:
        _rubric("missing-bwrap")
    text = str(info.value)
    assert "components.tests" in text
    assert "apt-get install -y bubblewrap" in text and "sandbox: none" in text


def test_no_user_namespaces_refuses_the_rubric_with_the_sysctl(open_dir: Path) -> None:
    fake = _fake_bwrap(open_dir, "bwrap: No permissions to creating new namespace, likely "
                                 "because the kernel does not allow non-privileged user "
                                 "namespaces.")
    register_sandbox("no-userns", lambda: BubblewrapSandbox(fake))
    with pytest.raises(RubricError) as info:
        _rubric("no-userns")
    text = str(info.value)
    assert "user namespaces" in text and "sysctl" in text
    with pytest.raises(SandboxUnavailable):
        get_sandbox("no-userns").check("python")


def test_the_check_is_made_once_per_language_and_cached(tmp_path: Path) -> None:
    sandbox = BubblewrapSandbox(str(tmp_path / "no-bwrap"))
    for _ in range(2):
        with pytest.raises(SandboxUnavailable, match="not installed"):
            sandbox.check("python")
    assert list(sandbox._checked) == ["python"]


def test_sandbox_none_runs_on_the_host_when_asked() -> None:
    rollouts = [Rollout(id="r", group="g", prompt="p", completion="print(input()[::-1])",
                        answer={"inputs": ["abc\n"], "outputs": ["cba"]})]
    scores = score_rollouts(_rubric("none"), rollouts, workers=0)
    assert scores[0].reward == 1.0
    # Limits still hold without isolation.
    result = get_sandbox("none").run(Job("python", "while True: pass",
                                         ({"kind": "stdin", "input": ""},),
                                         Limits(time=0.5)))
    assert result.runs[0].status == "timeout"


class EchoService:
    """A backend of another kind: answers every stdin test with its own input."""

    name = "echo"

    def check(self, language: str) -> None:
        if language != "python":
            raise SandboxUnavailable("echo runs python only")

    def run(self, job: Job) -> JobResult:
        runs = tuple(TestRun(i, "done", 0, stdout=str(t.get("input", "")))
                     for i, t in enumerate(job.tests))
        return JobResult(True, None, runs)


def test_another_backend_plugs_in_through_the_protocol() -> None:
    register_sandbox("echo", EchoService)
    assert isinstance(get_sandbox("echo"), Sandbox)
    rubric = _rubric("echo")
    rollouts = [Rollout(id="r", group="g", prompt="p", completion="anything",
                        answer={"inputs": ["7\n", "8\n"], "outputs": ["7", "9"]})]
    assert score_rollouts(rubric, rollouts, workers=0)[0].reward == 0.5
    with pytest.raises(RubricError, match="python only"):
        Rubric.from_dict({"components": {"c": {"reward": "code", "params": {
            "sandbox": "echo", "language": "cpp"}}}})


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="time"):
        Limits(time=0)
    with pytest.raises(ValueError, match="memory_mb"):
        Limits(memory_mb=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="language"):
        Job("cobol", "", ())


@NEEDS_ROOT_OR_USERNS
def test_a_sandbox_that_fails_mid_run_is_an_error_not_a_zero(tmp_path: Path) -> None:
    # A harness that never reports: the sandbox's failure, not the program's.
    sandbox = BubblewrapSandbox()
    job = Job("python", "print(1)", ({"kind": "stdin", "input": ""},))
    argv = sandbox.argv(__import__("rewardsmith.sandbox.runtimes", fromlist=["x"])
                        .find_runtime("python"), job.limits)
    from rewardsmith.sandbox._process import run_harness

    broken = [*argv[:-2], "-c", "import sys; sys.exit(3)"]
    with pytest.raises(SandboxError, match="did not run the program"):
        run_harness(broken, job, {}, user=65534 if os.geteuid() == 0 else None)
