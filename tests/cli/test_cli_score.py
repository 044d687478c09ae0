"""`rewardsmith score`, `list`, `demo` and `--help`, run as real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import rewardsmith

FIXTURES = Path(__file__).parent.parent / "fixtures" / "user_rewards.py"


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    # Never in the repository: `score` keeps its store (rewardsmith.db) in the working folder.
    folder = cwd or Path(tempfile.mkdtemp(prefix="rewardsmith-cli-"))
    return subprocess.run([sys.executable, "-m", "rewardsmith", *args], capture_output=True,
                          text=True, cwd=folder, env={**os.environ, **(env or {})},
                          timeout=timeout)


def write_rollouts(path: Path, records: list[object]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n",
                    encoding="utf-8")
    return path


@pytest.fixture
def rubric(tmp_path: Path) -> Path:
    path = tmp_path / "rubric.yaml"
    path.write_text("name: t\ncomponents:\n  correct: {reward: gsm8k}\n"
                    "  format: {reward: marker, weight: 0.2}\n", encoding="utf-8")
    return path


def test_score_writes_scored_jsonl_and_a_summary(tmp_path: Path, rubric: Path) -> None:
    rollouts = write_rollouts(tmp_path / "r.jsonl", [
        {"prompt": "q", "completion": "#### 4", "answer": "4"},
        {"prompt": "q", "completion": "4", "answer": "4"},
        {"prompt": "q2", "completion": "#### 5", "answer": "4"},
        {"prompt": "q2", "completion": "#### 5", "answer": "4"},
    ])
    out = tmp_path / "s.jsonl"
    result = run("score", str(rollouts), "--rubric", str(rubric), "-o", str(out), "--json")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["reward"] for line in lines] == [1.2, 1.0, 0.2, 0.2]
    assert set(lines[0]) >= {"id", "group", "reward", "status", "components", "errors",
                             "advantage"}
    summary = json.loads(result.stdout)  # --json with -o FILE: the summary on stdout
    assert summary["rollouts"] == 4 and summary["groups"] == 2
    assert summary["zero_variance_groups"] == 1  # the second group teaches nothing
    assert summary["rubric"]["name"] == "t" and len(summary["rubric"]["id"]) == 12


def test_score_to_stdout_with_a_single_reward(tmp_path: Path) -> None:
    rollouts = write_rollouts(tmp_path / "r.jsonl", [{"completion": "so 42", "label": 42}])
    result = run("score", str(rollouts), "--reward", "number", "-q")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reward"] == 1.0


def test_bad_lines_fail_or_skip(tmp_path: Path, rubric: Path) -> None:
    rollouts = write_rollouts(tmp_path / "r.jsonl", [
        {"completion": "#### 4", "answer": "4"}, "{broken", {"completion": "#### 4", "answer": 4},
    ])
    failed = run("score", str(rollouts), "--rubric", str(rubric), "-o", str(tmp_path / "o"))
    assert failed.returncode == 2
    assert "r.jsonl:2: not valid JSON" in failed.stderr
    skipped = run("score", str(rollouts), "--rubric", str(rubric), "-o", str(tmp_path / "o"),
                  "--on-bad-line", "skip", "--max-error-rate", "0.5")  # 1 of 3 lines skipped
    assert skipped.returncode == 0, skipped.stderr
    assert "skipped 1 bad input line" in skipped.stderr and "r.jsonl:2" in skipped.stderr
    assert len((tmp_path / "o").read_text().splitlines()) == 2


def test_unloadable_reward_fails_fast_with_exit_2(tmp_path: Path) -> None:
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text("components:\n  mine: {reward: my_rewards.custom_rm}\n", encoding="utf-8")
    rollouts = write_rollouts(tmp_path / "r.jsonl", [{"completion": "x"}])
    started = time.monotonic()
    result = run("score", str(rollouts), "--rubric", str(rubric), cwd=tmp_path)
    elapsed = time.monotonic() - started
    assert result.returncode == 2
    assert elapsed < 2.0 + 1.0  # the check itself is well under 2 s; allow interpreter start-up
    assert "no module named 'my_rewards'" in result.stderr
    assert "PYTHONPATH" in result.stderr
    # The same reward loads once PYTHONPATH names its folder.
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "my_rewards.py").write_text(
        "async def custom_rm(completion):\n    return 1.0\n", encoding="utf-8")
    result = run("score", str(rollouts), "--rubric", str(rubric), "-q", cwd=tmp_path,
                 env={"PYTHONPATH": str(tmp_path / "lib")})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reward"] == 1.0


def test_error_rate_gate(tmp_path: Path) -> None:
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text(f"components:\n  c: {{reward: '{FIXTURES}:crash_on_empty'}}\n",
                      encoding="utf-8")
    rollouts = write_rollouts(tmp_path / "r.jsonl", [{"completion": ""}, {"completion": "x"}])
    result = run("score", str(rollouts), "--rubric", str(rubric), "-o", str(tmp_path / "o"))
    assert result.returncode == 1
    assert "1 of 2 rollouts errored" in result.stderr
    lines = [json.loads(line) for line in (tmp_path / "o").read_text().splitlines()]
    assert lines[0]["status"] == "error" and "empty completion" in lines[0]["errors"]["c"]
    assert lines[1]["status"] == "ok"  # the run went on
    lenient = run("score", str(rollouts), "--rubric", str(rubric), "-o", str(tmp_path / "o"),
                  "--max-error-rate", "0.5")
    assert lenient.returncode == 0


def test_usage_errors_exit_2(tmp_path: Path, rubric: Path) -> None:
    assert run("score", str(tmp_path / "missing.jsonl"), "--rubric", str(rubric)).returncode == 2
    assert run("score", str(tmp_path / "x.jsonl")).returncode == 2  # no rubric
    assert run("score", "x.jsonl", "--rubric", str(rubric), "--on-bad-line", "maybe").returncode == 2
    assert run("frobnicate").returncode == 2


def test_list_and_demo() -> None:
    listed = run("list", "--json")
    assert listed.returncode == 0
    names = {row["name"] for row in json.loads(listed.stdout)}
    assert {"gsm8k", "boxed_number", "think_format"} <= names
    demo = run("demo")
    assert demo.returncode == 0, demo.stderr
    assert "gsm8k-demo" in demo.stdout and "zero reward variance" in demo.stdout


def test_every_verb_has_help_with_an_example() -> None:
    import typer
    from typer.testing import CliRunner

    from rewardsmith.cli import app

    assert run("--help").returncode == 0
    verbs = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert {"score", "list", "demo"} <= set(verbs)
    runner = CliRunner()
    for verb in verbs:  # in this process: the help text is the same, without a start-up each
        helped = runner.invoke(app, [verb, "--help"], terminal_width=100)
        assert helped.exit_code == 0, verb
        assert "Example:" in helped.output, verb


def test_exports_are_exactly_all() -> None:
    public = {name for name in dir(rewardsmith) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(rewardsmith, name)).__name__ == "module"}
    assert public - modules == set(rewardsmith.__all__) - {"__version__"}


def test_score_checks_trainer_advantages(tmp_path: Path) -> None:
    rollouts = write_rollouts(tmp_path / "r.jsonl", [
        {"prompt": "q", "completion": "#### 4", "answer": "4"} for _ in range(16)])
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text("components:\n  format: {reward: marker, weight: 0.3}\n", encoding="utf-8")
    result = run("score", str(rollouts), "--rubric", str(rubric), "-o", str(tmp_path / "o"),
                 "--trainer", "verl")
    assert result.returncode == 0, result.stderr
    assert "non-zero advantages under verl" in result.stderr and "quantize" in result.stderr
    lines = [json.loads(line) for line in (tmp_path / "o").read_text().splitlines()]
    assert all(line["advantage"] == 0.0 for line in lines)  # ours are exact
    rubric.write_text("components:\n  format: {reward: marker, weight: 0.3}\n"
                      "quantize: 0.0009765625\n", encoding="utf-8")
    fixed = run("score", str(rollouts), "--rubric", str(rubric), "-o", str(tmp_path / "o"),
                "--json")
    checks = json.loads(fixed.stdout)["advantages"]
    assert set(checks) >= {"verl", "trl", "openrlhf"}
    assert all(c["broken_groups"] == 0 for c in checks.values())
    assert run("score", str(rollouts), "--rubric", str(rubric), "--trainer", "nope").returncode == 2


def test_readme_documents_every_verb() -> None:
    import typer

    from rewardsmith.cli import app

    readme = (Path(__file__).parent.parent.parent / "README.md").read_text(encoding="utf-8")
    for verb in typer.main.get_command(app).commands:  # type: ignore[attr-defined]
        assert f"rewardsmith {verb}" in readme, verb
    assert "make demo" in readme and "make test" in readme
