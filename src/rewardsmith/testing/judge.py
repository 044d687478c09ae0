"""Deciding pass or fail for one check from its two scores.

The rules every check has: no crash (``error`` status, unless the check accepts one), no hang
(``timeout``), a finite value, inside the declared range, and the same result on the second call.
Then the check's own rule: its case's expectation, no full credit, equal to its plain-text twin,
or above the wrong answer of its calibration pair.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..types import Score, Status
from .checks import Check
from .report import RowResult, preview

__all__ = ["Judgement", "judge", "describe_score"]

_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Judgement:
    """What judging needs beyond one check: other checks' first scores, each kind's full
    credit, the threshold for answer-free edge cases, and the declared range."""

    first: dict[str, Score]
    full_credit: dict[str, float | None]
    edge_threshold: float | None
    value_range: tuple[float, float] | None
    concurrent: bool = False

    def threshold(self, kind: str | None) -> float | None:
        return self.edge_threshold if kind is None else self.full_credit.get(kind)


def _message(score: Score) -> str:
    return "; ".join(f"{name}: {text}" for name, text in score.errors.items()) or "(no message)"


def describe_score(score: Score) -> str:
    """What a reward returned, in a few words: a value, masked, or the error."""
    if score.status is Status.OK:
        return "-" if score.reward is None else f"{score.reward:.6g}"
    if score.status is Status.MASKED:
        return "masked (abstained)"
    text = _message(score)
    if len(text) > 300:
        text = text[:300] + "…"
    return f"{score.status.value}: {text}"


def _same(a: Score, b: Score) -> bool:
    if a.status is not b.status:
        return False
    if a.reward is None or b.reward is None:
        return a.reward is b.reward
    return a.reward == b.reward or (math.isnan(a.reward) and math.isnan(b.reward))


def _expected(check: Check, context: Judgement) -> str:
    if check.expect is not None:
        return check.expect.describe()
    if check.no_full_credit:
        threshold = context.threshold(check.kind)
        if threshold is not None:
            below = f"below {threshold:.6g} (full credit)"
            return f"an error, or a value {below}" if check.allow_error else below
    if check.calibrates is not None:
        wrong = context.first.get(check.calibrates)
        if wrong is not None and wrong.status is Status.OK and wrong.reward is not None:
            return f"above {wrong.reward:.6g} (the wrong answer)"
    return check.rule or "any value"


def judge(check: Check, first: Score, second: Score | None, context: Judgement) -> RowResult:
    """The row for ``check``: its input, what was expected, what it got, and any failures."""
    failures: list[str] = []
    details: list[str] = []
    status, value = first.status, first.reward
    errors_expected = check.allow_error or (check.expect is not None
                                            and check.expect.kind == "error")
    if check.allow_error and check.blame is not None:
        good_label = context.first.get(check.blame)
        if good_label is not None and good_label.status is not Status.OK:
            errors_expected = False  # it fails with a good label too: not the label's fault
    if status is Status.TIMEOUT:
        failures.append("hang")
    elif status is Status.ERROR:
        if "non-finite" in _message(first):
            failures.append("non-finite")
        elif not errors_expected:
            failures.append("crash")
    ok_value = value if status is Status.OK else None
    if ok_value is not None:
        if not math.isfinite(ok_value):
            failures.append("non-finite")
            ok_value = None
        elif context.value_range is not None and not (
                context.value_range[0] - _TOLERANCE <= ok_value
                <= context.value_range[1] + _TOLERANCE):
            low, high = context.value_range
            failures.append("out-of-range")
            details.append(f"the range is [{low:g}, {high:g}]")
    if second is not None and not _same(first, second):
        failures.append("non-deterministic")
        how = "when run concurrently" if context.concurrent else "on a second call"
        details.append(f"{how} it got {describe_score(second)}")
    if check.expect is not None and not failures and not check.expect.matches(status, value):
        failures.append("unexpected")
    if check.no_full_credit and ok_value is not None:
        threshold = context.threshold(check.kind)
        if threshold is not None and ok_value >= threshold - _TOLERANCE:
            failures.append("full-credit")
    if check.same_as is not None:
        twin = context.first.get(check.same_as)
        if twin is not None and not _same(first, twin):
            failures.append("differs-from-text")
            details.append(f"the same text as a string got {describe_score(twin)}")
    if check.calibrates is not None:
        wrong = context.first.get(check.calibrates)
        wrong_value = None if wrong is None or wrong.status is not Status.OK else wrong.reward
        if ok_value is not None and wrong_value is not None and not ok_value > wrong_value:
            failures.append("not-above-wrong")
    return RowResult(
        section=check.section,
        name=check.name,
        input=preview(check.rollout),
        expected=_expected(check, context),
        got=describe_score(first),
        status=status.value,
        value=_finite(value),
        failures=list(dict.fromkeys(failures)),
        detail="; ".join(details),
    )


def _finite(value: Any) -> float | None:
    if isinstance(value, float) and math.isfinite(value):
        return value
    return None
