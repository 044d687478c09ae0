"""Before a slime/Miles launch: `rewardsmith test` calls a custom_rm in every form slime does, and
`rewardsmith check-env` loads the rubric and the reward path as the trainer's processes will."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardsmith.cli._app import app
from rewardsmith.testing import run_reward_tests

CASES = [
    {"completion": "40 + 2 = 42 #### 42", "answer": "42", "expected": 1.0},
    {"completion": "#### 41", "answer": "42", "expected": 0.0},
    {"completion": "", "answer": "42", "expected": 0.0},
]

REWARDS = '''
import re


def _graded(sample):
    found = re.search(r"####\\s*(-?\\d+)", sample.response or "")
    return 1.0 if found and found.group(1) == str(sample.label).strip() else 0.0


async def custom_rm(args, sample, **kwargs):
    value = _graded(sample)
    if args.reward_key:
        return {args.reward_key: value, "acc": value}
    return value


async def group_rm(args, samples):
    return [_graded(s) for s in samples]


async def keyed_group_rm(args, samples):
    return [{args.reward_key: _graded(s)} for s in samples]


async def always_dict(args, sample):
    return {"score": _graded(sample)}


async def scalar_for_group(args, samples):
    return 1.0


async def seen_status(args, sample):
    # slime marks a sample cut at the length limit with Sample.Status.TRUNCATED
    return 0.0 if sample.status.name == "TRUNCATED" else _graded(sample)


def plain(args, sample):
    return 1.0
'''


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "slime_rewards.py").write_text(REWARDS, encoding="utf-8")
    cases = tmp_path / "ten.cases.jsonl"
    cases.write_text("".join(json.dumps(c) + "\n" for c in CASES), encoding="utf-8")
    return tmp_path


def _test(folder: Path, name: str, **options: object) -> tuple[int, list[str]]:
    report = run_reward_tests(f"{folder / 'slime_rewards.py'}:{name}",
                              cases=folder / "ten.cases.jsonl", workers=1, **options)  # type: ignore[arg-type]
    failed = [f"{row.name}: {row.got} {row.detail}" for row in report.failed]
    return report.exit_code, failed


@pytest.mark.parametrize(("name", "options"), [
    ("custom_rm", {}),
    ("custom_rm", {"reward_key": "score"}),
    ("group_rm", {}),
    ("keyed_group_rm", {"reward_key": "rw"}),
    ("custom_rm", {"reward_key": "rw", "group_rm": False}),
])
def test_every_form_slime_calls_passes_for_a_sound_reward(folder: Path, name: str,
                                                          options: dict[str, object]) -> None:
    code, failed = _test(folder, name, **options)
    assert code == 0, failed


@pytest.mark.parametrize(("name", "options", "message"), [
    ("always_dict", {}, "slime reads it only with --reward-key"),
    ("custom_rm", {"reward_key": "k", "group_rm": True}, "'list' object has no attribute"),
    ("always_dict", {"reward_key": "reward"}, "without the --reward-key 'reward'"),
    ("scalar_for_group", {}, "one reward per sample"),
])
def test_a_contract_slime_would_break_on_is_a_failure_that_says_why(
        folder: Path, name: str, options: dict[str, object], message: str) -> None:
    code, failed = _test(folder, name, **options)
    assert code == 1
    assert any(message in line for line in failed), failed


def test_the_sample_carries_slime_status_for_truncation(folder: Path) -> None:
    from rewardsmith.testing.cases import Case, parse_expected

    cases = [Case(make(truncated=True), parse_expected(0.0), note="cut"),
             Case(make(truncated=False), parse_expected(1.0), note="whole")]
    report = run_reward_tests(f"{folder / 'slime_rewards.py'}:seen_status", cases=cases,
                              workers=1, edges=False, probes=False)
    assert report.exit_code == 0, [(r.name, r.got) for r in report.failed]


def make(*, truncated: bool):  # type: ignore[no-untyped-def]
    from rewardsmith.types import Rollout

    return Rollout(id="x", group="x", prompt="q", completion="#### 42", answer="42",
                   truncated=truncated)


def test_the_ready_adapter_tests_as_is_with_worker_processes(folder: Path) -> None:
    """The adapter starts an engine of its own; inside a test worker (a daemon process) it
    scores in-process instead of failing to start workers ("daemonic processes are not allowed
    to have children")."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "REWARDSMITH_WORKERS"}
    env["REWARDSMITH_RUBRIC"] = "gsm8k"
    for options in ([], ["--group-rm", "--reward-key", "rw"]):
        out = subprocess.run(
            [sys.executable, "-m", "rewardsmith", "test", "rewardsmith.integrations.slime.custom_rm",
             "--cases", str(folder / "ten.cases.jsonl"), "--json", *options],
            capture_output=True, text=True, timeout=120, env=env, cwd=folder)
        report = json.loads(out.stdout)
        failed = [(row["name"], row["got"]) for row in report["results"] if row["failures"]]
        assert out.returncode == 0, failed or out.stderr


