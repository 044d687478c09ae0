"""Every script in examples/ runs as a user would run it: a subprocess, from another folder,
talking to nothing beyond 127.0.0.1. Each script checks its own results and exits 1 when they
are wrong, so a script that rots fails here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = ROOT / "examples"

# script -> lines its output must contain
EXPECTED = {
    "gsm8k_trl.py": ["reward_funcs: ['correct', 'format'] reward_weights: [1.0, 0.2]",
                     "TRL's weighted sum equals the rubric's reward for all 8 completions"],
    "math_verl.py": ["7 samples: the per-sample and batch forms agree"],
    "code_sandbox.py": ["loops       reward 0.00  status ok  passed 0/3  timeouts 1  skipped 2",
                        "the host's port was never reached; the key never entered the sandbox"],
    "judge_local.py": ["judge calls: first run 6, second run 0 (replayed)"],
    "agent_repo_tests.py": ["fixed        reward 1.00  status ok  fail_to_pass 2/2  pass_to_pass "
                            "6/6  tampered 0  patch_failed 0",
                            "edited tests and a forcing conftest.py earned nothing"],
    "harbor_verifier.py": ["linked         reward 0.20  status ok  passed 1/5  links removed 1",
                           "planted reward files and a link into the log folder earned nothing"],
    "flyte_reward.py": ["judge calls: 6 for 6 trajectories"],
}


def _run(script: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    env.pop("REWARDSMITH_RUBRIC", None)
    return subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=180)


# Scripts tested in a file of their own: a real GRPO run needs the train extra (slow).
TESTED_ELSEWHERE = {"grpo_tiny.py": "tests/integrations/test_grpo_tiny.py",
                    "grpo_tiny_helpers.py": "tests/integrations/test_grpo_tiny.py"}


def test_every_example_is_tested() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted([*EXPECTED, *TESTED_ELSEWHERE])
    for test_file in TESTED_ELSEWHERE.values():
        assert (ROOT / test_file).is_file(), test_file
    for page in (EXAMPLES / "README.md", ROOT / "docs" / "examples.md"):
        listed = page.read_text(encoding="utf-8")
        for script in [*EXPECTED, *TESTED_ELSEWHERE]:
            assert f"`{script}`" in listed, f"{page.relative_to(ROOT)} does not list {script}"


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_example_runs_and_checks_itself(script: str, tmp_path: Path) -> None:
    if script in ("code_sandbox.py", "harbor_verifier.py", "agent_repo_tests.py") and \
            os.environ.get("REWARDSMITH_SKIP_SANDBOX_TESTS") == "1":
        pytest.skip("REWARDSMITH_SKIP_SANDBOX_TESTS=1: no sandbox on this machine")
    if script == "flyte_reward.py":
        pytest.importorskip("flyte")
    result = _run(script, tmp_path)
    assert result.returncode == 0, f"{script} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    for line in EXPECTED[script]:
        assert line in result.stdout, f"{script}: {line!r} not in its output:\n{result.stdout}"
    assert list(tmp_path.iterdir()) == [], f"{script} left files in the working directory"


def test_the_trl_example_scales_its_batch(tmp_path: Path) -> None:
    result = _run("gsm8k_trl.py", tmp_path, "--prompts", "3")
    assert result.returncode == 0, result.stderr
    assert "for all 12 completions" in result.stdout
