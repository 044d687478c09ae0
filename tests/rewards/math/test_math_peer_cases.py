"""The math checker against other projects' grader test suites.

``tests/data/math_peer_cases.jsonl`` holds the (reference, completion, verdict) cases asserted by
the public test suites of other math graders (Math-Verify, hendrycks/math, NeMo-Skills, verl,
Qwen2.5-Math); each names its source: repository, file and test. The checker must agree with
every one of them except the few whose verdict is a policy we do not share, each marked by
a ``policy`` field (the rule we follow instead) and explained, with the case, in docs/math.md.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from rewardsmith.mathcheck import math_equal

ROOT = Path(__file__).resolve().parent.parent.parent.parent
DATA = ROOT / "tests" / "data" / "math_peer_cases.jsonl"
DOCS = ROOT / "docs" / "math.md"
ROWS: list[dict[str, Any]] = [json.loads(line) for line in DATA.read_text().splitlines() if line]
TIMEOUT = 5.0
MATH_VERIFY = "huggingface/Math-Verify"
_SOURCE = re.compile(r"^[\w.-]+/[\w.-]+ [\w./-]+\.py::\S.*$")

# Cases whose asserted verdict is a policy we decided against carry a ``policy`` field (the
# rule we follow instead); docs/math.md explains each one, with the case.
POLICY = {r["source"]: r["policy"] for r in ROWS if "policy" in r}


def _repo(row: dict[str, Any]) -> str:
    return str(row["source"]).split(" ", 1)[0]


@pytest.fixture(scope="module")
def verdicts() -> list[tuple[dict[str, Any], Any, float]]:
    out = []
    for row in ROWS:
        start = time.perf_counter()
        verdict = math_equal(row["completion"], row["reference"], timeout=TIMEOUT)
        out.append((row, verdict, time.perf_counter() - start))
    return out


def test_the_set_names_every_source_and_holds_distinct_pairs() -> None:
    assert len(ROWS) >= 300
    for row in ROWS:
        assert set(row) <= {"reference", "completion", "equal", "source", "options", "policy"}, row
        assert isinstance(row["equal"], bool) and isinstance(row["completion"], str), row
        assert _SOURCE.match(row["source"]), row["source"]
    pairs = [(r["reference"], r["completion"]) for r in ROWS]
    assert len(set(pairs)) == len(pairs), "pairs must be distinct (checkers cache repeats)"
    repos = Counter(_repo(r) for r in ROWS)
    assert len(repos) >= 5 and repos[MATH_VERIFY] >= 250, repos
    assert {r["equal"] for r in ROWS} == {True, False}
    assert 0 < len(POLICY) <= 10, "a policy difference is the exception, not the rule"


def test_every_policy_difference_is_documented_and_still_differs(
        verdicts: list[tuple[dict[str, Any], Any, float]]) -> None:
    docs = DOCS.read_text()
    sources = {r["source"] for r in ROWS}
    for source in POLICY:
        assert source in sources, f"no such case: {source}"
        assert source.split(" ", 1)[1] in docs, f"docs/math.md does not explain {source}"
    stale = [row["source"] for row, verdict, _ in verdicts
             if row["source"] in POLICY and verdict.equal == row["equal"]]
    assert not stale, f"these now agree; drop them from POLICY and the docs: {stale}"


def test_agrees_with_every_case_but_the_documented_policies(
        verdicts: list[tuple[dict[str, Any], Any, float]]) -> None:
    wrong = [f"{row['source']}: {row['reference'][:60]!r} vs {row['completion'][:60]!r}: "
             f"expected {row['equal']}, got {verdict}"
             for row, verdict, _ in verdicts
             if verdict.equal != row["equal"] and row["source"] not in POLICY]
    assert not wrong, "\n".join(wrong)


def test_no_false_positive_outside_the_documented_policies(
        verdicts: list[tuple[dict[str, Any], Any, float]]) -> None:
    accepted = [row["source"] for row, verdict, _ in verdicts
                if verdict.equal and not row["equal"] and row["source"] not in POLICY]
    assert not accepted


def test_agreement_per_suite_and_time(verdicts: list[tuple[dict[str, Any], Any, float]]) -> None:
    marks: dict[str, list[bool]] = defaultdict(list)
    for row, verdict, _ in verdicts:
        marks[_repo(row)].append(verdict.equal == row["equal"])
    mv = marks[MATH_VERIFY]
    assert sum(mv) / len(mv) >= 0.97
    # A right answer is never an error or a timeout; no call runs past its timeout.
    assert all(verdict.status == "ok" for row, verdict, _ in verdicts if row["equal"])
    assert max(elapsed for _, _, elapsed in verdicts) < TIMEOUT + 0.5
