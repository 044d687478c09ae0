"""The repo_tests reward on the shipped tasks, run for real in the bubblewrap sandbox: a diff
applied to the base repository or a final workspace, the modes, the metrics, the limits."""

from __future__ import annotations

import json
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import Rollout, Rubric, ScoreJob
from rewardsmith.jobs.rescore import rescore
from rewardsmith.rewards import get_builtin
from rewardsmith.rewards.agents.repo_patch import apply_patch
from rewardsmith.rewards.agents.repo_tasks import shipped_tasks, task_answer, write_repo
from support.repo_env import pytest_environment, require_sandbox

TASKS = shipped_tasks()
CALC = TASKS["calc"]
REWARD = get_builtin("repo_tests")
assert REWARD is not None


@pytest.fixture(scope="module", autouse=True)
def real_sandbox() -> None:
    require_sandbox()


@pytest.fixture(scope="module")
def env() -> Iterator[str]:
    yield from pytest_environment()


def grade(env: str, completion: Any, answer: Any, metadata: Any = None,
          **params: Any) -> dict[str, float]:
    params.setdefault("environment", env)
    REWARD.check_params(params)
    result: dict[str, float] = REWARD.func(completion, answer, metadata or {}, **params)
    return result


def public_folder(tmp_path: Path, name: str) -> Path:
    """A folder the sandbox's user may read (pytest's own are private to root)."""
    folder = tmp_path / name
    folder.mkdir()
    for path in (tmp_path, folder):
        os.chmod(path, 0o755)
    return folder


