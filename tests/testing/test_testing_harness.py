"""The harness on deliberately broken rewards: each flaw must be caught and named, with its input.

The rewards live in ``testing_broken_rewards.py`` and are loaded by path, as a user's file is,
so they run in worker processes with hard timeouts exactly as in a run.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rewardsmith.errors import ConfigError, LoadError, RubricError
from rewardsmith.testing import TestReport, check_reward, run_reward_tests, write_starter_cases

BROKEN = Path(__file__).parent.parent / "testing_broken_rewards.py"


def spec(name: str) -> str:
    return f"{BROKEN}:{name}"


def failing(report: TestReport) -> dict[str, list[str]]:
    return {row.name: row.failures for row in report.failed}


@pytest.mark.parametrize("name, code, where", [
    ("crashes_on_empty", "crash", "empty completion"),
    ("returns_nan", "non-finite", "empty completion"),
    ("credits_every_candidate", "full-credit", "every candidate answer listed"),
    ("credits_every_candidate", "full-credit", "several \\boxed{} with different values"),
])
def test_a_broken_reward_is_caught_and_named_at_its_input(name: str, code: str,
                                                          where: str) -> None:
    report = run_reward_tests(spec(name), workers=1)
    assert not report.passed and report.exit_code == 1
    assert code in failing(report)[where], report.text(only_failures=True)
    assert "number" in report.kinds  # detected, so the number probes ran
    assert code in report.summary() and code in report.text(only_failures=True)


def test_a_crash_shows_the_exception_and_the_input() -> None:
    row = run_reward_tests(spec("crashes_on_empty"), workers=1).find("whitespace only")
    assert row.status == "error" and "IndexError" in row.got
    assert row.input.startswith("' \\n\\t ")  # whitespace made visible


def test_a_non_deterministic_reward_is_caught_on_the_second_call() -> None:
    report = run_reward_tests(spec("non_deterministic"), workers=1)
    row = report.find("empty completion")
    assert "non-deterministic" in row.failures and "on a second call it got" in row.detail


def test_an_async_reward_with_shared_state_differs_when_run_concurrently() -> None:
    report = run_reward_tests(spec("racy_async"))
    flagged = [row for row in report.failed if "non-deterministic" in row.failures]
    assert flagged and all("when run concurrently" in row.detail for row in flagged)


def test_a_reward_that_hangs_on_empty_text_is_stopped_by_the_timeout() -> None:
    started = time.monotonic()
    report = run_reward_tests(spec("loops_forever"), timeout=1, workers=2)
    assert time.monotonic() - started < 20
    hung = {name for name, codes in failing(report).items() if "hang" in codes}
    assert hung == {"empty completion", "whitespace only"}
    assert "timed out after 1 s" in report.find("empty completion").got


def test_a_reward_that_always_hangs_stops_after_the_smoke_test() -> None:
    report = run_reward_tests(spec("never_returns"), timeout=0.5, workers=1)
    assert [row.failures for row in report.rows] == [["hang"]]
    assert any("stopped after the smoke test" in note for note in report.notes)


def test_out_of_range_values_against_the_given_range_or_the_cases_span(tmp_path: Path) -> None:
    report = run_reward_tests(spec("out_of_range"), value_range=(0.0, 1.0), workers=1)
    assert "out-of-range" in report.find("number: a correct answer").failures
    cases = tmp_path / "c.jsonl"
    cases.write_text('{"completion": "no", "answer": "1", "expected": 0}\n'
                     '{"completion": "1", "answer": "1", "expected": 1}\n', encoding="utf-8")
    from_cases = run_reward_tests(spec("out_of_range"), cases=cases, workers=1)
    assert from_cases.value_range == (0.0, 1.0)
    row = from_cases.find("line 2")
    assert row.failures == ["out-of-range"] and row.got == "10"


def test_sound_rewards_pass_with_the_starter_cases(tmp_path: Path) -> None:
    cases = write_starter_cases(tmp_path / "starter.cases.jsonl")
    for name in ("last_number", "async_last_number"):
        report = check_reward(spec(name), cases=cases)
        assert sum(row.section == "case" for row in report.rows) == 10
        assert report.value_range == (0.0, 1.0)  # from the cases


def test_a_case_that_expects_another_value_fails_as_unexpected(tmp_path: Path) -> None:
    cases = tmp_path / "c.jsonl"
    cases.write_text('{"completion": "so 41", "answer": "42", "expected": 1, "note": "hand"}\n',
                     encoding="utf-8")
    report = run_reward_tests(spec("last_number"), cases=cases, edges=False, probes=False,
                              workers=1)
    row = report.find("line 1: hand")
    assert row.failures == ["unexpected"] and row.expected == "1" and row.got == "0"


def test_check_reward_raises_with_the_failed_checks_in_its_message() -> None:
    with pytest.raises(AssertionError) as caught:
        check_reward(spec("crashes_on_empty"), workers=1)
    message = str(caught.value)
    assert "FAIL" in message and "empty completion" in message and "IndexError" in message
    assert "PASS" not in message.split("\n", 1)[1]  # only the failed checks are listed


def test_load_errors_are_raised_as_a_run_would_raise_them() -> None:
    with pytest.raises(LoadError, match="unknown built-in reward 'gsm8kk'"):
        run_reward_tests("gsm8kk")
    with pytest.raises(LoadError, match="has no attribute 'nope'"):
        run_reward_tests(spec("nope"))
    with pytest.raises(RubricError, match="takes no parameter"):
        run_reward_tests("number", params={"tolerance": 0.1})
    with pytest.raises(ConfigError, match="unknown kind"):
        run_reward_tests("number", kinds=["numbers"])


def test_probes_and_edges_can_be_switched_off_or_pinned_to_a_kind() -> None:
    report = run_reward_tests("number", kinds=["none"], edges=False, workers=1)
    assert report.rows == [] and report.passed
    pinned = run_reward_tests(spec("last_number"), kinds=["number-marker"], workers=1)
    # A plain last-number reward does not need the marker: '####' with nothing after it, after
    # work that reached 42, still gets full credit from it.
    assert "full-credit" in failing(pinned)["the marker with nothing after it"]


def test_an_error_on_a_label_edge_case_is_excused_only_when_it_is_the_labels_fault() -> None:
    sound = run_reward_tests(spec("last_number"), workers=1)
    assert sound.find("label is None").status == "error"
    assert sound.find("label is None").passed  # a good label scores: the label is to blame
    broken = run_reward_tests(spec("returns_text"), workers=1)
    assert broken.find("label is None").failures == ["crash"]  # it fails on any label
    assert "reward returned str" in broken.find("label is None").got
