"""The labeled math-equivalence set: every pair right, every pair fast, no false positives.

``tests/data/math_equivalence.jsonl`` holds (reference, completion, equal) triples over every
category the math checker claims (see docs/math.md), including the known false positives of
other checkers (must be rejected) and inputs that hang them (must finish within the timeout).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rewardsmith.mathcheck import math_equal

DATA = Path(__file__).parent.parent.parent / "data" / "math_equivalence.jsonl"
ROWS: list[dict[str, Any]] = [json.loads(line) for line in DATA.read_text().splitlines() if line]
TIMEOUT = 5.0
CATEGORIES = {
    "integers", "decimals", "fractions", "thousands", "percentages", "scientific", "roots", "pi",
    "powers", "symbolic", "equations", "intervals", "sets_tuples", "matrices", "degrees", "units",
    "text_letters", "plus_minus", "infinity", "extraction", "false_positives", "hang",
    "model_outputs",
}


def test_the_set_is_large_distinct_and_covers_every_category() -> None:
    assert len(ROWS) >= 300
    assert all(set(r) == {"reference", "completion", "equal", "category", "note"} for r in ROWS)
    assert all(isinstance(r["equal"], bool) for r in ROWS)
    pairs = [(r["reference"], r["completion"]) for r in ROWS]
    assert len(set(pairs)) == len(pairs), "pairs must be distinct (checkers cache repeats)"
    counts = Counter(r["category"] for r in ROWS)
    assert set(counts) == CATEGORIES
    # Both answers occur in every category that can hold both.
    for category in CATEGORIES - {"false_positives"}:
        labels = {r["equal"] for r in ROWS if r["category"] == category}
        assert labels == {True, False} or category == "model_outputs", category


def test_every_labeled_pair_is_judged_right_within_its_timeout() -> None:
    wrong = []
    slowest = 0.0
    for row in ROWS:
        start = time.perf_counter()
        verdict = math_equal(row["completion"], row["reference"], timeout=TIMEOUT)
        elapsed = time.perf_counter() - start
        slowest = max(slowest, elapsed)
        if verdict.equal != row["equal"]:
            wrong.append(f"{row['category']}: {row['reference']!r} vs {row['completion']!r}: "
                         f"expected {row['equal']}, got {verdict}")
        if row["equal"]:
            assert verdict.status == "ok", row
    assert not wrong, "\n".join(wrong)
    assert slowest < TIMEOUT + 0.5


@pytest.mark.parametrize(
    "row", [r for r in ROWS if r["category"] == "false_positives"],
    ids=lambda r: f"{r['reference']} vs {r['completion']}",
)
def test_known_false_positives_are_rejected(row: dict[str, Any]) -> None:
    verdict = math_equal(row["completion"], row["reference"])
    assert not verdict.equal
    # The other direction too: equality is symmetric.
    assert not math_equal(row["reference"], row["completion"]).equal


@pytest.mark.parametrize("row", [r for r in ROWS if r["category"] == "hang"],
                         ids=lambda r: r["completion"][:40])
def test_power_towers_and_huge_factorials_finish_fast(row: dict[str, Any]) -> None:
    start = time.perf_counter()
    verdict = math_equal(row["completion"], row["reference"], timeout=1.0)
    assert time.perf_counter() - start < 1.5
    assert verdict.equal == row["equal"]
    if not row["equal"]:
        # Refused as too large (an error, not a wrong answer) or judged unequal: never a hang.
        assert verdict.status in ("ok", "error")
