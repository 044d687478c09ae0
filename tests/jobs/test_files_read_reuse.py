"""A reward that reads files named in the rollout (``@reads_files``): its stored results are
reused only while those files are unchanged, through score, rescore and imported scores."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from rewardsmith import Rollout, Rubric, ScoreJob
from rewardsmith.jobs.recording import import_scores
from rewardsmith.jobs.rescore import rescore
from rewardsmith.store import Store

REWARD = textwrap.dedent('''
    from pathlib import Path
    from rewardsmith import reads_files

    def task_file(rollout, params):
        return [rollout.metadata["task"]]

    @reads_files(task_file)
    def graded(completion, metadata, log):
        with open(log, "a") as handle:
            handle.write(completion + "\\n")
        return float(completion == Path(metadata["task"]).read_text().strip())

    def plain(completion, log):
        with open(log, "a") as handle:
            handle.write("plain " + completion + "\\n")
        return 1.0
''')


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Rubric, list[Rollout], Path, list[Path]]:
    (tmp_path / "rewards_files.py").write_text(REWARD)
    log = tmp_path / "calls.log"
    tasks = []
    for index in range(3):
        task = tmp_path / f"task{index}.txt"
        task.write_text(f"answer{index}")
        tasks.append(task)
    rubric = Rubric.from_dict({"name": "files", "components": {
        "graded": {"reward": f"{tmp_path}/rewards_files.py:graded",
                   "params": {"log": str(log)}},
        "plain": {"reward": f"{tmp_path}/rewards_files.py:plain", "params": {"log": str(log)}},
    }})
    rollouts = [Rollout(f"r{i}", "g", "p", f"answer{i}", metadata={"task": str(tasks[i])})
                for i in range(3)]
    return rubric, rollouts, log, tasks


def graded_calls(log: Path) -> list[str]:
    if not log.exists():
        return []
    return [line for line in log.read_text().splitlines() if not line.startswith("plain ")]


def plain_calls(log: Path) -> int:
    return sum(line.startswith("plain ") for line in log.read_text().splitlines())


@pytest.mark.parametrize("workers", [0, 1])
def test_score_reuses_only_while_the_files_are_unchanged(
        setup: tuple[Rubric, list[Rollout], Path, list[Path]], tmp_path: Path,
        workers: int) -> None:
    rubric, rollouts, log, tasks = setup
    store = str(tmp_path / "runs.db")
    # A fresh store: results are recorded beside the run, by rollout, except these.
    first = ScoreJob(rubric, workers=workers, store=store).run_rollouts(rollouts)
    assert [s.components["graded"] for s in first.scores] == [1.0, 1.0, 1.0]
    assert len(graded_calls(log)) == 3
    again = ScoreJob(rubric, workers=workers, store=store).run_rollouts(rollouts)
    assert again.summary.extra["reward_calls"] == 0
    tasks[1].write_text("something else")  # the task edited in place
    edited = ScoreJob(rubric, workers=workers, store=store).run_rollouts(rollouts)
    assert [s.components["graded"] for s in edited.scores] == [1.0, 0.0, 1.0]
    assert graded_calls(log) == ["answer0", "answer1", "answer2", "answer1"]
    assert plain_calls(log) == 3  # the component that reads no file was reused throughout


def test_rescore_recomputes_the_rollouts_whose_files_changed(
        setup: tuple[Rubric, list[Rollout], Path, list[Path]], tmp_path: Path) -> None:
    rubric, rollouts, log, tasks = setup
    store = tmp_path / "runs.db"
    ScoreJob(rubric, workers=0, store=str(store)).run_rollouts(rollouts)
    unchanged = rescore(store, rubric)
    assert unchanged.reward_calls == 0
    tasks[2].write_text("moved on")
    plan = rescore(store, rubric, dry_run=True).plan
    row = next(r for r in plan.components if r.name == "graded")
    assert (row.reused, row.compute) == (2, 1)
    assert "files it reads changed" in row.reason
    assert next(r for r in plan.components if r.name == "plain").compute == 0
    done = rescore(store, rubric, output=tmp_path / "out.jsonl")
    assert done.reward_calls == 1
    assert [s.components["graded"] for s in done.scores] == [1.0, 1.0, 0.0]
    assert graded_calls(log)[-1] == "answer2"
    # The recomputed result is stored under the new files: the next rescore computes nothing.
    assert rescore(store, rubric).reward_calls == 0


def test_imported_scores_are_keyed_on_the_files_as_they_are_at_import(
        setup: tuple[Rubric, list[Rollout], Path, list[Path]], tmp_path: Path) -> None:
    rubric, rollouts, log, tasks = setup
    scored = tmp_path / "scored.jsonl"
    scored.write_text("".join(json.dumps({
        "id": r.id, "group": r.group, "reward": 2.0, "components": {"graded": 1.0, "plain": 1.0},
        "completion": r.completion, "prompt": r.prompt, "metadata": r.metadata}) + "\n"
        for r in rollouts))
    store = tmp_path / "runs.db"
    import_scores(store, scored, rubric)
    assert rescore(store, rubric).reward_calls == 0
    tasks[0].write_text("edited")
    assert rescore(store, rubric).reward_calls == 1
    assert graded_calls(log) == ["answer0"]


def test_a_store_opened_by_a_second_job_agrees_on_the_keys(
        setup: tuple[Rubric, list[Rollout], Path, list[Path]], tmp_path: Path) -> None:
    rubric, rollouts, log, _tasks = setup
    store = tmp_path / "runs.db"
    ScoreJob(rubric, workers=0, store=str(store)).run_rollouts(rollouts[:2])
    # The second run holds one new rollout and two stored ones, in a store that is not fresh.
    second = ScoreJob(rubric, workers=0, store=str(store)).run_rollouts(rollouts)
    assert second.summary.extra["reward_calls"] == 2  # graded and plain, for r2 only
    with Store(store) as opened:
        assert len(opened.runs()) == 2
