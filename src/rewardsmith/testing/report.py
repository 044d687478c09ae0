"""The result of testing a reward: one row per check, pass or fail, and a table to read it."""

from __future__ import annotations

import io
import json
import unicodedata
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..types import Rollout

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["FAILURES", "RowResult", "TestReport", "preview"]

# Why a check fails, by code (the codes appear in the table, in JSON and in messages).
FAILURES = {
    "crash": "the reward raised an error",
    "hang": "the reward ran past its timeout",
    "non-finite": "the reward returned NaN or infinity",
    "out-of-range": "the value is outside the declared range",
    "non-deterministic": "a second call on the same input gave a different result",
    "unexpected": "the value is not what the case expects",
    "full-credit": "a hack or an answer-free completion got full credit",
    "differs-from-text": "chat messages scored differently from the same text as a string",
    "not-above-wrong": "a correct answer did not score above a wrong one",
    "swayed": "a judge probe (an injected instruction, a fake delimiter, self-praise, padding) "
              "raised a judged grade",
}


@dataclass
class RowResult:
    """One check's outcome. ``failures`` holds codes from ``FAILURES``; empty means passed."""

    section: str
    name: str
    input: str
    expected: str
    got: str
    status: str
    value: float | None
    failures: list[str] = field(default_factory=list)
    detail: str = ""

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass
class TestReport:
    """Every check of one reward. ``exit_code`` is 0 when all passed, else 1."""

    __test__ = False  # not a pytest test class, despite the name

    reward: str
    kinds: list[str]
    value_range: tuple[float, float] | None
    timeout: str
    rows: list[RowResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return all(row.passed for row in self.rows)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    @property
    def failed(self) -> list[RowResult]:
        return [row for row in self.rows if not row.passed]

    def failure_counts(self) -> dict[str, int]:
        return dict(Counter(code for row in self.rows for code in row.failures))

    def find(self, name: str) -> RowResult:
        """The row called ``name`` (the first, when several kinds share a probe name)."""
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(f"no check named {name!r}; checks: {', '.join(r.name for r in self.rows)}")

    def summary(self) -> str:
        if self.passed:
            return f"PASS: all {len(self.rows)} checks passed ({self.reward})"
        counts = ", ".join(f"{code} {n}" for code, n in sorted(self.failure_counts().items()))
        return f"FAIL: {len(self.failed)} of {len(self.rows)} checks failed ({counts}) ({self.reward})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "reward": self.reward,
            "passed": self.passed,
            "exit_code": self.exit_code,
            "kinds": list(self.kinds),
            "range": None if self.value_range is None else list(self.value_range),
            "timeout": self.timeout,
            "counts": {"checks": len(self.rows), "failed": len(self.failed),
                       "failures": self.failure_counts()},
            "notes": list(self.notes),
            "seconds": round(self.seconds, 3),
            "results": [dict(asdict(row), passed=row.passed) for row in self.rows],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def render(self, console: Console, *, only_failures: bool = False) -> None:
        _render(self, console, only_failures)

    def text(self, width: int = 140, *, only_failures: bool = False) -> str:
        """The table as plain text (what ``check_reward`` puts in its AssertionError)."""
        from rich.console import Console

        buffer = io.StringIO()
        self.render(Console(file=buffer, width=width, no_color=True, highlight=False,
                            emoji=False), only_failures=only_failures)
        return buffer.getvalue()


def _render(report: TestReport, console: Console, only_failures: bool) -> None:
    from rich.markup import escape
    from rich.table import Table

    kinds = ", ".join(report.kinds) or "unknown"
    span = "any finite number" if report.value_range is None else \
        f"[{report.value_range[0]:g}, {report.value_range[1]:g}]"
    table = Table(title=f"rewardsmith test {report.reward}", title_justify="left",
                  caption=f"kinds: {kinds}; range: {span}; timeout: {report.timeout}",
                  caption_justify="left", show_lines=False)
    for column in ("result", "check", "input", "expected", "got"):
        table.add_column(column, overflow="fold", ratio=1 if column == "result" else 2)
    shown = [row for row in report.rows if not (only_failures and row.passed)]
    for row in shown:
        result = "[green]PASS[/]" if row.passed else f"[bold red]FAIL[/] {', '.join(row.failures)}"
        got = escape(row.got) + (f"\n[red]{escape(row.detail)}[/]" if row.detail else "")
        table.add_row(result, f"[dim]{row.section}:[/] {escape(row.name)}", escape(row.input),
                      escape(row.expected), got)
    if shown:
        console.print(table)
    for note in report.notes:
        console.print(f"note: {escape(note)}", highlight=False)
    style = "bold green" if report.passed else "bold red"
    console.print(f"[{style}]{escape(report.summary())}[/] in {report.seconds:.1f} s",
                  highlight=False)


def _printable(text: str) -> str:
    # Escape what would garble a terminal: control, format (RTL overrides) and private chars.
    out = []
    for char in text:
        if char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co"):
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out)


def _short(text: str, width: int) -> str:
    if len(text) <= width:
        return _printable(text)
    head = _printable(text[: width * 2 // 3])
    tail = _printable(text[-(width // 3):])
    return f"{head}…{tail} ({len(text):,} chars)"


def preview(rollout: Rollout, width: int = 72) -> str:
    """A one-line view of a check's input, shortened for display."""
    completion = rollout.completion
    if isinstance(completion, str):
        shown = f"'{_short(completion, width)}'"
    else:
        shown = "chat " + _short(json.dumps(completion, ensure_ascii=False), width)
    answer = _short(json.dumps(rollout.answer, ensure_ascii=False, default=str), 24)
    flags = ", truncated" if rollout.truncated else ""
    return f"{shown} (answer {answer}{flags})"
