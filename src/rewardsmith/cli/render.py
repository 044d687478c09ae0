"""Rich tables for summaries (the face layer's only formatting code)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..summary import ComponentStats, RunSummary

__all__ = ["render_summary"]


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def render_summary(summary: RunSummary, console: Console) -> None:
    table = Table(title=f"rubric {summary.rubric_name} (id {summary.rubric_id})",
                  title_justify="left")
    for column in ("component", "mean", "std", "min", "max", "n", "errors", "timeouts", "masked"):
        table.add_column(column, justify="left" if column == "component" else "right")

    def row(stats: ComponentStats, *, bold: bool = False) -> None:
        name = f"[bold]{stats.name}[/]" if bold else stats.name
        table.add_row(name, _num(stats.mean), _num(stats.std), _num(stats.minimum),
                      _num(stats.maximum), str(stats.count), str(stats.errors),
                      str(stats.timeouts), str(stats.masked))

    for stats in summary.components:
        row(stats)
    row(summary.reward, bold=True)
    console.print(table)
    statuses = ", ".join(f"{k} {v}" for k, v in summary.statuses.items())
    console.print(f"rollouts {summary.rollouts} in {summary.groups} groups: {statuses}")
    console.print(
        f"groups with zero reward variance (they teach nothing): "
        f"{summary.zero_variance_groups} of {summary.groups}"
    )
    if summary.bad_lines:
        console.print(f"[yellow]skipped {len(summary.bad_lines)} bad input line(s):[/]")
        for line in summary.bad_lines[:20]:
            console.print(f"  {line}", markup=False)
        if len(summary.bad_lines) > 20:
            console.print(f"  ... and {len(summary.bad_lines) - 20} more")
    console.print(
        f"{summary.seconds:.2f} s, {summary.rollouts_per_second:,.0f} rollouts/s", style="dim"
    )