def test_cli_options_and_their_misuse(folder: Path) -> None:
    runner = CliRunner()
    target = f"{folder / 'slime_rewards.py'}:custom_rm"
    result = runner.invoke(app, ["test", target, "--cases", str(folder / "ten.cases.jsonl"),
                                 "--reward-key", "score", "--workers", "1"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["test", "gsm8k", "--group-rm"])
    assert result.exit_code == 2
    assert "slime custom_rm" in " ".join(result.output.split())


def _check_env(*args: str, env: dict[str, str]) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(app, ["check-env", *args, "--json"], env=env)
    return result.exit_code, json.loads(result.output)


def _findings(data: dict[str, object]) -> dict[str, tuple[bool, str]]:
    return {f["what"]: (f["ok"], f["detail"]) for f in data["findings"]}  # type: ignore[attr-defined, index]


def test_check_env_loads_the_rubric_and_the_reward_path(folder: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    rubric = folder / "rubric.yaml"
    rubric.write_text("name: r\ncomponents:\n  correct: {reward: gsm8k}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    code, data = _check_env("--custom-rm-path", "slime_rewards.custom_rm",
                            env={"REWARDSMITH_RUBRIC": str(rubric)})
    found = _findings(data)
    assert code == 0 and data["ok"], found
    assert found["custom_rm"][0] and "slime_rewards.py" in found["custom_rm"][1]
    assert found["component correct"][0]


def test_check_env_names_what_does_not_load(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rubric = folder / "bad.yaml"
    rubric.write_text("name: r\ncomponents:\n  mine: {reward: 'not_installed_rewards:f'}\n",
                      encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    code, data = _check_env("--custom-rm-path", "slime_rewards.plain",
                            env={"REWARDSMITH_RUBRIC": str(rubric)})
    found = _findings(data)
    assert code == 1
    assert not found["rubric"][0] and "not_installed_rewards" in found["rubric"][1]
    assert "REWARDSMITH_RUBRIC" in found["rubric"][1]
    assert not found["custom_rm"][0] and "async def" in found["custom_rm"][1]
    code, data = _check_env("--custom-rm-path", "no_such_module.custom_rm", env={})
    found = _findings(data)
    assert code == 1 and "PYTHONPATH" in found["custom_rm"][1]
    assert not found["rubric"][0] and "REWARDSMITH_RUBRIC" in found["rubric"][1]


def test_check_env_usage_errors() -> None:
    result = CliRunner().invoke(app, ["check-env", "--runtime-env-json", "{}"])
    assert result.exit_code == 2
    result = CliRunner().invoke(app, ["check-env", "--ray", "--runtime-env-json", "[1]"])
    assert result.exit_code == 2 and "JSON object" in result.output


@pytest.mark.slow
def test_check_env_inside_ray_sees_the_runtime_env(folder: Path) -> None:
    pytest.importorskip("ray")
    import subprocess

    runtime_env = {"env_vars": {"REWARDSMITH_RUBRIC": "gsm8k", "PYTHONPATH": str(folder)}}
    out = subprocess.run(
        [sys.executable, "-m", "rewardsmith", "check-env", "--ray", "--custom-rm-path",
         "slime_rewards.custom_rm", "--runtime-env-json", json.dumps(runtime_env), "--json"],
        capture_output=True, text=True, timeout=180, cwd=folder)
    data = json.loads(out.stdout)
    assert out.returncode == 0, out.stderr
    assert str(data["where"]).startswith("a Ray worker")
    assert _findings(data)["PYTHONPATH"][1] == str(folder)
