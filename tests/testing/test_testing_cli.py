"""`rewardsmith test` as a real process: exit codes, the table, --json and --init."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BROKEN = Path(__file__).parent.parent / "testing_broken_rewards.py"
DEMO_RUBRIC = Path(__file__).parent.parents[1] / "src" / "rewardsmith" / "data" / "demo_rubric.yaml"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "rewardsmith", "test", *args],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


def test_a_sound_builtin_exits_0_with_a_table() -> None:
    result = run("gsm8k")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS: all" in result.stdout and "every candidate answer listed" in result.stdout


def test_a_broken_reward_exits_1_and_names_the_failure_and_its_input() -> None:
    result = run(f"{BROKEN}:crashes_on_empty", "--failures-only")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL crash" in result.stdout and "empty completion" in result.stdout
    assert "IndexError" in result.stdout and "check(s) failed" in result.stderr
    assert "chat messages" not in result.stdout  # passing rows are left out


def test_json_reports_every_check_for_machines() -> None:
    result = run(f"{BROKEN}:returns_nan", "--json", "--no-probes")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["passed"] is False and report["exit_code"] == 1
    assert report["counts"]["failures"] == {"non-finite": 3}
    assert not any(row["section"] == "probe" for row in report["results"])
    row = next(r for r in report["results"] if r["name"] == "empty completion")
    assert row["failures"] == ["non-finite"] and row["passed"] is False


def test_cases_params_timeout_and_range_options(tmp_path: Path) -> None:
    cases = tmp_path / "c.jsonl"
    cases.write_text('{"completion": "#### 7", "answer": "7", "expected": 1}\n',
                     encoding="utf-8")
    result = run("regex", "--cases", str(cases), "--param", "pattern=#### \\d+",
                 "--timeout", "5", "--range", "0,1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "line 1" in result.stdout and "timeout: 5 s" in result.stdout
    marker = run("marker", "--param", "marker=####", "--param", "max_count=1", "--json")
    assert marker.returncode == 0, marker.stdout  # '####' stays text, not a YAML comment


def test_load_failures_and_bad_cases_exit_2(tmp_path: Path) -> None:
    unknown = run("gsm8kk")
    assert unknown.returncode == 2 and "unknown built-in reward 'gsm8kk'" in unknown.stderr
    missing = run(f"{tmp_path}/nope.py:score")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"completion": "1", "answer": "1", "expected": 1}\n{oops\n'
                   '{"completion": "1", "answer": "1"}\n', encoding="utf-8")
    result = run("number", "--cases", str(bad))
    assert result.returncode == 2
    assert "bad.jsonl:2:" in result.stderr and "bad.jsonl:3:" in result.stderr
    assert run(str(DEMO_RUBRIC), "--param", "x=1").returncode == 2


def test_a_rubric_file_is_tested_like_a_run_loads_it() -> None:
    result = run(str(DEMO_RUBRIC), "--json")
    assert result.returncode == 0, result.stdout
    assert json.loads(result.stdout)["range"] == [-0.5, 1.25]


def test_init_writes_the_starter_cases_once(tmp_path: Path) -> None:
    result = run("--init", "my_rewards.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    written = tmp_path / "my_rewards.cases.jsonl"
    lines = written.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 10 and all("expected" in json.loads(line) for line in lines)
    assert "rewardsmith test my_rewards.py:YOUR_FUNCTION --cases" in result.stdout
    again = run("--init", "my_rewards.py", cwd=tmp_path)
    assert again.returncode == 2 and "already exists" in again.stderr
    assert written.read_text(encoding="utf-8").splitlines() == lines
