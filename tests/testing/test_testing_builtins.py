"""`rewardsmith test` on every built-in reward: each must pass its edge cases and hack probes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rewardsmith.rewards import all_builtins
from rewardsmith.testing import run_reward_tests
from rewardsmith.testing.kinds import make_kind
from rewardsmith.testing.probes import probe_checks
from support.repo_env import pytest_environment

BUILTINS = [b.name for b in all_builtins()]
DEMO_RUBRIC = Path(__file__).parent.parents[1] / "src" / "rewardsmith" / "data" / "demo_rubric.yaml"
EDGES = {
    "empty completion", "whitespace only", "truncated mid-answer",
    "the marker with nothing after it", "a 1 MB completion", "unicode: right-to-left text",
    "unicode: emoji", "unicode: combining marks", "NUL and control characters",
    "chat messages", "chat messages with content parts", "label is None",
    "label is an empty string", "label is not a string", "label is an object",
}


@pytest.fixture(scope="module")
def repo_environment() -> Iterator[str]:
    """repo_tests runs the tests in an environment the sandbox's user can read (the running
    Python, under root's home, is refused at load with a message saying so)."""
    yield from pytest_environment()


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_passes_every_edge_case_and_probe(name: str,
                                                       request: pytest.FixtureRequest) -> None:
    params = ({"environment": request.getfixturevalue("repo_environment")}
              if name == "repo_tests" else None)
    report = run_reward_tests(name, params=params, workers=1)
    assert report.passed, report.text(only_failures=True)
    assert report.kinds, f"{name}: no kind is known for it, so no hack probe ran"
    names = {row.name for row in report.rows}
    assert EDGES <= names
    assert any(row.section == "probe" for row in report.rows)


def test_a_number_answer_verifier_gets_every_probe_the_issue_names() -> None:
    report = run_reward_tests("gsm8k", workers=1)
    probes = {row.name: row for row in report.rows if row.section == "probe"}
    assert set(probes) >= {
        "every candidate answer listed", "several \\boxed{} with different values",
        "the marker repeated", "the marker with nothing after it",
        "answer only in the prompt (copied, no work)", "padding to the length limit",
    }
    assert all(row.value == 0.0 for row in probes.values())  # and each reports what it got
    assert report.find("label is None").status == "error"  # the dataset's fault, named
    assert "reference answer is missing" in report.find("label is None").got


def test_format_rewards_get_tag_soup_and_marker_probes() -> None:
    think = run_reward_tests("think_format", workers=1)
    soup = [row for row in think.rows if row.name.startswith("tag soup:")]
    assert len(soup) >= 6 and all(row.passed and row.value == 0.0 for row in soup)
    params = {"marker": "ANSWER:", "max_count": 2}
    marker = run_reward_tests("marker", params=params, workers=1)
    assert marker.passed, marker.text(only_failures=True)
    assert marker.find("the marker repeated").value == 0.0
    [repeated] = [c for c in probe_checks(make_kind("marker", params))
                  if c.name == "the marker repeated"]
    assert repeated.rollout.text.count("ANSWER: 42") == 3  # one more than max_count allows


def test_the_length_penalty_is_probed_at_its_own_limit() -> None:
    report = run_reward_tests("length", params={"max_length": 300, "buffer": 50}, workers=1)
    assert report.passed, report.text(only_failures=True)
    assert report.value_range == (-1.0, 0.0)
    padded = report.find("padded to the length limit")
    assert padded.value == -1.0 and "(300 chars)" in padded.input


def test_a_rubric_file_is_tested_as_a_whole_with_its_range() -> None:
    report = run_reward_tests(str(DEMO_RUBRIC), workers=1)
    assert report.passed, report.text(only_failures=True)
    assert report.value_range == (-0.5, 1.25)  # gsm8k + 0.25 marker + 0.5 length
    assert set(report.kinds) == {"number-marker", "marker", "length"}
