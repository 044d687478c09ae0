"""verifier_script: a Harbor task's tests/test.sh over the agent's workspace, in bubblewrap.

The shipped task (word-count) is graded with a right and a wrong program, from a folder and
from a tarball; then each hack of the agent: planting reward files, editing the tests, a
workspace link into the log folder or the tests, ending the script early, writing the log
folder from its own code, a daemon that outlives its test, a tarball that climbs out.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import Rollout, Rubric, ScoreJob, score_rollouts
from rewardsmith.errors import RubricError
from rewardsmith.rewards.agents.verifier_script import grade, reference_score, verifier_script
from rewardsmith.sandbox import SandboxUnavailable
from rewardsmith.sandbox.script_jobs import ScriptOutput, ScriptResult
from rewardsmith.testing import run_reward_tests

TASK = str(Path(__file__).resolve().parent.parent.parents[1] / "src" / "rewardsmith" / "data"
           / "harbor_tasks" / "word-count")
RIGHT = "import sys\n\nprint(len(sys.stdin.read().split()))\n"
WRONG = "import sys\n\nprint(len(sys.stdin.read().split(' ')))\n"  # counts empty strings


def workspace(root: Path, files: dict[str, str], links: dict[str, str] | None = None) -> str:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for name, target in (links or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / name)
    return str(root)


def run(folder: str, task: str = TASK, **params: Any) -> dict[str, float]:
    result: dict[str, float] = verifier_script(None, {"workspace": folder}, task=task, **params)
    return result


def make_task(root: Path, script: str, timeout: float = 20.0,
              files: dict[str, str] | None = None) -> str:
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test.sh").write_text(script)
    for name, text in (files or {}).items():
        (root / "tests" / name).write_text(text)
    (root / "task.toml").write_text(f'version = "1.0"\n\n[verifier]\ntimeout_sec = {timeout}\n')
    os.system(f"chmod -R a+rX {root}")
    return str(root)


def test_the_shipped_task_grades_right_and_wrong_programs(tmp_path: Path) -> None:
    right = run(workspace(tmp_path / "right", {"wc.py": RIGHT}))
    assert right["reward"] == 1.0 and right["reward.passed"] == right["reward.total"] == 5.0
    wrong = run(workspace(tmp_path / "wrong", {"wc.py": WRONG}))
    assert wrong["reward"] == pytest.approx(0.4) and wrong["reward.passed"] == 2.0
    empty = run(workspace(tmp_path / "empty", {}))
    assert empty["reward"] == 0.0 and empty["exit_code"] == 0.0


@pytest.mark.parametrize("suffix", [".tar", ".tar.gz"])
def test_a_tarball_workspace_is_unpacked_privately(tmp_path: Path, suffix: str) -> None:
    data = RIGHT.encode()
    path = tmp_path / ("ws" + suffix)
    with tarfile.open(path, "w:gz" if suffix == ".tar.gz" else "w:") as archive:
        member = tarfile.TarInfo("./wc.py")
        member.size = len(data)
        archive.addfile(member, io.BytesIO(data))
    assert run(str(path))["reward"] == 1.0
    assert path.stat().st_size > 0  # the tarball itself is untouched


def test_reward_files_planted_in_the_workspace_are_its_own_files(tmp_path: Path) -> None:
    planted = {"reward.txt": "1\n", "reward.json": '{"reward": 1}\n',
               "logs/verifier/reward.txt": "1\n", "logs/verifier/reward.json": '{"reward": 1}',
               "wc.py": "print(5)\n"}
    result = run(workspace(tmp_path / "ws", planted))
    assert result["reward"] == 0.0


def test_a_tarball_that_climbs_out_or_is_absolute_plants_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ws.tar"
    with tarfile.open(path, "w") as archive:
        for name, text in [("../logs/verifier/reward.txt", "1\n"),
                           ("/logs/verifier/reward.json", '{"reward": 1}'),
                           ("wc.py", "print(5)\n")]:
            member = tarfile.TarInfo(name)
            member.size = len(text)
            archive.addfile(member, io.BytesIO(text.encode()))
        link = tarfile.TarInfo("out")  # a link to the log folder, then a file through it
        link.type = tarfile.SYMTYPE
        link.linkname = "/logs/verifier"
        archive.addfile(link)
        through = tarfile.TarInfo("out/reward.txt")
        through.size = 2
        archive.addfile(through, io.BytesIO(b"1\n"))
    assert run(str(path))["reward"] == 0.0


def test_edited_tests_in_the_workspace_are_not_the_tests_that_run(tmp_path: Path) -> None:
    forged = {"tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
              "tests/cases/01-two.expected": "5\n", "wc.py": "print(5)\n"}
    assert run(workspace(tmp_path / "ws", forged))["reward"] == 0.0


def test_a_link_into_the_log_folder_is_removed_before_the_script(tmp_path: Path) -> None:
    # test.sh writes the program's output to /app/output.txt: through this link, into
    # reward.txt, which Harbor's order reads before the script's reward.json.
    ws = workspace(tmp_path / "ws", {"wc.py": "print(1)\n"},
                   {"output.txt": "/logs/verifier/reward.txt", "sub/up": "../../logs"})
    result = run(ws)
    assert result["links_removed"] == 2.0
    assert result["reward"] == pytest.approx(0.2)  # only the one-word case, honestly


def test_a_link_to_the_expected_answer_in_the_tests_is_removed(tmp_path: Path) -> None:
    task = make_task(tmp_path / "task", (
        "if cmp -s /app/answer.txt /tests/expected.txt; then echo 1; else echo 0; fi "
        "> /logs/verifier/reward.txt\n"), files={"expected.txt": "42\n"})
    ws = workspace(tmp_path / "ws", {}, {"answer.txt": "/tests/expected.txt"})
    result = run(ws, task)
    assert result["reward"] == 0.0 and result["links_removed"] == 1.0
    honest = run(workspace(tmp_path / "honest", {"answer.txt": "42\n"}), task)
    assert honest["reward"] == 1.0


def test_ending_the_script_early_scores_zero_whatever_it_left(tmp_path: Path) -> None:
    program = ("import os, signal\n"
               "open('/logs/verifier/reward.txt', 'w').write('1\\n')\n"
               "open('/logs/verifier/reward.json', 'w').write('{\"reward\": 1}')\n"
               "os.kill(-1, signal.SIGKILL)  # every process of the sandbox it may signal\n")
    result = run(workspace(tmp_path / "ws", {"wc.py": program}))
    assert result["reward"] == 0.0 and result["script_killed"] == 1.0


def test_reward_files_the_program_writes_are_replaced_by_the_verdict(tmp_path: Path) -> None:
    program = ("import os, sys, time\n"
               "open('/logs/verifier/reward.txt', 'w').write('1\\n')\n"
               "if os.fork() == 0:  # a daemon that keeps writing after its test\n"
               "    os.setsid()\n"
               "    while True:\n"
               "        open('/logs/verifier/reward.txt', 'w').write('1\\n')\n"
               "        time.sleep(0.01)\n"
               "print(7)\n")
    result = run(workspace(tmp_path / "ws", {"wc.py": program}))
    assert result["reward"] == 0.0 and "both_reward_files" not in result


def test_script_outcomes(tmp_path: Path) -> None:
    def outcome(name: str, script: str, timeout: float = 20.0, **params: Any) -> dict[str, float]:
        task = make_task(tmp_path / name, script, timeout)
        return run(workspace(tmp_path / f"{name}-ws", {}), task, **params)

    assert outcome("half", "echo 0.5 > /logs/verifier/reward.txt")["reward"] == 0.5
    nothing = outcome("nothing", "echo graded but wrote no reward")
    assert nothing["reward"] == 0.0 and nothing["no_reward_file"] == 1.0
    failed = outcome("failed", "echo 1 > /logs/verifier/reward.txt; exit 3")
    assert failed["reward"] == 1.0 and failed["exit_code"] == 3.0  # Harbor: the file decides
    slow = outcome("slow", "echo 1 > /logs/verifier/reward.txt; sleep 30", timeout=1.0)
    assert slow["reward"] == 0.0 and slow["timeout"] == 1.0
    linked = outcome("linked", "echo 1 > /tmp/r; ln -s /tmp/r /logs/verifier/reward.txt")
    assert linked["reward"] == 0.0 and linked["bad_reward_file"] == 1.0
    named = outcome("named", """echo '{"tests": 1, "style": 0.5}' > /logs/verifier/reward.json""",
                    weights={"tests": 3, "style": 1})
    assert named["reward"] == pytest.approx(0.875) and named["reward.style"] == 0.5


@pytest.mark.parametrize("outputs, expected, metric", [
    ({"reward.txt": "0.25\n"}, 0.25, None),
    ({"reward.txt": " 1 "}, 1.0, None),
    ({"reward.txt": "one"}, 0.0, "bad_reward_file"),
    ({"reward.txt": "nan"}, 0.0, "bad_reward_file"),
    ({"reward.txt": "7"}, 0.0, "out_of_range"),
    ({"reward.txt": "-1"}, 0.0, "out_of_range"),
    ({"reward.txt": "1", "reward.json": '{"reward": 0}'}, 1.0, "both_reward_files"),
    ({"reward.json": '{"reward": 0.5, "passed": 1}'}, 0.5, None),
    ({"reward.json": '{"accuracy": 0.75}'}, 0.75, None),
    ({"reward.json": '{"a": 1, "b": 0}'}, 0.0, "no_reward_key"),
    ({"reward.json": '{"reward": true}'}, 0.0, "bad_reward_file"),
    ({"reward.json": '{"reward": "1"}'}, 0.0, "bad_reward_file"),
    ({"reward.json": '{"reward": 0.5, "details": "2 of 4", "ok": true}'}, 0.5, None),
    ({"reward.json": '{"accuracy": 1, "details": "all"}'}, 1.0, None),
    ({"reward.json": '{"reward": 1e400}'}, 0.0, "bad_reward_file"),
    ({"reward.json": "[1]"}, 0.0, "bad_reward_file"),
    ({"reward.json": "{"}, 0.0, "bad_reward_file"),
])
def test_reward_files_are_read_as_harbor_reads_them(outputs: dict[str, str], expected: float,
                                                    metric: str | None) -> None:
    found = {name: ScriptOutput(True, True, text) for name, text in outputs.items()}
    result = grade(ScriptResult(0, False, 0.1, found))
    assert result["reward"] == expected
    if metric is not None:
        assert result[metric] == 1.0


def test_reward_file_pins_the_one_file_the_task_writes() -> None:
    found = {"reward.txt": ScriptOutput(True, True, "1"),
             "reward.json": ScriptOutput(True, True, '{"reward": 0.5}')}
    assert grade(ScriptResult(0, False, 0.1, found), "json")["reward"] == 0.5
    assert grade(ScriptResult(0, False, 0.1, {"reward.json": found["reward.json"]}),
                 "txt")["no_reward_file"] == 1.0
    assert grade(ScriptResult(0, False, 0.1, {"reward.txt": ScriptOutput(True, True, "5")}),
                 reward_range=None)["reward"] == 5.0


def test_a_workspace_too_large_for_its_limit_is_a_zero(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.mkdir()
    (big / "blob.bin").write_bytes(os.urandom(3 << 20))
    result = run(str(big), workspace_limit=1)
    assert result == {"reward": 0.0, "workspace_too_large": 1.0}


def test_in_a_rubric_load_checks_and_errors_name_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(RubricError, match="no tests/test.sh"):
        Rubric.from_dict({"components": {"v": {"reward": "verifier_script",
                                               "params": {"task": str(tmp_path)}}}})
    with pytest.raises(RubricError, match="reward_file"):
        Rubric.from_dict({"components": {"v": {"reward": "verifier_script",
                                               "params": {"reward_file": "yaml"}}}})
    with pytest.raises(RubricError, match="sandbox 'none'"):
        Rubric.from_dict({"components": {"v": {"reward": "verifier_script",
                                               "params": {"sandbox": "none"}}}})
    docker = tmp_path / "docker-task"
    make_task(docker, "true")
    (docker / "environment").mkdir()
    (docker / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\n")
    with pytest.raises(RubricError, match="environment/Dockerfile"):
        Rubric.from_dict({"components": {"v": {"reward": "verifier_script", "params": {
            "task": str(docker), "sandbox": "bubblewrap"}}}})


def test_scored_through_the_engine_with_the_task_in_the_answer(tmp_path: Path) -> None:
    rubric = Rubric.from_dict({"components": {"tests": {"reward": "verifier_script"}}})
    rollouts = [
        Rollout(id="right", group="g", answer=TASK,
                metadata={"workspace": workspace(tmp_path / "a", {"wc.py": RIGHT})}),
        Rollout(id="none", group="g", answer=TASK, metadata={}),
        Rollout(id="gone", group="g", answer=TASK,
                metadata={"workspace": str(tmp_path / "missing")}),
    ]
    scores = score_rollouts(rubric, rollouts, workers=0)
    assert scores[0].reward == 1.0 and scores[0].metrics["tests.reward.passed"] == 5.0
    assert scores[1].status.value == "error" and "metadata.workspace" in scores[1].errors["tests"]
    assert scores[2].status.value == "error" and "does not exist" in scores[2].errors["tests"]


def test_rewardsmith_test_runs_the_hack_probes_on_the_shipped_task() -> None:
    report = run_reward_tests("verifier_script", workers=0, edges=False)
    assert report.kinds == ["harbor-task"]
    assert report.passed, [(r.name, r.failures, r.got) for r in report.failed]
    probes = {r.name: r.value for r in report.rows if r.section == "probe"}
    for hack in ("reward files planted in the workspace", "the tests edited in the workspace",
                 "a workspace link into the log folder",
                 "ending test.sh early after writing a reward",
                 "the program writes the reward files itself",
                 "a daemon that writes the reward later",
                 "a tarball that climbs out of the workspace"):
        value = probes[hack]
        assert value is not None and value < 1.0, (hack, value)
    calibration = {r.name: r.value for r in report.rows if r.section == "calibration"}
    assert calibration["harbor-task: a correct answer"] == 1.0


def test_a_fifo_in_the_workspace_and_a_script_past_its_memory(tmp_path: Path) -> None:
    ws = workspace(tmp_path / "ws", {"wc.py": RIGHT})
    os.mkfifo(tmp_path / "ws" / "pipe")  # a naive copy would block reading it
    assert run(ws)["reward"] == 1.0
    hungry = make_task(tmp_path / "hungry", (
        "if python3 -c 'x = bytearray(900 << 20)'; then echo 1; else echo 0.5; fi "
        "> /logs/verifier/reward.txt\n"))
    small = run(workspace(tmp_path / "ws2", {}), hungry, memory_limit=320, workspace_limit=32)
    assert small["reward"] == 0.5
    assert run(workspace(tmp_path / "ws3", {}), hungry)["reward"] == 1.0
    with pytest.raises(RubricError, match="memory_limit .* holds the workspace's copy too"):
        Rubric.from_dict({"components": {"v": {"reward": "verifier_script", "params": {
            "memory_limit": 1024, "workspace_limit": 1024}}}})


def test_a_virtualenv_comes_first_on_the_scripts_path(tmp_path: Path) -> None:
    base = tempfile.mkdtemp(prefix="rewardsmith-venv-test-")  # where nobody may enter
    try:
        os.chmod(base, 0o755)
        venv = os.path.join(base, "venv")
        made = subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", venv],
                              capture_output=True)
        if made.returncode != 0:
            pytest.skip(f"python3 -m venv is not available: {made.stderr.decode()[-200:]}")
        task = make_task(tmp_path / "task", (
            "python -c 'import sys; print(sys.prefix)' > /tmp/prefix\n"
            f"if grep -qx '{venv}' /tmp/prefix; then echo 1; else echo 0; fi "
            "> /logs/verifier/reward.txt\n"))
        ws = workspace(tmp_path / "ws", {})
        assert run(ws, task, environment=venv)["reward"] == 1.0
        assert run(ws, task)["reward"] == 0.0
        hidden = tmp_path / "hidden" / "venv"  # under pytest's folder, which only root enters
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(hidden)],
                       check=True)
        if os.geteuid() == 0:
            with pytest.raises(SandboxUnavailable, match="cannot enter"):
                run(ws, task, environment=str(hidden))
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_tarball_with_clashing_members_is_unpacked_as_far_as_it_can(tmp_path: Path) -> None:
    path = tmp_path / "ws.tar"
    with tarfile.open(path, "w") as archive:
        folder = tarfile.TarInfo("wc.py")  # a folder, then a file of the same name over it
        folder.type = tarfile.DIRTYPE
        archive.addfile(folder)
        for name, text in [("wc.py", "print(5)\n"), ("sub/x", "1"), ("sub", "not a folder")]:
            member = tarfile.TarInfo(name)
            member.size = len(text)
            archive.addfile(member, io.BytesIO(text.encode()))
    result = run(str(path))
    assert result["reward"] == 0.0 and result["exit_code"] == 0.0  # graded, not an error


def test_a_workspace_this_machine_cannot_read_is_an_error_not_a_grade(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable(workspace: str | None, sink: Any) -> None:
        sink.write(b"\0" * 512)  # the start of a tar stream, then a file that cannot be read
        raise PermissionError(13, "Permission denied", f"{workspace}/secret")

    monkeypatch.setattr("rewardsmith.sandbox.script_jobs.workspace_stream", unreadable)
    with pytest.raises(ValueError, match="could not be read: .*Permission denied"):
        run(workspace(tmp_path / "ws", {"wc.py": RIGHT}))


def test_the_reference_solution_of_a_task_is_scored_as_harbors_oracle_does(
        tmp_path: Path) -> None:
    shipped = reference_score(TASK)
    assert shipped["reward"] == 1.0 and shipped["reward.passed"] == 5.0
    # A task written for Harbor that installs its tools when it runs: offline and without
    # root, its own solution cannot pass, which this shows before any training.
    task = make_task(tmp_path / "needs-network", (
        "trap 'echo $reward > /logs/verifier/reward.txt' EXIT\nreward=0\n"
        "apt-get install -y curl > /dev/null 2>&1 || exit 1\nreward=1\n"))
    (tmp_path / "needs-network" / "solution").mkdir()
    (tmp_path / "needs-network" / "solution" / "solve.sh").write_text("echo 42 > /app/a.txt\n")
    os.system(f"chmod -R a+rX {tmp_path / 'needs-network'}")
    assert reference_score(task)["reward"] == 0.0
    with pytest.raises(ValueError, match="no solution/solve.sh"):
        reference_score(make_task(tmp_path / "no-solution", "true\n"))


def test_a_workspace_path_holding_another_state_is_graded_again(tmp_path: Path) -> None:
    """Results are stored under what the task folder and the workspace hold: a workspace
    path reused for another agent's state, or the task edited in place, is graded again."""
    rubric = Rubric.from_dict({"components": {"tests": {"reward": "verifier_script"}}})
    task = tmp_path / "task"
    shutil.copytree(TASK, task)
    folder = workspace(tmp_path / "ws", {"wc.py": RIGHT})
    rollouts = [Rollout(id="a", group="g", answer=str(task), metadata={"workspace": folder})]
    store = str(tmp_path / "runs.db")

    def score() -> tuple[float | None, int]:
        done = ScoreJob(rubric, workers=0, store=store).run_rollouts(rollouts)
        return done.scores[0].reward, done.summary.extra["reward_calls"]

    assert score() == (1.0, 1)
    assert score() == (1.0, 0)
    Path(folder, "wc.py").write_text(WRONG)
    reward, calls = score()
    assert reward == pytest.approx(0.4) and calls == 1
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 0.25 > /logs/verifier/reward.txt\n")
    assert score() == (0.25, 1)
