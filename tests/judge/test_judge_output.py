"""What a judged run says: position bias warned in the summary and the report, grades reused
from the run store counted as replayed, costs under a cent with their digits. Against a real
HTTP server on 127.0.0.1; the CLI through its Typer app."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardsmith import Rollout, Rubric, ScoreJob
from rewardsmith.jobs.summary import money, position_bias_warnings
from support.openai_server import OpenAIServer

MODEL = "judge-2024-01-01"


@pytest.fixture
def biased() -> Iterator[OpenAIServer]:
    with OpenAIServer(models=[MODEL], bias_first=True) as running:
        yield running


def write_rubric(path: Path, base_url: str, store: Path, mode: str) -> Path:
    path.write_text(f"""\
components:
  quality:
    judge:
      base_url: {base_url}
      model: {MODEL}
      mode: {mode}
      store: {store}
      price_per_million_input: 0.15
      price_per_million_output: 0.6
      template: "Question: {{prompt}}\\nAnswer: {{completion}}"
      criteria:
        helpful: "Does the answer help the user?"
""")
    return path


def write_rollouts(path: Path) -> Path:
    path.write_text("".join(json.dumps({"id": f"r{i}", "group": "q", "prompt": "What is 2+2?",
                                        "completion": f"It is {i}."}) + "\n" for i in range(4)))
    return path


def test_a_judge_that_always_picks_one_position_is_warned_about(
        biased: OpenAIServer, tmp_path: Path) -> None:
    from rewardsmith.cli._app import app

    rubric = write_rubric(tmp_path / "r.yaml", biased.base_url, tmp_path / "j.db", "pairwise")
    rollouts, scored = write_rollouts(tmp_path / "in.jsonl"), tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["score", str(rollouts), "--rubric", str(rubric),
                                      "-o", str(scored), "--store", str(tmp_path / "run.db")])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "warning: pairwise judge 'helpful': position bias 1.00" in text
    assert "12 calls" in text  # 6 pairs, both orders: none came from another run's store
    assert "cost $0.00" in text and "cost $0.0000" not in text  # digits, not zeros
    page = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", str(scored), "-o", str(page)])
    assert result.exit_code == 0, result.output
    assert "pairwise judge &#x27;helpful&#x27;: position bias 1.00" in page.read_text() or \
        "pairwise judge 'helpful': position bias 1.00" in page.read_text()


def test_pointwise_runs_are_not_warned_and_unbiased_ones_pass() -> None:
    assert position_bias_warnings({"helpful": 0.25, "tidy": 0.49}) == []
    assert len(position_bias_warnings({"helpful": 0.5})) == 1


def test_grades_from_the_run_store_count_as_replayed(tmp_path: Path) -> None:
    with OpenAIServer(models=[MODEL]) as server:
        rubric = Rubric.from_dict({"components": {"quality": {"judge": {
            "base_url": server.base_url, "model": MODEL, "store": str(tmp_path / "j.db"),
            "template": "{completion}", "criteria": {"helpful": "d", "tidy": "d"}}}}})
        items = [Rollout(f"r{i}", "g", "p", f"c{i}") for i in range(5)]
        job = ScoreJob(rubric, workers=0, store=str(tmp_path / "run.db"))
        first = job.run_rollouts(items).summary.extra["usage"]["judge:quality"]
        again = ScoreJob(rubric, workers=0, store=str(tmp_path / "run.db")).run_rollouts(items)
        usage = again.summary.extra["usage"]["judge:quality"]
        assert server.billed == 5 and first["calls"] == 5
        assert usage["calls"] == 0 and usage["replayed"] == 10


@pytest.mark.parametrize(("cost", "shown"), [(0.0, "$0"), (0.00042, "$0.00042"),
                                             (3.1e-7, "$3.1e-07"), (0.0123, "$0.0123"),
                                             (1234.5, "$1,234.5000")])
def test_costs_keep_their_significant_digits(cost: float, shown: str) -> None:
    assert money(cost) == shown
