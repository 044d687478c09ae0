"""``rewardsmith test`` on code rewards: calibration, edge cases and cheat probes pass."""

from __future__ import annotations

import shutil

import pytest

from rewardsmith.sandbox import SandboxUnavailable, get_sandbox
from rewardsmith.testing import run_reward_tests
from rewardsmith.testing.code_kinds import code_kind, code_probes


@pytest.fixture(scope="module", autouse=True)
def real_sandbox() -> None:
    try:
        get_sandbox("bubblewrap").check("python")
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox on this machine: {exc}")


def test_python_code_reward_passes_every_check_and_probe() -> None:
    report = run_reward_tests("code", workers=2)
    assert report.kinds == ["code"]
    assert report.passed, [(r.name, r.failures, r.got) for r in report.failed]
    probes = {r.name for r in report.rows if r.section == "probe"}
    for cheat in ("exits before the asserts run", "an object equal to everything, against calls",
                  "builtins and assert monkeypatched", "kill every process, then a guess",
                  "the expected outputs looked up in the files it can see",
                  "a daemon that answers after the test",
                  "builtins the asserts use shadowed", "builtins a HumanEval check uses shadowed",
                  "a module attribute the asserts use patched",
                  "the expected value looked up on the stack and heap",
                  "an earlier test's input kept in /tmp",
                  "the work folder broken after the first test", "a forged value channel",
                  "a number the host cannot compare",
                  "memory held outside the heap past the limit"):
        assert f"probe: {cheat}" in probes or cheat in probes, sorted(probes)
    calibration = {r.name: r.value for r in report.rows if r.section == "calibration"}
    assert calibration["code: a correct answer"] == 1.0
    assert calibration["code: a wrong answer"] is not None
    assert calibration["code: a wrong answer"] < 1.0


def test_each_language_has_its_own_probes() -> None:
    for language in ("python", "cpp", "javascript"):
        kind = code_kind({"language": language})
        assert kind.language == language and f"```{language}" in kind.correct
        names = [name for name, *_ in code_probes(kind)]
        assert "exits before its output" in names and len(names) == len(set(names))
        assert any("past the limit" in name for name in names), names
    cpp = [name for name, *_ in code_probes(code_kind({"language": "cpp"}))]
    assert "a compile that never ends" in cpp
    assert code_kind({"language": "fortran"}).language == "python"


def test_a_memory_probe_scores_the_same_however_it_fails() -> None:
    # V8 aborts under a tight RLIMIT_DATA (128 MB here) and catches the failed allocation
    # under a looser one: both are the probe failing, and must score alike, or a second
    # scoring that fails the other way reads as non-determinism.
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    from rewardsmith.rewards.code import code

    probe = dict((name, program) for name, program, *_ in
                 code_probes(code_kind({"language": "javascript"})))
    completion = probe["buffers held outside the heap past the limit"]
    tests = code_kind({"language": "javascript"}).label
    aborted = code(completion, tests, language="javascript", memory_limit=128)
    caught = code(completion, tests, language="javascript", memory_limit=256)
    assert aborted["runtime_errors"] == 3.0, aborted  # the abort did happen
    assert aborted["reward"] == caught["reward"] == 0.0, (aborted, caught)


@pytest.mark.slow
@pytest.mark.parametrize("language", ["cpp", "javascript"])
def test_other_languages_pass_every_check(language: str) -> None:
    if shutil.which({"cpp": "g++", "javascript": "node"}[language]) is None:
        pytest.skip(f"no toolchain for {language}")
    report = run_reward_tests("code", params={"language": language}, workers=2)
    assert report.passed, [(r.name, r.failures, r.got) for r in report.failed]
