"""What ``repo_tests`` and ``verifier_script`` count as the files behind a rollout."""

from __future__ import annotations

import json
from pathlib import Path

from rewardsmith import Rollout
from rewardsmith.files.digests import FileDigests
from rewardsmith.rewards.agents.files_read import (
    environment_files,
    repo_tests_files,
    verifier_script_files,
)


def make_venv(root: Path) -> Path:
    site = root / "lib" / "python3.11" / "site-packages"
    (site / "pytest-9.0.0.dist-info").mkdir(parents=True)
    (site / "pytest-9.0.0.dist-info" / "METADATA").write_text("Name: pytest\nVersion: 9.0.0\n")
    (root / "bin").mkdir()
    (root / "bin" / "python3").write_text("#!/bin/sh\n")
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return site


def test_an_install_into_the_environment_changes_what_it_counts(tmp_path: Path) -> None:
    site = make_venv(tmp_path / "venv")
    before = environment_files(str(tmp_path / "venv"))
    assert str(site / "pytest-9.0.0.dist-info" / "METADATA") in before
    digest = FileDigests().of(before)
    (site / "pluggy-1.6.0.dist-info").mkdir()
    (site / "pluggy-1.6.0.dist-info" / "METADATA").write_text("Name: pluggy\n")
    after = environment_files(str(tmp_path / "venv"))
    assert len(after) == len(before) + 1
    assert FileDigests().of(after) != digest
    # An interpreter's path counts the same as its virtualenv's folder.
    assert environment_files(str(tmp_path / "venv" / "bin" / "python3")) == after


def test_the_paths_each_reward_names(tmp_path: Path) -> None:
    answer = {"repo": str(tmp_path / "repo"), "tests": {"tests/test_a.py": "..."},
              "fail_to_pass": ["tests/test_a.py::test_a"]}
    rollout = Rollout("r", "g", answer=json.dumps(answer),
                      metadata={"workspace": str(tmp_path / "ws")})
    env = tmp_path / "venv"
    make_venv(env)
    found = repo_tests_files(rollout, {"environment": str(env)})
    assert found[:2] == [str(tmp_path / "repo"), str(tmp_path / "ws")]  # inline tests: none
    assert str(env / "pyvenv.cfg") in found
    task = Rollout("r", "g", answer={"task": str(tmp_path / "task")},
                   metadata={"workspace": str(tmp_path / "ws")})
    assert verifier_script_files(task, {}) == [str(tmp_path / "task"), str(tmp_path / "ws")]
    assert verifier_script_files(task, {"task": "/elsewhere"})[0] == "/elsewhere"
