"""Drift warnings in ``rewardsmith report``: from --steps files, or from a scored file whose
lines carry their step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rewardsmith.analysis import drift_warnings
from rewardsmith.cli import app

pytest.importorskip("matplotlib")


def lines(step: int, flat_groups: int, *, with_step: bool) -> list[dict[str, Any]]:
    out = []
    for g in range(4):
        for i in range(2):
            reward = 1.0 if g < flat_groups else float(i)
            item: dict[str, Any] = {"id": f"{step}-{g}-{i}", "group": f"p{g}",
                                    "reward": reward, "status": "ok",
                                    "components": {"correct": reward}}
            if with_step:
                item["step"] = step
            out.append(item)
    return out


def write(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


WARNING = "step 2: 3 of 4 groups (75%) have rewards that are all equal"


def test_report_shows_the_warnings_of_step_files(tmp_path: Path) -> None:
    first = write(tmp_path / "step1.jsonl", lines(1, 0, with_step=False))
    second = write(tmp_path / "step2.jsonl", lines(2, 3, with_step=False))
    page = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", str(second), "-o", str(page), "--steps",
                                      str(first), "--steps", str(second)])
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "Warnings" in html and WARNING in html
    # without --steps, a file without 'step' has no drift warnings
    plain = tmp_path / "plain.html"
    assert CliRunner().invoke(app, ["report", str(second), "-o", str(plain)]).exit_code == 0
    assert WARNING not in plain.read_text()
    # the report may not overwrite a steps file
    refused = CliRunner().invoke(app, ["report", str(second), "-o", str(first), "--steps",
                                       str(first)])
    assert refused.exit_code == 2 and "a --steps file" in refused.stderr


def test_report_of_a_file_with_a_step_per_line(tmp_path: Path) -> None:
    scored = write(tmp_path / "run.jsonl", lines(1, 0, with_step=True)
                   + lines(2, 3, with_step=True))
    assert [str(w) for w in drift_warnings(scored)] == [WARNING + " (threshold 50%): they "
                                                        "teach GRPO nothing"]
    page = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", str(scored), "-o", str(page)])
    assert result.exit_code == 0, result.output
    assert WARNING in page.read_text()
