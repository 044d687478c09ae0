"""--backend and --ray-address on the command line: checked before anything runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardsmith.cli import app
from rewardsmith.engine.executors import BACKEND_ENV, RAY_ADDRESS_ENV


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Set (empty: the default) so that what a test sets is undone after it.
    monkeypatch.setenv(BACKEND_ENV, "")
    monkeypatch.setenv(RAY_ADDRESS_ENV, "")


def rollouts(tmp_path: Path) -> Path:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"id": "1", "completion": "#### 4", "answer": "4"}) + "\n")
    return path


def test_an_unknown_backend_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["score", str(rollouts(tmp_path)), "--reward", "gsm8k",
                                      "--backend", "spark", "--no-store"])
    assert result.exit_code == 2
    assert "spark" in result.output and "local, ray" in result.output


def test_a_ray_address_needs_the_ray_backend(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["score", str(rollouts(tmp_path)), "--reward", "gsm8k",
                                      "--ray-address", "127.0.0.1:6379", "--no-store"])
    assert result.exit_code == 2
    assert "--backend ray" in result.output


def test_the_local_backend_scores(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["score", str(rollouts(tmp_path)), "--reward", "gsm8k",
                                      "--backend", "local", "--workers", "0", "--no-store",
                                      "-q"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[0])["reward"] == 1.0
    assert os.environ[BACKEND_ENV] == "local"
