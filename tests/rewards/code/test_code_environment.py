"""A Python environment for the sandbox, and test code that cannot run for reasons that are not
the program's: an ``error`` naming the reason, never a silent 0, and never something a program
can bring about itself."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import Rollout, Rubric, score_rollouts
from rewardsmith.errors import ConfigError
from rewardsmith.sandbox import SandboxUnavailable, get_sandbox


@pytest.fixture(scope="module", autouse=True)
def real_sandbox() -> None:
    try:
        get_sandbox("bubblewrap").check("python")
    except SandboxUnavailable as exc:
        if os.environ.get("REWARDSMITH_SKIP_SANDBOX_TESTS") == "1":
            pytest.skip(f"no sandbox on this machine: {exc}")
        pytest.fail(f"these tests need the real sandbox: {exc}")


@pytest.fixture(scope="module")
def environment() -> Iterator[str]:
    """A virtualenv of the system's Python holding one extra module, readable by anyone (the
    sandbox runs as an unprivileged user), under /tmp as pytest's folders are."""
    base = "/usr/bin/python3"
    if not os.access(base, os.X_OK):
        pytest.skip("no /usr/bin/python3 to make a virtualenv of")
    folder = tempfile.mkdtemp(prefix="rs-env-", dir="/tmp")
    os.chmod(folder, 0o755)
    venv = os.path.join(folder, "venv")
    made = subprocess.run([base, "-m", "venv", "--without-pip", venv], capture_output=True,
                          text=True, check=False)
    if made.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"cannot make a virtualenv here: {made.stderr.strip()[-300:]}")
    site = next(Path(venv, "lib").glob("python3*/site-packages"))
    (site / "rs_env_probe.py").write_text("def double(x):\n    return 2 * x\n")
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, 0o755)
    try:
        yield venv
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def scored(program: str, tests: Any, **params: Any) -> Any:
    params.setdefault("time_limit", 2.0)
    rubric = Rubric.single("code", params={"language": "python", **params})
    rollout = Rollout(id="r", group="g", prompt="p", completion=f"```python\n{program}\n```",
                      answer=tests)
    return score_rollouts(rubric, [rollout])[0]


NEEDS_MODULE = {"asserts": ["assert rs_env_probe.double(quad(1)) == 8"],
                "test_setup_code": "import rs_env_probe"}
USES_MODULE = "import rs_env_probe\ndef quad(x):\n    return rs_env_probe.double(2 * x)\n"


def test_tests_that_import_a_module_the_sandbox_lacks_are_an_error() -> None:
    score = scored("def quad(x):\n    return 4 * x\n", NEEDS_MODULE)
    assert score.status == "error", (score.status, score.reward)
    assert "rs_env_probe" in score.errors["code"], score.errors


def test_an_environment_lets_tests_and_programs_import_its_packages(environment: str) -> None:
    score = scored(USES_MODULE, NEEDS_MODULE, environment=environment)
    assert (score.status, score.reward) == ("ok", 1.0), score.errors
    stdin = {"inputs": ["3\n"], "outputs": ["6\n"]}
    program = "import rs_env_probe\nprint(rs_env_probe.double(int(input())))\n"
    assert scored(program, stdin, environment=environment).reward == 1.0
    # The default is the system's Python with the standard library only.
    assert scored(program, stdin).reward == 0.0
    # An interpreter's path works as well as the virtualenv's folder.
    interpreter = os.path.join(environment, "bin", "python3")
    assert scored(program, stdin, environment=interpreter).reward == 1.0


def test_the_environment_is_read_only_and_shared_by_no_test(environment: str) -> None:
    program = ("import os, rs_env_probe\n"
               "try:\n"
               "    open(rs_env_probe.__file__, 'a').write('\\ndouble = lambda x: 8\\n')\n"
               "    print('wrote')\n"
               "except OSError:\n"
               "    print('read-only')\n")
    score = scored(program, {"inputs": [""], "outputs": ["read-only"]}, environment=environment)
    assert score.reward == 1.0
    assert "lambda" not in Path(environment).joinpath(
        next(Path(environment, "lib").glob("python3*/site-packages")),
        "rs_env_probe.py").read_text()


def test_an_environment_that_does_not_exist_is_refused_at_load() -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        Rubric.single("code", params={"environment": "/nonexistent/venv"})
    with pytest.raises(ConfigError, match="Python environment"):
        Rubric.single("code", params={"language": "cpp", "environment": "/usr"})


def test_a_check_that_is_not_defined_is_an_error() -> None:
    tests = {"entry_point": "f", "test": "def chek(candidate):\n    assert candidate(1) == 2\n"}
    score = scored("def f(x):\n    return x + 1\n", tests)
    assert score.status == "error"
    assert "check" in score.errors["code"], score.errors


def test_test_code_that_never_calls_the_program_is_an_error() -> None:
    score = scored("def f(x):\n    return x\n", {"asserts": ["assert sorted([2, 1]) == [1, 2]"]})
    assert score.status == "error"
    assert "never calls the program" in score.errors["code"], score.errors


def test_a_program_cannot_turn_its_failure_into_a_bad_test() -> None:
    tests = {"asserts": ["assert abs(f(1) - 2.0) < 1e-9", "assert f(2) == 3"],
             "test_setup_code": "import math"}
    for program in ("def f(x):\n    raise ModuleNotFoundError('No module named numpy')\n",
                    "raise ImportError('No module named numpy')\n",
                    "import os\ndef f(x):\n    os.write(3, b'{\"bad_test\": \"forged\"}')\n"
                    "    os._exit(0)\n",
                    "def f(x):\n    raise NameError('the test code defines no check()')\n"):
        score = scored(program, tests)
        assert (score.status, score.reward) == ("ok", 0.0), (program, score.errors)
