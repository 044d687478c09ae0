"""What one test input must satisfy: an ``Expectation`` (for hand-labeled cases) and a ``Check``.

Every check, whatever its section, must also: not crash, not hang, return a finite value inside
the declared range, and return the same result when called again on the same input.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..types import Rollout, Status

__all__ = ["Check", "Expectation", "Section", "make_rollout"]

Section = Literal["calibration", "case", "edge", "probe"]
ExpectationKind = Literal["value", "range", "error", "masked", "any"]

_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Expectation:
    """What a hand-labeled case expects: a value, a range, an error, an abstention, or anything."""

    kind: ExpectationKind
    low: float | None = None
    high: float | None = None

    def matches(self, status: Status, value: float | None) -> bool:
        if self.kind == "any":
            return True
        if self.kind == "error":
            return status in (Status.ERROR, Status.TIMEOUT)
        if self.kind == "masked":
            return status is Status.MASKED
        if status is not Status.OK or value is None or not math.isfinite(value):
            return False
        if self.kind == "value":
            assert self.low is not None
            return math.isclose(value, self.low, rel_tol=_TOLERANCE, abs_tol=_TOLERANCE)
        low_ok = self.low is None or value >= self.low - _TOLERANCE
        high_ok = self.high is None or value <= self.high + _TOLERANCE
        return low_ok and high_ok

    def describe(self) -> str:
        if self.kind == "value":
            return _number(self.low)
        if self.kind == "range":
            low = "-inf" if self.low is None else _number(self.low)
            high = "inf" if self.high is None else _number(self.high)
            return f"[{low}, {high}]"
        return {"error": "an error", "masked": "masked (abstain)", "any": "any value"}[self.kind]


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


@dataclass(frozen=True)
class Check:
    """One input and the rule it must satisfy beyond the rules every check has.

    - ``expect``: a hand-labeled case's expectation.
    - ``allow_error``: an ``error`` status is an accepted outcome (a missing label is the
      dataset's fault; reporting it is correct). With ``blame`` set, only when the check of
      that key (the same completion with a good label) did not fail too: then the error is
      the label's, not a crash on any input.
    - ``no_full_credit``: the value must stay below the full credit of ``kind`` (the reward a
      correct answer of that kind gets), or of every kind the reward grades when ``kind`` is None.
    - ``same_as``: the value must equal that of the check with this key (chat vs plain text).
    - ``calibrates``: a calibration pair: this correct answer must score above that wrong one.
    """

    section: Section
    name: str
    rollout: Rollout
    key: str = ""
    expect: Expectation | None = None
    allow_error: bool = False
    blame: str | None = None
    no_full_credit: bool = False
    kind: str | None = None
    same_as: str | None = None
    calibrates: str | None = None
    rule: str = ""
    note: str = ""


def make_rollout(
    completion: Any,
    answer: Any,
    *,
    prompt: Any = "",
    truncated: bool = False,
    metadata: dict[str, Any] | None = None,
    state: Callable[[str], dict[str, Any]] | None = None,
) -> Rollout:
    """A rollout for one check; the harness gives it a unique id and group before scoring.
    ``state`` adds the metadata its text stands for (a workspace kind's workspace)."""
    rollout = Rollout(id="", group="", prompt=prompt, completion=completion, answer=answer,
                      metadata=dict(metadata or {}), truncated=truncated)
    if state is None:
        return rollout
    return Rollout(id="", group="", prompt=prompt, completion=completion, answer=answer,
                   metadata={**dict(metadata or {}), **state(rollout.text)}, truncated=truncated)
