"""Repository tests for an agent's patch (SWE-style): the task's tests run in the sandbox.

The shipped ``calc`` task: ``mean()`` divides by ``len - 1``; two tests fail on it
(``fail_to_pass``) and six pass (``pass_to_pass``). Six completions, each a unified diff as an
agent would submit it: the fix, a half fix, the fix beside a broken file, the tests edited to
pass, a ``conftest.py`` that turns every report into a pass, and prose with no diff. Only the
fix resolves the task; the tampering earns nothing, and a completion with no diff is a 0 with
``patch_failed``, not an error.

    python examples/agent_repo_tests.py

Needs bubblewrap (``make test`` installs it). The tests run in a Python environment with
pytest, mounted read-only in the sandbox; this script makes one under /tmp (a virtualenv of
the system's python3 holding a copy of this interpreter's pytest), since the sandbox's user
may not read the one running it.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

from rewardsmith import Rollout, Rubric, score_rollouts
from rewardsmith.rewards.agents.repo_tasks import diff_of, shipped_tasks, task_answer, write_repo
from rewardsmith.sandbox.pytest_env import make_pytest_environment

TASK = shipped_tasks()["calc"]
INIT = "calc/__init__.py"
TESTS = "tests/test_calc.py"
FIXED = TASK.repo[INIT].replace("(len(values) - 1)", "len(values)")
FORCE_PASS = ("import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
              "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
              "    outcome.get_result().outcome = 'passed'\n")

COMPLETIONS = {
    "fixed": "The mean divided by len - 1.\n\n```diff\n" + diff_of(TASK, {INIT: FIXED}) + "```\n",
    "half-fix": TASK.wrong_patches[0].patch,
    "broken": diff_of(TASK, {INIT: FIXED + "\ndef oops(:\n"}),
    "edits-tests": diff_of(TASK, {TESTS: TASK.repo[TESTS].replace(
        "assert mean([1, 3]) == 2", "assert True").replace("assert mean([4]) == 4",
                                                           "assert True")}),
    "conftest": diff_of(TASK, {"tests/conftest.py": FORCE_PASS}),
    "no-diff": "I fixed mean() so it divides by the number of values.",
}
# name -> (reward, fail_to_pass passed, pass_to_pass passed, tampered, patch_failed)
EXPECTED = {"fixed": (1.0, 2, 6, 0, 0), "half-fix": (0.0, 1, 6, 0, 0),
            "broken": (0.0, 0, 0, 0, 0), "edits-tests": (0.0, 0, 0, 1, 0),
            "conftest": (0.0, 0, 0, 1, 0), "no-diff": (0.0, 0, 0, 0, 1)}


def main() -> int:
    scratch = tempfile.mkdtemp(prefix="rewardsmith-repo-example-", dir="/tmp")
    os.chmod(scratch, 0o755)  # the sandbox's user reads the environment and the repository
    try:
        environment = make_pytest_environment(os.path.join(scratch, "env"))
        repo = write_repo(TASK, os.path.join(scratch, "calc"))
        for root, dirs, _ in os.walk(repo):
            for name in dirs:
                os.chmod(os.path.join(root, name), 0o755)
        rubric = Rubric.single("repo_tests", params={"environment": environment})
        rollouts = [Rollout(id=name, group="calc", prompt=TASK.description, completion=text,
                            answer=task_answer(TASK, repo))
                    for name, text in COMPLETIONS.items()]
        scores = score_rollouts(rubric, rollouts, workers=2)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    wrong = []
    for score in scores:
        m = score.metrics
        got = (score.reward, *(int(m[f"repo_tests.{key}"]) for key in (
            "fail_to_pass_passed", "pass_to_pass_passed", "tampered", "patch_failed")))
        print(f"{score.id:<12} reward {score.reward:.2f}  status {score.status.value}  "
              f"fail_to_pass {got[1]}/2  pass_to_pass {got[2]}/6  tampered {got[3]}  "
              f"patch_failed {got[4]}")
        if got != EXPECTED[score.id] or score.status.value != "ok":
            wrong.append(score.id)
    if wrong:
        print(f"unexpected results: {', '.join(wrong)}")
        return 1
    print("only the fix resolved the task; edited tests and a forcing conftest.py earned nothing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
