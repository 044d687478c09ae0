"""The ``--max-error-rate`` gate of ``score`` and ``rescore``: skipped input lines count as
failed rollouts, so skipping cannot hide a file that is mostly unreadable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rewardsmith.jobs.summary import RunSummary

__all__ = ["ErrorRateCheck"]


@dataclass(frozen=True)
class ErrorRateCheck:
    failed: int  # rollouts that errored or timed out
    skipped: int  # input lines skipped with --on-bad-line skip
    rollouts: int  # rollouts scored
    limit: float

    @classmethod
    def of(cls, summary: RunSummary, limit: float) -> ErrorRateCheck:
        return cls(summary.failed, len(summary.bad_lines), summary.rollouts, limit)

    @property
    def rate(self) -> float:
        total = self.rollouts + self.skipped
        return (self.failed + self.skipped) / total if total else 0.0

    @property
    def passed(self) -> bool:
        return self.rate <= self.limit

    @property
    def message(self) -> str | None:
        if self.passed:
            return None
        skipped = f" and {self.skipped} input line(s) were skipped" if self.skipped else ""
        return (f"{self.failed} of {self.rollouts} rollouts errored or timed out{skipped} "
                f"({self.rate:.1%} > --max-error-rate {self.limit:.1%})")

    def to_dict(self) -> dict[str, Any]:
        return {"max_error_rate": self.limit, "error_rate": self.rate, "failed": self.failed,
                "skipped_lines": self.skipped, "passed": self.passed, "message": self.message}
