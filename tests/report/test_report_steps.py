"""``rewardsmith report`` on a training run: the reward and each component's mean per step.

The run is recorded as the GRPO example records it: TRL's reward functions from
``trl_reward_funcs`` called as ``GRPOTrainer`` calls them, step after step, through the
example's own run log (``examples/grpo_tiny_helpers.py``), which writes each step's scored
lines; rewardsmith's tracker gets each scoring call as one step. The report's figures must be
the tracker's.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from rewardsmith.advantages import compute_advantages
from rewardsmith.cli import app
from rewardsmith.integrations import close_engines
from rewardsmith.integrations.trl import trl_reward_funcs
from rewardsmith.report import build_report
from rewardsmith.report.steps import step_curve
from rewardsmith.tracking import JsonlTracker, TrackerBase, Trackers

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parent.parent.parent
RUBRIC = ROOT / "examples" / "rubrics" / "tiny_sums.yaml"
COMPONENTS = ["correct", "format", "brief"]
QUESTION = "What is {a} + {b}? Reply with the answer on a line '#### N'."

# Four completions per question, two questions a step: the policy gets better step by step.
# Step 2's second question has an answer no verifier can read, so its completions are masked.
STEPS: list[list[tuple[tuple[int, int] | None, list[str]]]] = [
    [((2, 3), ["The answer is 6.", "I think it is 5, since 2 + 3 makes " + "five " * 30,
               "#### 4", "hmm"]),
     ((4, 4), ["It is 9", "#### 9", "Let me count: " + "one, " * 40, "It is seven."])],
    [((1, 6), ["#### 7", "7", "#### 8", "The sum is 7."]),
     (None, ["#### 2", "two apples", "#### 3", "no idea"])],
    [((5, 2), ["#### 7", "#### 7", "5 + 2 is 7\n#### 7", "#### 7"]),
     ((3, 3), ["#### 6", "#### 6", "#### 5", "#### 6"])],
]


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("grpo_tiny_helpers",
                                                  ROOT / "examples" / "grpo_tiny_helpers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class StepsInMemory(TrackerBase):
    """A tracker that keeps what it is sent: the metrics of each logged step."""

    name = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.steps: list[dict[str, float]] = []

    def _write(self, metrics: dict[str, float], step: int) -> None:
        self.steps.append(dict(metrics))

    def _finish(self) -> None:
        pass


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, StepsInMemory]]:
    """A recorded three-step run: its folder, and what the tracker was sent."""
    example = _load_example()
    out = tmp_path_factory.mktemp("run")
    tracker = StepsInMemory()
    step_log = JsonlTracker(out / "step-log.jsonl")  # what a trainer run leaves behind
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REWARDSMITH_WORKERS", "0")
        patch.delenv("REWARDSMITH_RUBRIC", raising=False)
        funcs = trl_reward_funcs(RUBRIC, tracker=Trackers([tracker, step_log]))
        log = example.RunLog(out, funcs.reward_weights, funcs.names, 24, None)
        wrapped = [log.wrap(f) for f in funcs]
        try:
            for number, questions in enumerate(STEPS):
                prompts, completions, answers = [], [], []
                for pair, texts in questions:
                    content = (QUESTION.format(a=pair[0], b=pair[1]) if pair is not None
                               else "What is the sum of two apples? Reply on a line '#### N'.")
                    for text in texts:
                        prompts.append([{"role": "user", "content": content}])
                        completions.append([{"role": "assistant", "content": text}])
                        answers.append(str(sum(pair)) if pair is not None else "unknown")
                state = SimpleNamespace(global_step=number)
                columns: dict[str, Any] = {"prompts": prompts, "completions": completions,
                                           "completion_ids": [[1, 2]] * len(completions),
                                           "answer": answers, "trainer_state": state}
                values = [func(**columns) for func in wrapped]
                # TRL's weighted sum (None: masked, NaN to TRL) and its advantages.
                rewards = [None if all(v[i] is None for v in values) else
                           sum(w * (v[i] or 0.0) for w, v in zip(funcs.reward_weights, values))
                           for i in range(len(completions))]
                groups = [i // 4 for i in range(len(completions))]
                advantages = compute_advantages(rewards, groups, trainer="trl", dtype="float32")
                log.finish([0.0 if a is None else float(a) for a in advantages])  # TRL: 0
        finally:
            close_engines()
            step_log.close()
    yield out, tracker


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_step_table_is_what_the_tracker_logged(run: tuple[Path, StepsInMemory]) -> None:
    out, tracker = run
    step_files = sorted((out / "steps").glob("step_*.jsonl"))
    assert len(step_files) == len(tracker.steps) == 3
    result = CliRunner().invoke(app, ["report", "--json",
                                      *[a for f in step_files for a in ("--steps", str(f))],
                                      str(out / "scored.jsonl")])
    assert result.exit_code == 0, result.output
    curve = json.loads(result.stdout)
    assert curve["components"] == COMPONENTS
    assert [row["step"] for row in curve["steps"]] == [1, 2, 3]
    for row, logged in zip(curve["steps"], tracker.steps):
        assert row["rollouts"] == logged["rollouts"] == 8
        assert row["reward"] == logged["reward/mean"]
        for name in COMPONENTS:
            assert row["components"][name] == logged[f"components/{name}/mean"]
        assert row["without_reward"] == logged["status/masked"] + logged["status/error"] \
            + logged["status/timeout"]
        assert row["zero_variance_groups"] == logged["groups/zero_variance"]
    # the masked question's four completions are left out of step 2's means, not zeros
    assert [row["without_reward"] for row in curve["steps"]] == [0, 4, 0]
    step2 = [s for s in _lines(step_files[1]) if s["reward"] is not None]
    assert curve["steps"][1]["reward"] == pytest.approx(
        sum(s["reward"] for s in step2) / len(step2), abs=1e-12)
    # the policy got better: every answer right at the last step but one
    assert curve["steps"][2]["components"]["correct"] == 7 / 8
    assert curve["steps"][0]["components"]["correct"] == 0.0


def test_the_run_file_alone_gives_the_same_curve_in_table_and_page(
        run: tuple[Path, StepsInMemory], tmp_path: Path) -> None:
    out, _ = run
    scored = out / "scored.jsonl"  # every step's lines, each with its 'step'
    from_files = step_curve(sorted((out / "steps").glob("step_*.jsonl")))
    assert step_curve([scored]).rows == from_files.rows
    page = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", str(scored), "-o", str(page)])
    assert result.exit_code == 0, result.output
    # the table on stdout: a row per step with its figures
    table = result.stdout
    assert "mean per step" in table and "correct" in table and "brief" in table
    for row in from_files.rows:
        line = next(t for t in table.splitlines() if t.strip("│ ").startswith(f"{row.step} "))
        assert f"{row.reward:.4g}" in line, line
    html = page.read_text(encoding="utf-8")
    section = html[html.index('<section id="steps">'):]
    section = section[:section.index("</section>")]
    assert "<h2>Training steps</h2>" in section
    assert 'data-plot="plot1"' in section and "<svg" in section  # the curve, drawn first
    assert section.count("<tr>") == 1 + 3  # header and one row per step
    for row in from_files.rows:
        assert f"<td class=\"n\">{row.reward:.4g}</td>" in section


def test_a_run_without_steps_has_no_step_section(run: tuple[Path, StepsInMemory],
                                                 tmp_path: Path) -> None:
    out, _ = run
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "step"}) + "\n"
                             for line in _lines(out / "scored.jsonl")))
    html = build_report(plain)
    assert 'id="steps"' not in html
    # without -o there is nothing to show for it
    result = CliRunner().invoke(app, ["report", str(plain)])
    assert result.exit_code == 2 and "--output" in result.stderr
    result = CliRunner().invoke(app, ["report", str(plain), "--json", "-o",
                                      str(tmp_path / "r.html")])
    assert result.exit_code == 2 and "no 'step'" in result.stderr
    # Python: the steps given as files draw the section for any scored file
    html = build_report(plain, steps=sorted((out / "steps").glob("step_*.jsonl")))
    assert "<h2>Training steps</h2>" in html


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _line(rid: str, step: int | None, reward: float | None) -> dict[str, Any]:
    line: dict[str, Any] = {"id": rid, "group": "g", "reward": reward,
                            "status": "ok" if reward is not None else "masked",
                            "components": {"c": reward}}
    if step is not None:
        line["step"] = step
    return line


def test_bad_step_input_is_named(tmp_path: Path) -> None:
    late = _write(tmp_path / "late.jsonl", [_line("a", 5, 1.0), _line("b", 5, 0.0)])
    early = _write(tmp_path / "early.jsonl", [_line("a", 2, 1.0)])
    result = CliRunner().invoke(app, ["report", "--steps", str(late), "--steps", str(early),
                                      str(late)])
    assert result.exit_code == 2
    assert "step 2 comes after step 5" in result.stderr and "early.jsonl" in result.stderr
    bare = _write(tmp_path / "bare.jsonl", [_line("a", None, 1.0)])
    result = CliRunner().invoke(app, ["report", "--steps", str(early), "--steps", str(bare),
                                      str(bare)])
    assert result.exit_code == 2 and "others do not" in result.stderr
    holes = _write(tmp_path / "holes.jsonl", [_line("a", 1, 1.0), _line("b", None, 0.0)])
    result = CliRunner().invoke(app, ["report", str(holes)])
    assert result.exit_code == 2 and "holes.jsonl:2" in result.stderr
    text = _write(tmp_path / "text.jsonl", [_line("a", 1, 1.0), {**_line("b", 1, 0.0),
                                                                 "components": {"c": "high"}}])
    result = CliRunner().invoke(app, ["report", str(text)])
    assert result.exit_code == 2 and "text.jsonl:2" in result.stderr
    # files without 'step' are steps 1, 2, ... in the order given; a step of masked rollouts
    # only has no mean (a gap in the curve), not a zero
    masked = _write(tmp_path / "masked.jsonl", [_line("a", None, None)])
    curve = step_curve([bare, masked])
    assert [(row.step, row.reward, row.without_reward) for row in curve.rows] == [
        (1, 1.0, 0), (2, None, 1)]
    assert curve.rows[1].components == {"c": None}
    assert "<h2>Training steps</h2>" in build_report(bare, steps=[bare, masked])


def test_the_step_log_of_the_jsonl_tracker_gives_the_same_curve(
        run: tuple[Path, StepsInMemory], tmp_path: Path) -> None:
    out, tracker = run
    log = out / "step-log.jsonl"
    assert [json.loads(line)["metrics"] for line in log.read_text().splitlines()] == tracker.steps
    result = CliRunner().invoke(app, ["report", str(log), "--json"])
    assert result.exit_code == 0, result.output
    logged = json.loads(result.stdout)
    from_files = step_curve([out / "scored.jsonl"]).to_dict()
    assert logged["components"] == from_files["components"] == COMPONENTS
    # the tracker numbers its steps from 0; every figure is the one computed from the lines
    assert [row["step"] for row in logged["steps"]] == [0, 1, 2]
    for row, same in zip(logged["steps"], from_files["steps"]):
        assert {**row, "step": None} == {**same, "step": None}
    # beside the run's scored file, the log draws the page's curve; alone it has no rollouts
    page = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", str(out / "scored.jsonl"), "--steps", str(log),
                                      "-o", str(page)])
    assert result.exit_code == 0, result.output
    assert "<h2>Training steps</h2>" in page.read_text()
    result = CliRunner().invoke(app, ["report", str(log), "-o", str(tmp_path / "log.html")])
    assert result.exit_code == 2 and "a step log holds" in result.stderr
    assert not (tmp_path / "log.html").exists()
    # a damaged line is named
    broken = tmp_path / "broken.jsonl"
    lines = log.read_text().splitlines()
    lines[1] = lines[1].replace('"reward/mean": ', '"reward/mean": "x", "_": ')
    broken.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["report", str(broken)])
    assert result.exit_code == 2 and "broken.jsonl:2" in result.stderr
    assert "'reward/mean' must be a number" in result.stderr
    # two runs' steps in one log read as steps going back: refused, not drawn as one curve
    twice = tmp_path / "twice.jsonl"
    twice.write_text(log.read_text() * 2)
    result = CliRunner().invoke(app, ["report", str(twice)])
    assert result.exit_code == 2 and "step 0 comes after step 2" in result.stderr


def test_the_jsonl_tracker_never_appends_to_a_log(tmp_path: Path) -> None:
    import os

    from rewardsmith.errors import ConfigError
    from rewardsmith.tracking import open_trackers

    with open_trackers(["jsonl"], directory=tmp_path, project="p", run="r") as tracker:
        tracker.log_scores([_line("a", None, 1.0)])
    first = (tmp_path / "p" / "r.jsonl").read_text()
    assert first.count("\n") == 1
    # a second process with the same run name (another rank) keeps a log of its own
    with open_trackers(["jsonl"], directory=tmp_path, project="p", run="r") as tracker:
        tracker.log_scores([_line("b", None, 0.0)])
    assert (tmp_path / "p" / "r.jsonl").read_text() == first
    assert (tmp_path / "p" / f"r-{os.getpid()}.jsonl").read_text().count("\n") == 1
    with pytest.raises(ConfigError, match="exists"):
        open_trackers(["jsonl"], directory=tmp_path, project="p", run="r")
    with pytest.raises(ConfigError, match="exists"):
        JsonlTracker(tmp_path / "p" / "r.jsonl")


def test_the_adapters_log_steps_from_the_environment(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardsmith.tracking import close_scoring_trackers

    monkeypatch.setenv("REWARDSMITH_WORKERS", "0")
    monkeypatch.delenv("REWARDSMITH_RUBRIC", raising=False)
    monkeypatch.setenv("REWARDSMITH_LOG_TO", "jsonl")
    monkeypatch.setenv("REWARDSMITH_LOG_DIR", str(tmp_path / "steps"))
    monkeypatch.setenv("REWARDSMITH_LOG_RUN", "trainer")
    close_scoring_trackers()  # this process read the environment before: read it again
    funcs = trl_reward_funcs(RUBRIC)
    prompt = [{"role": "user", "content": QUESTION.format(a=2, b=2)}]
    try:
        for texts in (["#### 4", "#### 5"], ["#### 4", "#### 4"]):
            for func in funcs:
                func(prompts=[prompt] * 2, completions=texts, answer=["4", "4"])
    finally:
        close_scoring_trackers()
        close_engines()
    result = CliRunner().invoke(app, ["report", str(tmp_path / "steps" / "trainer.jsonl"),
                                      "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["steps"]
    assert [(r["step"], r["rollouts"], r["components"]["correct"]) for r in rows] == [
        (0, 2, 0.5), (1, 2, 1.0)]
    assert [r["zero_variance_groups"] for r in rows] == [0, 1]
