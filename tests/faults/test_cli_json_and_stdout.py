"""stdout stays parseable: scored lines alone on it, and ``--json`` exactly one document.

Before: a reward's ``print()`` landed in the scored JSONL on stdout (``-o -``, the default),
and a failed check's message could follow the JSON document on its stream.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "rewardsmith"]

NOISY_REWARD = """
import os, subprocess, sys

def score(completion):
    print("python print from the reward")
    os.write(1, b"raw write to fd 1\\n")
    subprocess.run(["echo", "a child process writing to stdout"], check=True)
    sys.stdout.write("sys.stdout.write\\n")
    return 1.0 if "4" in completion else 0.0
"""


def cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def setup(tmp_path: Path, count: int = 6) -> tuple[Path, Path]:
    (tmp_path / "noisy.py").write_text(NOISY_REWARD, encoding="utf-8")
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text("components:\n  noisy: {reward: noisy.py:score}\n", encoding="utf-8")
    rollouts = tmp_path / "r.jsonl"
    rollouts.write_text("".join(json.dumps({"id": str(i), "prompt": "q", "completion":
                                            "#### 4" if i % 2 else "no"}) + "\n"
                                for i in range(count)), encoding="utf-8")
    return rubric, rollouts


def test_what_a_reward_prints_never_lands_in_the_scored_lines(tmp_path: Path) -> None:
    rubric, rollouts = setup(tmp_path)
    done = cli("score", rollouts, "--rubric", rubric, "--workers", "0", "--no-store",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [json.loads(line)["id"] for line in lines] == [str(i) for i in range(6)]
    for noise in ("python print", "raw write to fd 1", "a child process", "sys.stdout.write"):
        assert noise in done.stderr


def test_prints_from_worker_processes_stay_out_of_the_scored_lines(tmp_path: Path) -> None:
    rubric, rollouts = setup(tmp_path)
    done = cli("score", rollouts, "--rubric", rubric, "--workers", "1", "--no-store",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == \
        [str(i) for i in range(6)]


def test_json_summary_is_the_only_thing_on_stdout_with_an_output_file(tmp_path: Path) -> None:
    rubric, rollouts = setup(tmp_path)
    done = cli("score", rollouts, "--rubric", rubric, "--workers", "0", "--no-store", "-o",
               tmp_path / "out.jsonl", "--json", cwd=tmp_path)
    # Half the rollouts score 0.0 (not errors), so the gate passes.
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["rollouts"] == 6 and summary["check"]["passed"] is True


def test_a_failed_gate_is_a_field_of_the_json_document(tmp_path: Path) -> None:
    _, rollouts = setup(tmp_path)
    (tmp_path / "broken.py").write_text("def score(completion):\n    raise ValueError('no')\n",
                                        encoding="utf-8")
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text("components:\n  broken: {reward: broken.py:score}\n", encoding="utf-8")
    done = cli("score", rollouts, "--rubric", rubric, "--workers", "0", "--no-store", "-o",
               tmp_path / "out.jsonl", "--json", cwd=tmp_path)
    assert done.returncode == 1
    summary = json.loads(done.stdout)  # one document, no trailing line
    assert summary["check"]["passed"] is False
    assert "6 of 6 rollouts errored" in summary["check"]["message"]


def test_with_scored_lines_on_stdout_the_json_summary_is_alone_on_stderr(tmp_path: Path) -> None:
    rollouts = tmp_path / "r.jsonl"
    rollouts.write_text('{"completion": "#### 4", "answer": "4"}\n', encoding="utf-8")
    done = cli("score", rollouts, "--reward", "gsm8k", "--workers", "0", "--no-store", "--json",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["reward"] == 1.0
    assert json.loads(done.stderr)["rollouts"] == 1


def test_an_error_with_json_is_one_json_document(tmp_path: Path) -> None:
    rollouts = tmp_path / "r.jsonl"
    rollouts.write_text('{"completion": "x"}\n', encoding="utf-8")
    done = cli("score", rollouts, "--reward", "no_such_reward", "--json", "-o",
               tmp_path / "out.jsonl", cwd=tmp_path)
    assert done.returncode == 2
    document = json.loads(done.stdout)
    assert document["exit_code"] == 2 and "no_such_reward" in document["error"]


def test_test_json_is_one_document_even_when_the_reward_prints_and_checks_fail(
        tmp_path: Path) -> None:
    rubric, _ = setup(tmp_path)
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"completion": "#### 4", "expected": 0.0}) + "\n",
                     encoding="utf-8")
    done = cli("test", "noisy.py:score", "--cases", cases, "--kind", "none", "--no-edges",
               "--json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report and "python print" not in done.stdout
