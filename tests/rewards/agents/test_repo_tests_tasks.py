"""The shipped repository tasks say what they claim: checked with plain pytest, no reward.

For each task: on the base repository every fail_to_pass test fails and every pass_to_pass
test passes; with the gold patch all pass; each wrong patch passes the counts it records.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rewardsmith.rewards.agents.repo_tasks import RepoTask, shipped_tasks, write_repo

TASKS = shipped_tasks()
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git applies the patches")


def _passed(task: RepoTask, root: Path) -> set[str]:
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                          *task.test_files], cwd=root, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    return {line.split()[1] for line in run.stdout.splitlines() if line.startswith("PASSED ")}


def _counts(task: RepoTask, root: Path) -> tuple[int, int]:
    passed = _passed(task, root)
    return (sum(t in passed for t in task.fail_to_pass),
            sum(t in passed for t in task.pass_to_pass))


def _patched(task: RepoTask, patch: str, root: Path) -> Path:
    write_repo(task, str(root))
    if patch:
        applied = subprocess.run(["git", "apply", "-"], input=patch, cwd=root, text=True,
                                 capture_output=True)
        assert applied.returncode == 0, applied.stderr
    return root


def test_the_set_has_three_tasks_each_with_wrong_patches() -> None:
    assert sorted(TASKS) == ["calc", "inventory", "textkit"]
    for task in TASKS.values():
        assert task.fail_to_pass and task.pass_to_pass and len(task.wrong_patches) >= 2
        assert not set(task.fail_to_pass) & set(task.pass_to_pass)
        assert all(path in task.repo for path in task.test_files)


@needs_git
@pytest.mark.parametrize("name", sorted(TASKS))
def test_the_base_fails_and_the_gold_patch_passes(name: str, tmp_path: Path) -> None:
    task = TASKS[name]
    assert _counts(task, _patched(task, "", tmp_path / "base")) == (0, len(task.pass_to_pass))
    assert _counts(task, _patched(task, task.gold_patch, tmp_path / "gold")) == (
        len(task.fail_to_pass), len(task.pass_to_pass))


@pytest.mark.slow
@needs_git
@pytest.mark.parametrize("name", sorted(TASKS))
def test_wrong_patches_pass_what_they_record(name: str, tmp_path: Path) -> None:
    task = TASKS[name]
    for index, wrong in enumerate(task.wrong_patches):
        counts = _counts(task, _patched(task, wrong.patch, tmp_path / f"wrong{index}"))
        assert counts == (wrong.fail_to_pass_passed, wrong.pass_to_pass_passed), wrong.why
        assert counts != (len(task.fail_to_pass), len(task.pass_to_pass))
