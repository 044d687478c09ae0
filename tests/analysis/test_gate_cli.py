"""``rewardsmith gate`` and ``gate_files`` on hand-made scored files whose answer is known."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rewardsmith import ConfigError, InputError
from rewardsmith.analysis import gate_files
from rewardsmith.cli import app


def line(rollout_id: str, group: str, reward: float | None, status: str = "ok",
         **components: float | None) -> dict[str, Any]:
    return {"id": rollout_id, "group": group, "reward": reward, "status": status,
            "components": components, "errors": {}, "advantage": None}


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in lines))
    return path


def run(path: Path, shift: float, *, fmt: float = 1.0, groups: int = 12,
        per_group: int = 4) -> Path:
    """Rewards that differ by prompt and rollout; ``shift`` added to every correct value."""
    lines = []
    for g in range(groups):
        for j in range(per_group):
            correct = ((g * 7 + j * 3) % 10) / 10 + shift
            lines.append(line(f"p{g}-r{j}", f"p{g}", correct + 0.2 * fmt, correct=correct,
                              format=fmt))
    return write(path, lines)


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["gate", *args])


@pytest.fixture()
def runs(tmp_path: Path) -> dict[str, Path]:
    return {"old": run(tmp_path / "old.jsonl", 0.0),
            "better": run(tmp_path / "better.jsonl", 0.1),
            "worse_format": run(tmp_path / "worse.jsonl", 0.1, fmt=0.5)}


def test_a_constant_improvement_is_known_exactly(runs: dict[str, Path]) -> None:
    # every pair differs by exactly +0.1: the interval is [0.1, 0.1] whatever is resampled
    result = gate_files(runs["better"], runs["old"], min_delta=0.1)
    reward = result.comparison("reward")
    assert (result.pairing, result.pairs, result.groups) == ("id", 48, 12)
    assert reward.delta == pytest.approx(0.1) and reward.low == pytest.approx(0.1)
    assert reward.high == pytest.approx(0.1)
    assert result.comparison("format").delta == 0.0
    assert result.passed and result.exit_code == 0 and result.reasons == []
    too_much = gate_files(runs["better"], runs["old"], min_delta=0.11)
    assert not too_much.passed and too_much.exit_code == 1
    assert "--min-delta +0.11" in too_much.reasons[0]


def test_cli_pass_and_fail_with_reasons(runs: dict[str, Path]) -> None:
    passed = invoke(str(runs["better"]), "--baseline", str(runs["old"]), "--min-delta", "0.05",
                    "--max-regression", "format=0")
    assert passed.exit_code == 0, passed.output
    assert "PASSED" in passed.stdout
    # the reward still rises (+0.1 correct, -0.1 format) but format drops by 0.5
    failed = invoke(str(runs["worse_format"]), "-b", str(runs["old"]),
                    "--max-regression", "format=0.1", "--max-regression", "correct=0")
    assert failed.exit_code == 1, failed.output
    assert "FAIL format: mean difference -0.5" in failed.stdout
    assert "fails --max-regression format=0.1" in failed.stdout
    assert "pass correct" in failed.stdout
    assert "FAILED: 1 check(s) not met" in failed.stdout


def test_json_document_for_pipelines(runs: dict[str, Path]) -> None:
    result = invoke(str(runs["worse_format"]), "-b", str(runs["old"]), "--json",
                    "--max-regression", "format=0.1", "--seed", "3", "--resamples", "500",
                    "--confidence", "0.9")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["passed"] is False and document["exit_code"] == 1
    assert document["reasons"] == [c["message"] for c in document["checks"] if not c["passed"]]
    assert (document["seed"], document["resamples"], document["confidence"]) == (3, 500, 0.9)
    assert [c["name"] for c in document["comparisons"]] == ["reward", "correct", "format"]
    assert document["pairing"] == {"method": "id", "pairs": 48, "groups": 12,
                                   "unpaired_baseline": 0, "unpaired_new": 0,
                                   "unpaired_baseline_examples": [],
                                   "unpaired_new_examples": []}
    rules = {(c["rule"], c["target"]): c["passed"] for c in document["checks"]}
    assert rules == {("max-regression", "format"): False, ("no-regression", "reward"): True,
                     ("max-failure-increase", "status"): True}


def test_a_significant_drop_fails_by_default_and_noise_passes(tmp_path: Path) -> None:
    old = run(tmp_path / "old.jsonl", 0.0)
    dropped = run(tmp_path / "dropped.jsonl", -0.05)
    assert invoke(str(dropped), "-b", str(old)).exit_code == 1
    # same rewards, shuffled within each group: no change on average, nothing significant
    noisy = []
    for g in range(12):
        values = [((g * 7 + j * 3) % 10) / 10 for j in range(4)]
        values = values[1:] + values[:1]
        noisy += [line(f"p{g}-r{j}", f"p{g}", v + 0.2, correct=v, format=1.0)
                  for j, v in enumerate(values)]
    result = invoke(str(write(tmp_path / "noisy.jsonl", noisy)), "-b", str(old))
    assert result.exit_code == 0, result.output
    assert "no significant drop" in result.stdout


def test_masked_and_failed_rollouts_are_left_out_and_their_rise_is_checked(
        tmp_path: Path) -> None:
    old = run(tmp_path / "old.jsonl", 0.0)
    lines = [json.loads(text) for text in (tmp_path / "old.jsonl").read_text().splitlines()]
    # the new run: the same rewards, but 8 of 48 rollouts failed (reward null)
    for item in lines[:8]:
        item.update(reward=None, status="error", components={"correct": None, "format": 1.0})
    new = write(tmp_path / "new.jsonl", lines)
    result = gate_files(new, old)
    reward = result.comparison("reward")
    assert (reward.pairs, reward.delta) == (40, 0.0)  # failures are not zeros
    assert result.comparison("format").pairs == 48
    assert result.statuses_new == {"error": 8, "ok": 40}
    assert not result.passed
    assert result.reasons == ["status: 16.7% of the new run's paired rollouts are not ok "
                              "against 0.0% in the baseline (+16.7%; --max-failure-increase "
                              "5.0%)"]
    assert any("8 pair(s) left out" in note for note in result.notes)
    assert gate_files(new, old, max_failure_increase=0.2).passed
    assert gate_files(new, old, max_failure_increase=None).passed


def test_pairing_by_position_when_ids_differ_and_unpaired_are_reported(
        tmp_path: Path) -> None:
    old = write(tmp_path / "old.jsonl", [line(f"a{i}", f"g{i // 2}", i % 2) for i in range(8)])
    # other ids, one group missing, one group with an extra rollout
    new_lines = [line(f"b{i}", f"g{i // 2}", i % 2 + 0.5) for i in range(6)]
    new_lines.append(line("b-extra", "g0", 1.0))
    new = write(tmp_path / "new.jsonl", new_lines)
    result = gate_files(new, old)
    assert result.pairing == "position" and result.pairs == 6 and result.groups == 3
    assert result.unpaired_new == ["b-extra"] and result.unpaired_baseline == ["a6", "a7"]
    assert result.comparison("reward").delta == pytest.approx(0.5)
    shown = invoke(str(new), "-b", str(old))
    assert "unpaired: 1 in the new run, 2 in the baseline" in shown.stdout
    with pytest.raises(InputError, match="do not overlap"):
        gate_files(new, old, pair_by="id")


def test_a_shared_id_that_changed_group_is_not_paired_by_id(tmp_path: Path) -> None:
    old = write(tmp_path / "old.jsonl", [line("0", "g0", 0.0), line("1", "g1", 1.0)])
    new = write(tmp_path / "new.jsonl", [line("0", "g1", 0.5), line("1", "g0", 0.5)])
    with pytest.raises(InputError, match="'0' is in group 'g0' in the baseline and 'g1'"):
        gate_files(new, old, pair_by="id")
    assert gate_files(new, old).pairing == "position"


def test_too_few_prompts_cannot_pass(tmp_path: Path) -> None:
    old = write(tmp_path / "old.jsonl", [line("a", "g", 0.0), line("b", "g", 1.0)])
    new = write(tmp_path / "new.jsonl", [line("a", "g", 1.0), line("b", "g", 1.0)])
    result = gate_files(new, old)
    assert not result.passed
    assert "only 1 paired prompt(s)" in result.reasons[0]


@pytest.mark.parametrize(("content", "expected"), [
    ('{"id": "a", "group": "g", "reward": 1}\n{"id": "b", "group"\n',
     "{path}:2: not valid JSON"),
    ('{"id": "a", "group": "g", "prompt": "hi", "completion": "yo"}\n',
     "{path}:1: no 'reward': not a scored line (this looks like a rollouts file"),
    ('{"id": "a", "group": "g", "reward": NaN}\n', "{path}:1: 'reward' is nan"),
    ('{"id": "a", "group": "g", "reward": "1"}\n', "{path}:1: 'reward' must be a number"),
    ('{"id": "a", "group": "g", "reward": 1, "status": "fine"}\n', "{path}:1: 'status'"),
    ('{"id": "a", "reward": 1}\n', "{path}:1: missing 'group'"),
    ('{"id": "a", "group": "g", "reward": 1}\n{"id": "a", "group": "g", "reward": 0}\n',
     "{path}:2: rollout id 'a' appears again (first on line 1)"),
    ("\n\n", "{path}: no scored rollouts"),
])
def test_bad_input_exits_2_naming_file_and_line(tmp_path: Path, content: str,
                                                expected: str) -> None:
    good = run(tmp_path / "good.jsonl", 0.0)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    result = invoke(str(bad), "-b", str(good), "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"].startswith(expected.format(path=bad))
    assert invoke(str(good), "-b", str(bad)).exit_code == 2


def test_usage_errors_exit_2(runs: dict[str, Path], tmp_path: Path) -> None:
    new, old = str(runs["better"]), str(runs["old"])
    cases = {
        ("--max-regression", "format"): "expected COMPONENT=X",
        ("--max-regression", "format=x"): "is not a number",
        ("--max-regression", "speed=0.1"): "'speed', which the runs do not have",
        ("--max-regression", "format=-1"): "must be >= 0",
        ("--confidence", "95"): "confidence must be between 0 and 1",
        ("--resamples", "10"): "resamples must be at least 100",
        ("--seed", "-1"): "seed must be 0 or more",
        ("--min-delta", "nan"): "is not a finite number",
        ("--pair-by", "name"): "--pair-by must be auto, id or position",
    }
    for args, message in cases.items():
        result = invoke(new, "-b", old, *args)
        assert result.exit_code == 2, args
        assert message in result.stderr, (args, result.stderr)
    missing = invoke(str(tmp_path / "nope.jsonl"), "-b", old)
    assert missing.exit_code == 2 and "cannot open" in missing.stderr
    other = write(tmp_path / "other.jsonl", [line("x", "elsewhere", 1.0)])
    disjoint = invoke(str(other), "-b", old)
    assert disjoint.exit_code == 2 and "do not overlap" in disjoint.stderr
    with pytest.raises(ConfigError):
        gate_files(runs["better"], runs["old"], max_failure_increase=2.0)


def test_all_rewards_masked_on_one_side_is_bad_input(tmp_path: Path) -> None:
    old = write(tmp_path / "old.jsonl", [line("a", "g", 1.0), line("b", "h", 0.0)])
    new = write(tmp_path / "new.jsonl", [line("a", "g", None, "masked"),
                                         line("b", "h", None, "masked")])
    with pytest.raises(InputError, match="none has a reward in both runs"):
        gate_files(new, old)


def test_exit_codes_from_a_real_process(runs: dict[str, Path]) -> None:
    command = [sys.executable, "-m", "rewardsmith", "gate", str(runs["worse_format"]),
               "--baseline", str(runs["old"]), "--max-regression", "format=0.1", "--json"]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 1, completed.stderr
    assert json.loads(completed.stdout)["passed"] is False


def test_parquet_runs_are_accepted(runs: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    from rewardsmith.analysis import read_scored
    from rewardsmith.files.parquet import write_scores_parquet

    old = tmp_path / "old.parquet"
    write_scores_parquet(old, [item.score for item in read_scored(runs["old"])])
    result = gate_files(runs["better"], old, min_delta=0.1)
    assert result.passed and result.pairs == 48
