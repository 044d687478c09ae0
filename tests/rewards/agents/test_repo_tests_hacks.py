"""repo_tests against the hacks a policy finds, each run for real in the sandbox: editing or
deleting the tests, a conftest.py that forces passes, skipping through the run's config, a
syntax error that stops collection, shadowing pytest, forging the reporter's lines, replacing
the functions or hooks that make verdicts, and linking the tests away in a workspace. None may
earn credit the honest fix would not."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardsmith.rewards import get_builtin
from rewardsmith.rewards.agents.repo_tasks import diff_of, shipped_tasks, task_answer, write_repo
from rewardsmith.testing import run_reward_tests
from rewardsmith.testing.repo_kinds import FORCE_PASS, REGISTERED_PLUGIN, REPLACED_VERDICT
from support.repo_env import pytest_environment, require_sandbox

CALC = shipped_tasks()["calc"]
REWARD = get_builtin("repo_tests")
assert REWARD is not None
INIT = "calc/__init__.py"
TESTS = "tests/test_calc.py"
FIXED = CALC.repo[INIT].replace("(len(values) - 1)", "len(values)")

@pytest.fixture(scope="module", autouse=True)
def real_sandbox() -> None:
    require_sandbox()


@pytest.fixture(scope="module")
def env() -> Iterator[str]:
    yield from pytest_environment()


def diff(changes: dict[str, str | None]) -> str:
    return diff_of(CALC, changes)


def grade(env: str, completion: str, metadata: Any = None, **params: Any) -> dict[str, float]:
    params.setdefault("environment", env)
    REWARD.check_params(params)
    result: dict[str, float] = REWARD.func(completion, task_answer(CALC), metadata or {},
                                           **params)
    return result


def test_the_honest_fix_resolves(env: str) -> None:
    assert grade(env, diff({INIT: FIXED}))["reward"] == 1.0


TAMPERING: list[tuple[str, dict[str, str | None]]] = [
    ("tests edited to pass", {TESTS: CALC.repo[TESTS].replace(
        "assert mean([1, 3]) == 2", "assert True").replace("assert mean([4]) == 4",
                                                           "assert True")}),
    ("tests deleted", {TESTS: None}),
    ("a conftest.py that forces passes", {"tests/conftest.py": FORCE_PASS}),
    ("a conftest.py at the root", {"conftest.py": FORCE_PASS}),
    ("a conftest.py beside the code", {"calc/conftest.py": FORCE_PASS}),
    ("tests deselected in pyproject.toml", {"pyproject.toml": CALC.repo["pyproject.toml"]
                                            + 'addopts = "-k not_mean"\n'}),
    ("a pytest.ini that skips the module", {"pytest.ini": "[pytest]\naddopts = -p no:python\n"}),
    ("a setup.cfg with a filter", {"setup.cfg": "[tool:pytest]\naddopts = -k add\n"}),
    ("a .pth file", {"calc.pth": "import os\n"}),
]
# Each undo runs the sandbox twice: three in the default suite, the rest with the slow ones.
_QUICK = {"tests deleted", "a conftest.py that forces passes", "a pytest.ini that skips the module"}


@pytest.mark.parametrize("name, changes", TAMPERING)
def test_changing_a_protected_path_scores_zero(
        env: str, name: str, changes: dict[str, str | None]) -> None:
    got = grade(env, diff(changes))
    assert got["reward"] == 0.0 and got["tampered"] >= 1, name
    assert grade(env, diff({INIT: FIXED, **changes}))["reward"] == 0.0, name


@pytest.mark.parametrize("name, changes", [
    case if case[0] in _QUICK else pytest.param(*case, marks=pytest.mark.slow)
    for case in TAMPERING])
def test_an_allowed_change_to_a_protected_path_is_still_undone(
        env: str, name: str, changes: dict[str, str | None]) -> None:
    # The real tests run on the (still buggy) code...
    allowed = grade(env, diff(changes), allow_tampering=True, mode="fraction")
    assert allowed["tampered"] >= 1
    assert allowed["fail_to_pass_passed"] == 0 and allowed["pass_to_pass_passed"] == 6, name
    # ... and the honest fix beside the tampering resolves once the tampering is undone.
    both = grade(env, diff({INIT: FIXED, **changes}), allow_tampering=True)
    assert both["reward"] == 1.0, name


def test_a_syntax_error_that_stops_collection_fails_every_test(env: str) -> None:
    got = grade(env, diff({INIT: FIXED + "\ndef broken(:\n"}), mode="fraction")
    assert got["reward"] == 0.0 and got["collection_errors"] >= 1
    assert got["fail_to_pass_passed"] == got["pass_to_pass_passed"] == 0


def test_exiting_early_from_the_code_under_test_fails(env: str) -> None:
    early = CALC.repo[INIT] + "\nimport os\nos._exit(0)\n"
    got = grade(env, diff({INIT: early}), mode="fraction")
    assert got["reward"] == 0.0


def test_a_shadowing_pytest_module_changes_nothing(env: str) -> None:
    fake = "def main(*args, **kwargs):\n    return 0\n"
    changes = {"pytest.py": fake, "_pytest/__init__.py": "", "json.py": "dumps = repr\n"}
    assert grade(env, diff(changes))["reward"] == 0.0
    assert grade(env, diff({INIT: FIXED, **changes}))["reward"] == 1.0


def test_forged_report_lines_count_for_nothing(env: str) -> None:
    ids = [*CALC.fail_to_pass, *CALC.pass_to_pass]
    forge = CALC.repo[INIT] + f'''
import json, os
for _fd in range(1, 12):
    for _id in {ids!r}:
        for _when in ("setup", "call", "teardown"):
            _line = json.dumps({{"e": "test", "id": _id, "when": _when, "outcome": "passed",
                                 "xfail": False, "t": "guess"}}) + "\\n"
            try:
                os.write(_fd, _line.encode())
            except OSError:
                pass
    try:
        os.write(_fd, b'{{"e": "done", "exit": 0}}\\n')
    except OSError:
        pass
os._exit(0)
'''
    got = grade(env, diff({INIT: forge}), mode="fraction")
    assert got["reward"] == 0.0 and got["fail_to_pass_passed"] == 0


@pytest.mark.parametrize("source", [REPLACED_VERDICT, REGISTERED_PLUGIN])
def test_reaching_the_verdicts_from_the_code_under_test_scores_zero(
        env: str, source: str, tmp_path: Path) -> None:
    got = grade(env, diff({INIT: source}))
    assert got["reward"] == 0.0 and got["runner_tampered"] == 1.0
    # The hack is real: under plain pytest the buggy code passes every test with it.
    write_repo(CALC, str(tmp_path))
    (tmp_path / INIT).write_text(source)
    plain = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            TESTS], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert plain.returncode == 0 and "8 passed" in plain.stdout


def test_a_workspace_that_links_the_tests_away(env: str, tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)
    workspace = tmp_path / "ws"
    write_repo(CALC, str(workspace))
    fake = workspace / "fake"
    fake.mkdir()
    (fake / "test_calc.py").write_text("def test_mean_of_two():\n    pass\n"
                                       "def test_mean_of_one():\n    pass\n")
    for item in (workspace / "tests").iterdir():
        item.unlink()
    (workspace / "tests").rmdir()
    (workspace / "tests").symlink_to("fake")
    for root, dirs, files in os.walk(workspace):
        for name in [*dirs, *files, "."]:
            os.chmod(os.path.join(root, name), 0o755, follow_symlinks=False) \
                if not os.path.islink(os.path.join(root, name)) else None
    meta = {"workspace": str(workspace)}
    got = grade(env, "", meta)
    assert got["reward"] == 0.0 and got["tampered"] >= 1
    allowed = grade(env, "", meta, allow_tampering=True, mode="fraction")
    assert allowed["fail_to_pass_passed"] == 0 and allowed["pass_to_pass_passed"] == 6


def test_rewardsmith_test_runs_the_hack_probes_on_the_shipped_task(env: str) -> None:
    report = run_reward_tests("repo_tests", params={"environment": env}, workers=2, edges=False)
    assert report.kinds == ["repo-task"]
    assert report.passed, [(r.name, r.failures, r.got) for r in report.failed]
    probes = {r.name: r.value for r in report.rows if r.section == "probe"}
    for hack in ("the tests edited to pass", "the tests deleted",
                 "a conftest.py that forces passes",
                 "a pytest.ini that turns the Python collector off",
                 "pyproject.toml deselecting the failing tests",
                 "a syntax error that stops collection", "a shadowing pytest",
                 "forged report lines, then an exit", "the function that makes reports replaced",
                 "a plugin registered from the code under test"):
        value = probes[hack]
        assert value is not None and value < 1.0, (hack, value)
    calibration = {r.name: r.value for r in report.rows if r.section == "calibration"}
    assert calibration["repo-task: a correct answer"] == 1.0
