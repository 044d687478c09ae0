"""``rewardsmith drift`` and ``drift_files`` over real scored files of successive steps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rewardsmith import InputError
from rewardsmith.analysis import drift_files
from rewardsmith.cli import app


def step_lines(step: int, flat_groups: int, *, length: float | None = None,
               with_step: bool = False) -> list[dict[str, Any]]:
    """10 groups of 2; the first ``flat_groups`` have equal rewards. The judge agrees with the
    verifier except in the last ``step - 1`` groups, where it passes every rollout."""
    out = []
    for g in range(10):
        for i in range(2):
            correct = 1.0 if g < flat_groups else float(i)
            judge = 1.0 if g >= 10 - (step - 1) else correct
            item: dict[str, Any] = {"id": f"s{step}-{g}-{i}", "group": f"p{g}",
                                    "reward": correct + 0.1 * judge, "status": "ok",
                                    "components": {"correct": correct, "judge": judge}}
            if length is not None:
                item["metrics"] = {"length": length}
            if with_step:
                item["step"] = step
            out.append(item)
    return out


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in lines))
    return path


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["drift", *args])


@pytest.fixture()
def steps(tmp_path: Path) -> list[Path]:
    plan = [(1, 1, 100.0), (2, 2, 105.0), (3, 6, 110.0), (4, 7, 160.0)]
    return [write(tmp_path / f"step{n}.jsonl", step_lines(n, flat, length=length))
            for n, flat, length in plan]


def test_warnings_over_step_files_as_json(steps: list[Path]) -> None:
    result = invoke(*map(str, steps), "--pair", "correct,judge", "--disagreement-rise",
                    "0.12", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [s["step"] for s in document["steps"]] == [1, 2, 3, 4]
    assert [s["zero_variance_fraction"] for s in document["steps"]] == [0.1, 0.2, 0.6, 0.7]
    assert [s["mean_length"] for s in document["steps"]] == [100, 105, 110, 160]
    rates = [s["agreement"]["correct~judge"]["disagreement"] for s in document["steps"]]
    assert rates == [0.0, 0.05, 0.1, 0.15]
    found = [(w["kind"], w["step"]) for w in document["warnings"] if w["kind"] != "dominance"]
    assert found == [("zero_variance", 3), ("length", 4), ("disagreement", 4)]
    assert document["thresholds"]["disagreement_rise"] == 0.12


def test_table_strict_mode_and_thresholds(steps: list[Path]) -> None:
    shown = invoke(*map(str, steps))
    assert shown.exit_code == 0
    assert "warning step 3: 6 of 10 groups (60%) have rewards that are all equal" in shown.stdout
    strict = invoke(*map(str, steps), "--strict")
    assert strict.exit_code == 1 and "drift warning(s) (--strict)" in strict.stderr
    # steps 1 and 2: the verifier holds 92% of the variance at step 2, 20% of groups are flat
    assert invoke(str(steps[0]), str(steps[1]), "--strict").exit_code == 1
    relaxed = invoke(str(steps[0]), str(steps[1]), "--strict", "--dominance", "0.95")
    assert relaxed.exit_code == 0, relaxed.stdout
    assert "no drift warnings" in relaxed.stdout


def test_one_file_with_a_step_per_line(tmp_path: Path, steps: list[Path]) -> None:
    lines = step_lines(5, 1, with_step=True) + step_lines(7, 6, with_step=True)
    combined = write(tmp_path / "all.jsonl", lines)
    watch = drift_files([combined])
    assert [s.step for s in watch.history] == [5, 7]
    assert [w.step for w in watch.warnings if w.kind == "zero_variance"] == [7]
    # a line without a step among lines with one: refused, naming the line
    del lines[3]["step"]
    mixed = write(tmp_path / "mixed.jsonl", lines)
    result = invoke(str(mixed), "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"].startswith(f"{mixed}:4: some lines have a "
                                                         f"'step'")
    # files with steps and files without cannot be mixed
    with pytest.raises(InputError, match="some files carry 'step'"):
        drift_files([combined, steps[0]])
    # steps that go back are refused
    with pytest.raises(InputError, match="steps must increase"):
        drift_files([combined, write(tmp_path / "early.jsonl", step_lines(2, 1,
                                                                          with_step=True))])


def test_lengths_from_rollouts_files(tmp_path: Path) -> None:
    scored, rollouts = [], []
    for n, size in [(1, 100), (2, 40)]:
        lines = step_lines(n, 0)
        scored.append(write(tmp_path / f"s{n}.jsonl", lines))
        rollouts.append(write(tmp_path / f"r{n}.jsonl", [
            {"id": item["id"], "group": item["group"], "prompt": "p",
             "completion": "y" * size} for item in lines]))
    result = invoke(str(scored[0]), str(scored[1]), "--rollouts", str(rollouts[0]),
                    "--rollouts", str(rollouts[1]), "--json")
    document = json.loads(result.stdout)
    assert [s["length_source"] for s in document["steps"]] == ["characters", "characters"]
    lengths = [w for w in document["warnings"] if w["kind"] == "length"]
    assert [w["step"] for w in lengths] == [2]
    assert lengths[0]["value"] == pytest.approx(-0.6)
    short = invoke(str(scored[0]), str(scored[1]), "--rollouts", str(rollouts[0]))
    assert short.exit_code == 2 and "one rollouts file per scored file" in short.stderr


def test_bad_input_exits_2(tmp_path: Path, steps: list[Path]) -> None:
    cases = {
        ("--pair", "correct"): "expected two component names",
        ("--weight", "correct"): "expected COMPONENT=W",
        ("--dominance", "2"): "dominance must be in (0, 1]",
        ("--trend-window", "1"): "trend window >= 2",
    }
    for args, message in cases.items():
        result = invoke(str(steps[0]), *args)
        assert result.exit_code == 2 and message in result.stderr, (args, result.stderr)
    rollouts_file = write(tmp_path / "rollouts.jsonl", [{"id": "a", "group": "g",
                                                         "completion": "hi"}])
    wrong = invoke(str(steps[0]), str(rollouts_file))
    assert wrong.exit_code == 2 and "looks like a rollouts file" in wrong.stderr
    assert invoke(str(tmp_path / "missing.jsonl")).exit_code == 2


def test_given_weights_are_used_else_fitted(steps: list[Path]) -> None:
    watch = drift_files(steps[2:3], weights={"correct": 1.0, "judge": 0.1})
    assert not watch.history[0].weights_fitted
    assert watch.history[0].weights == {"correct": 1.0, "judge": 0.1}
    fitted = drift_files(steps[2:3])
    assert fitted.history[0].weights_fitted
    assert fitted.history[0].weights == pytest.approx({"correct": 1.0, "judge": 0.1})
    assert fitted.history[0].shares == pytest.approx(watch.history[0].shares)
    assert fitted.history[0].weights_fit == pytest.approx(1.0)


def test_a_pair_naming_a_missing_component_lists_the_ones_there(steps: list[Path]) -> None:
    """A judge's components are its criteria: `--pair correct,judge` on files whose judge
    criterion is `helpful` would watch nothing, so it is refused with the names that exist."""
    result = invoke(*map(str, steps), "--pair", "correct,nosuch")
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert "no component 'nosuch'" in text and "'correct'" in text