def fixed_workspace(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """The calc task's files with the gold patch applied, written into a readable folder."""
    fixed = {path: content.decode() for path, content in apply_patch(
        {p: t.encode() for p, t in CALC.repo.items()}, CALC.gold_patch).items()
        if isinstance(content, bytes)}
    workspace = public_folder(tmp_path, "workspace")
    for path, text in fixed.items():
        (workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (workspace / path).write_text(text)
    return fixed, workspace


@pytest.mark.parametrize("name", [
    "calc", pytest.param("inventory", marks=pytest.mark.slow),
    pytest.param("textkit", marks=pytest.mark.slow)])
def test_gold_patch_resolves_and_the_base_does_not(env: str, name: str) -> None:
    task = TASKS[name]
    gold = grade(env, task.gold_patch, task_answer(task))
    assert gold["reward"] == 1.0
    assert gold["fail_to_pass_passed"] == gold["fail_to_pass_total"] == len(task.fail_to_pass)
    assert gold["pass_to_pass_passed"] == gold["pass_to_pass_total"] == len(task.pass_to_pass)
    assert gold["tampered"] == gold["patch_failed"] == gold["timeouts"] == 0
    empty = grade(env, "", task_answer(task))
    assert empty["reward"] == 0.0
    assert (empty["fail_to_pass_passed"], empty["pass_to_pass_passed"]) == (
        0, len(task.pass_to_pass))


@pytest.mark.slow
def test_wrong_patches_score_what_plain_pytest_measured(env: str) -> None:
    for task in TASKS.values():
        total = len(task.fail_to_pass) + len(task.pass_to_pass)
        for wrong in task.wrong_patches:
            got = grade(env, wrong.patch, json.dumps(task_answer(task)), mode="fraction")
            assert (got["fail_to_pass_passed"], got["pass_to_pass_passed"]) == (
                wrong.fail_to_pass_passed, wrong.pass_to_pass_passed), wrong.why
            assert got["reward"] == (wrong.fail_to_pass_passed + wrong.pass_to_pass_passed) \
                / total


def test_a_diff_inside_prose_and_a_fence_is_found(env: str) -> None:
    text = f"The mean was off by one.\n\n```diff\n{CALC.gold_patch}```\n\nThat fixes it."
    assert grade(env, text, task_answer(CALC))["reward"] == 1.0
    chat = [{"role": "user", "content": "fix it"}, {"role": "assistant", "content": text}]
    assert grade(env, chat, task_answer(CALC))["reward"] == 1.0


def test_a_diff_that_does_not_apply_is_a_zero_not_an_error(env: str) -> None:
    broken = CALC.gold_patch.replace("return sum(values) / (len(values) - 1)",
                                     "return sum(values) / (len(values) - 7)")
    got = grade(env, broken, task_answer(CALC))
    assert got["reward"] == 0.0 and got["patch_failed"] == 1.0
    assert grade(env, "I fixed it, trust me.", task_answer(CALC))["patch_failed"] == 1.0


def test_the_base_repository_as_a_folder_or_a_tarball(env: str, tmp_path: Path) -> None:
    folder = write_repo(CALC, str(public_folder(tmp_path, "repo")))
    assert grade(env, CALC.gold_patch, task_answer(CALC, folder))["reward"] == 1.0
    tarball = tmp_path / "repo.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(folder, arcname=".")
    os.chmod(tarball, 0o644)
    assert grade(env, CALC.gold_patch, task_answer(CALC, str(tarball)))["reward"] == 1.0
    # Nothing the run wrote is left in the base.
    assert sorted(p.name for p in Path(folder).rglob("*") if p.is_file()) == sorted(
        Path(p).name for p in CALC.repo)


def test_the_final_workspace_as_a_folder_or_a_tarball(env: str, tmp_path: Path) -> None:
    fixed, workspace = fixed_workspace(tmp_path)
    (workspace / "calc" / "__pycache__").mkdir()
    (workspace / "calc" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"junk")
    answer = task_answer(CALC)
    meta = {"workspace": str(workspace)}
    assert grade(env, "", answer, meta)["reward"] == 1.0
    tarball = tmp_path / "workspace.tar"
    with tarfile.open(tarball, "w") as archive:
        archive.add(workspace, arcname=".")
    assert grade(env, "", answer, {"workspace": str(tarball)})["reward"] == 1.0
    # Without a base repository the tests are still placed over the workspace.
    no_base = {k: v for k, v in answer.items() if k != "repo"}
    no_base["tests"] = {p: CALC.repo[p] for p in CALC.test_files}
    (workspace / "tests" / "test_calc.py").unlink()
    assert grade(env, "", no_base, meta)["reward"] == 1.0


def test_hidden_tests_given_apart_from_the_repository(env: str) -> None:
    answer = task_answer(CALC)
    answer["tests"] = {"tests/test_hidden.py": (
        "from calc import mean\n\ndef test_three():\n    assert mean([1, 2, 6]) == 3\n")}
    answer["fail_to_pass"] = ["tests/test_hidden.py::test_three"]
    assert grade(env, CALC.gold_patch, answer)["reward"] == 1.0
    assert grade(env, "", answer)["reward"] == 0.0


def test_a_test_command_and_ids_as_json_strings(env: str) -> None:
    answer = task_answer(CALC)
    answer["fail_to_pass"] = json.dumps(answer["fail_to_pass"])
    answer["test_command"] = ["tests/", "-k", "mean"]
    got = grade(env, CALC.gold_patch, answer, mode="fraction")
    # test_add and the clamp tests were deselected: they did not pass.
    assert got["fail_to_pass_passed"] == 2 and got["pass_to_pass_passed"] == 1


def test_nothing_a_run_writes_reaches_the_next(env: str) -> None:
    answer = task_answer(CALC)
    answer["tests"] = {"tests/test_fresh.py": (
        "import os\n\ndef test_fresh():\n    assert not os.path.exists('leftover')\n"
        "    open('leftover', 'w').write('x')\n    open('/tmp/leftover', 'w').write('x')\n"
        "    assert not os.path.exists(os.path.expanduser('~/seen'))\n")}
    answer["pass_to_pass"] = ["tests/test_fresh.py::test_fresh"]
    answer["fail_to_pass"] = []
    for _ in range(2):
        assert grade(env, "", answer)["reward"] == 1.0


@pytest.mark.slow
def test_a_run_past_its_time_limit_is_cut_and_scored(env: str) -> None:
    hang = CALC.gold_patch.replace(
        "+    return sum(values) / len(values)",
        "+    while len(values) == 1:\n+        pass\n+    return sum(values) / len(values)")
    hang = hang.replace("@@ -10,7 +10,7 @@", "@@ -10,7 +10,9 @@")
    got = grade(env, hang, task_answer(CALC), time_limit=3.0, mode="fraction")
    assert got["timeouts"] == 1.0
    assert got["reward"] < 1.0 and got["fail_to_pass_passed"] <= 1


@pytest.mark.parametrize("answer, message", [
    ("not json", "answer: a JSON object"),
    ({"repo": {"a.py": ""}}, "no test ids"),
    ({"repo": {"a.py": ""}, "fail_to_pass": "[1]"}, "fail_to_pass"),
    ({"repo": "/no/such/folder", "fail_to_pass": ["t.py::x"]}, "does not exist"),
    ({"repo": {"../a.py": ""}, "fail_to_pass": ["t.py::x"]}, "outside the repository"),
    ({"fail_to_pass": ["t.py::x"]}, "answer.repo is needed"),
    ({"repo": {"a.py": ""}, "fail_to_pass": ["t.py::x"], "extra": 1}, "unknown field"),
])
def test_a_task_that_cannot_be_read_is_an_error(env: str, answer: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        grade(env, "", answer)


@pytest.mark.parametrize("params, message", [
    ({"mode": "all"}, "mode"), ({"time_limit": 0}, "time_limit"),
    ({"memory_limit": 1.5}, "memory_limit"), ({"sandbox": "docker"}, "cannot run"),
    ({"environment": "/no/such/env"}, "does not exist"), ({"plugins": "x"}, "plugins"),
])
def test_params_are_checked_at_load(params: dict[str, Any], message: str) -> None:
    with pytest.raises(Exception, match=message):
        REWARD.check_params(params)


def test_an_environment_without_pytest_is_refused_at_load() -> None:
    with pytest.raises(ValueError, match="pytest"):
        REWARD.check_params({"environment": "/usr/bin/python3"})


def test_scored_through_the_engine_and_paid_once(env: str, tmp_path: Path) -> None:
    rubric = Rubric.from_dict({"name": "repo", "components": {"tests": {
        "reward": "repo_tests", "params": {"environment": env, "mode": "fraction"}}}})
    rollouts = [Rollout(id=name, group="calc", prompt="Fix mean().", completion=patch,
                        answer=task_answer(CALC))
                for name, patch in (("gold", CALC.gold_patch), ("none", "no diff here"))]
    store = str(tmp_path / "runs.db")
    first = ScoreJob(rubric, workers=0, store=store).run_rollouts(rollouts)
    gold, none = first.scores
    assert gold.reward == 1.0 and gold.metrics["tests.fail_to_pass_passed"] == 2
    assert none.reward == 0.0 and none.metrics["tests.patch_failed"] == 1
    assert first.summary.extra["reward_calls"] == 2
    again = ScoreJob(rubric, workers=0, store=store).run_rollouts(rollouts)
    assert again.summary.extra["reward_calls"] == 0
    assert [s.reward for s in again.scores] == [1.0, 0.0]


def test_a_task_edited_in_place_or_a_workspace_reused_is_graded_again(
        env: str, tmp_path: Path) -> None:
    """Stored results are keyed on what the task's and the workspace's paths hold, not on the
    paths: the same rollout line over changed files is graded again, not replayed."""
    rubric = Rubric.from_dict({"name": "repo", "components": {"tests": {
        "reward": "repo_tests", "params": {"environment": env}}}})
    repo = write_repo(CALC, str(public_folder(tmp_path, "repo")))
    fixed, workspace = fixed_workspace(tmp_path)
    rollouts = [
        Rollout(id="diff", group="calc", prompt="Fix mean().", completion=CALC.gold_patch,
                answer=task_answer(CALC, repo)),
        Rollout(id="workspace", group="calc", prompt="Fix mean().", completion="",
                answer=task_answer(CALC), metadata={"workspace": str(workspace)})]
    store = str(tmp_path / "runs.db")

    def score() -> tuple[list[float | None], int]:
        done = ScoreJob(rubric, workers=0, store=store).run_rollouts(rollouts)
        return [s.reward for s in done.scores], done.summary.extra["reward_calls"]

    assert score() == ([1.0, 1.0], 2)
    assert score() == ([1.0, 1.0], 0)
    # The workspace path now holds another state (the bug put back): graded again.
    changed = [p for p in fixed if fixed[p] != CALC.repo.get(p) and p in CALC.repo]
    assert changed
    for path in changed:
        (workspace / path).write_text(CALC.repo[path])
    assert score() == ([1.0, 0.0], 1)
    # The base repository edited in place: the diff no longer applies, graded again.
    for path in changed:
        (Path(repo) / path).write_text("# rewritten\n")
    rewards, calls = score()
    assert (rewards, calls) == ([0.0, 0.0], 1)
    assert rescore(Path(store), rubric).reward_calls == 0
