"""Rewards are found as Python finds a script's modules: `module.func` from the working directory
(as `python -m` and pytest do), and a file reward's own imports beside it; in the parent and in
worker processes alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "helpers.py").write_text(
        "def graded(text):\n    return 1.0 if '42' in text else 0.0\n", encoding="utf-8")
    (tmp_path / "lab" / "rw.py").write_text(
        "from helpers import graded\n\n\ndef f(completion):\n    return graded(completion)\n\n\n"
        "def late(completion):\n    import helpers  # imported at call time, in the worker\n"
        "    return helpers.graded(completion) / 2\n", encoding="utf-8")
    (tmp_path / "here_rewards.py").write_text("def half(completion):\n    return 0.5\n",
                                              encoding="utf-8")
    (tmp_path / "r.jsonl").write_text(
        json.dumps({"id": "a", "group": "g", "completion": "it is 42", "answer": "42"}) + "\n",
        encoding="utf-8")
    return tmp_path


def _score(folder: Path, reward: str, workers: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [str(Path(sys.executable).parent / "rewardsmith"), "score", "r.jsonl", "--reward", reward,
         "--no-store", "--quiet", "--workers", workers],
        capture_output=True, text=True, cwd=folder, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize(("reward", "value"), [
    ("here_rewards.half", 0.5), ("here_rewards:half", 0.5),
    ("lab/rw.py:f", 1.0), ("lab/rw.py:late", 0.5)])
def test_rewards_load_from_the_working_directory_and_beside_their_file(
        folder: Path, reward: str, value: float, workers: str) -> None:
    line = _score(folder, reward, workers)
    assert line["status"] == "ok" and line["reward"] == value, line


def test_a_missing_module_still_says_where_python_looked(folder: Path) -> None:
    out = subprocess.run(
        [str(Path(sys.executable).parent / "rewardsmith"), "score", "r.jsonl", "--reward",
         "not_here.f", "--no-store", "--quiet"],
        capture_output=True, text=True, cwd=folder, timeout=120)
    assert out.returncode == 2
    assert "no module named 'not_here'" in " ".join(out.stderr.split())
