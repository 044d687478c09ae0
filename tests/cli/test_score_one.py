"""`rewardsmith score --completion`: one completion scored from the command line, no file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardsmith.cli._app import app


def _run(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["score", *args], input=stdin)
    return result.exit_code, result.stdout


def test_one_completion_prints_its_scored_line_and_records_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = _run("--completion", "40 + 2 = 42\n#### 42", "--answer", "42", "--reward",
                     "gsm8k")
    assert code == 0
    line = json.loads(out)
    assert line["reward"] == 1.0 and line["status"] == "ok" and line["components"] == {
        "gsm8k": 1.0}
    assert not list(tmp_path.iterdir())  # no rewardsmith.db left behind
    code, out = _run("--completion", "#### 41", "--answer", "42", "--reward", "gsm8k",
                     "--store", "one.db")
    assert code == 0 and json.loads(out)["reward"] == 0.0
    assert (tmp_path / "one.db").is_file()


def test_the_completion_from_stdin_a_json_answer_and_a_rubric(tmp_path: Path) -> None:
    code, out = _run("--completion", "-", "--answer", "0.5", "--reward", "math",
                     stdin="so the answer is \\boxed{\\frac{1}{2}}")
    assert code == 0 and json.loads(out)["reward"] == 1.0
    code, out = _run("--completion", '{"name": "Ada", "year": 1815}', "--answer",
                     '{"name": "Ada", "year": 1815}', "--reward", "json_match")
    assert code == 0 and json.loads(out)["reward"] == 1.0
    rubric = tmp_path / "r.yaml"
    rubric.write_text("name: r\ncomponents:\n  correct: {reward: gsm8k}\n"
                      "  format: {reward: marker, params: {marker: '####'}, weight: 0.5}\n",
                      encoding="utf-8")
    code, out = _run("--completion", "#### 42", "--answer", "42", "--rubric", str(rubric),
                     "--prompt", "What is 40 + 2?")
    assert code == 0 and json.loads(out)["reward"] == 1.5


@pytest.mark.parametrize(("args", "message"), [
    (["r.jsonl", "--completion", "x", "--reward", "gsm8k"], "not both"),
    (["--reward", "gsm8k"], "missing ROLLOUTS"),
    (["r.jsonl", "--answer", "42", "--reward", "gsm8k"], "go with --completion"),
    (["--completion", "x", "--answer", "{not json", "--reward", "gsm8k"], "looks like JSON"),
])
def test_misuse_is_exit_2_with_the_reason(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["score", *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
