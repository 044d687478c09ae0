"""The `--json` summary of a judged run gives usage counts as integers and the cost as a number."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardsmith.cli._app import app
from support.openai_server import OpenAIServer

MODEL = "judge-2024-01-01"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(models=[MODEL], api_key="sk-usage-json-1") as running:
        yield running


def test_usage_counts_are_integers_in_the_json_summary(server: OpenAIServer, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("USAGE_JSON_KEY", "sk-usage-json-1")
    rollouts = tmp_path / "r.jsonl"
    rollouts.write_text("".join(json.dumps({"id": f"r{i}", "group": "g", "prompt": "2 + 2?",
                                            "completion": f"#### {i}", "answer": "4"}) + "\n"
                                for i in range(4)), encoding="utf-8")
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text(f"""\
name: judged
components:
  quality:
    judge:
      base_url: {server.base_url}
      model: {MODEL}
      api_key_env: USAGE_JSON_KEY
      template: "Question: {{prompt}}\\nAnswer: {{completion}}"
      criteria:
        helpful: "Does the answer help the user?"
      price_per_million_input: 0.15
""", encoding="utf-8")
    result = CliRunner().invoke(app, ["score", str(rollouts), "--rubric", str(rubric), "--store",
                                      str(tmp_path / "s.db"), "-o", os.devnull, "--json"])
    assert result.exit_code == 0, result.output
    [usage] = json.loads(result.stdout)["usage"].values()
    assert usage["calls"] == 4 and type(usage["calls"]) is int
    assert type(usage["tokens_in"]) is int and usage["tokens_in"] > 0
    assert type(usage["cost"]) is float and usage["cost"] > 0
