"""``rewardsmith diff``: how rewards and advantages move between two scored files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from rewardsmith.analysis.diff import DiffReport
from ._app import app, console, fail, handle_errors


def _num(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.4g}" if signed else f"{value:.4g}"


def render_diff(report: DiffReport, target: Console, *, old: str, new: str) -> None:
    from rich.table import Table

    target.print(f"[bold]{old}[/] -> [bold]{new}[/]: {report.matched:,} rollouts matched by id"
                 + (f", {report.only_old:,} only in the old file" if report.only_old else "")
                 + (f", {report.only_new:,} only in the new file" if report.only_new else ""))
    table = Table(title="per component", title_justify="left")
    for column in ("component", "old mean", "old std", "new mean", "new std", "delta"):
        table.add_column(column, justify="left" if column == "component" else "right")
    for row in report.components:
        table.add_row(f"[bold]{row.name}[/]" if row.name == "reward" else row.name,
                      _num(row.old_mean), _num(row.old_std), _num(row.new_mean),
                      _num(row.new_std), _num(row.delta, signed=True))
    target.print(table)
    target.print(f"rank correlation within groups (Spearman, mean of {report.groups_ranked:,} "
                 f"groups): {_num(report.rank_correlation)}; {report.groups_constant:,} "
                 f"group(s) with equal rewards in a file were not ranked")
    target.print(f"groups that lost all reward variance (now teach nothing): "
                 f"{len(report.became_constant):,}"
                 + (f" e.g. {', '.join(report.became_constant[:5])}"
                    if report.became_constant else ""))
    target.print(f"groups that gained reward variance: {len(report.became_varied):,}"
                 + (f" e.g. {', '.join(report.became_varied[:5])}"
                    if report.became_varied else ""))
    for change, count in report.status_changes.items():
        target.print(f"status {change}: {count:,}")
    if report.advantages is not None:
        moved = report.advantages
        target.print(f"advantages ({moved.rollouts:,} rollouts): mean |change| "
                     f"{moved.mean_abs_delta:.4g}, max {moved.max_abs_delta:.4g}, sign flips "
                     f"{moved.sign_flips:,}, became 0: {moved.became_zero:,}, left 0: "
                     f"{moved.became_nonzero:,}")
    if report.movers:
        movers = Table(title="rollouts that moved most", title_justify="left")
        for column in ("id", "group", "old", "new", "delta", "advantage", "completion"):
            movers.add_column(column, justify="right" if column in ("old", "new", "delta")
                              else "left")
        for mover in report.movers:
            advantage = "-" if mover.new_advantage is None else (
                f"{_num(mover.old_advantage)} -> {_num(mover.new_advantage)}")
            movers.add_row(mover.id, mover.group, _num(mover.old), _num(mover.new),
                           _num(mover.delta, signed=True), advantage, mover.first_line or "")
        target.print(movers)


@app.command("diff")
@handle_errors
def diff_command(
    old: Path = typer.Argument(..., help="Scored file before (JSONL or Parquet).",
                               dir_okay=False),
    new: Path = typer.Argument(..., help="Scored file after (JSONL or Parquet).",
                               dir_okay=False),
    rollouts: Path | None = typer.Option(None, "--rollouts", help="Rollouts file, to show "
                                         "the completions of the rollouts that moved most.",
                                         dir_okay=False),
    store: Path | None = typer.Option(None, "--store", "-s", help="Or a store to take those "
                                      "completions from."),
    run: str | None = typer.Option(None, "--run", help="The store's run (default: latest)."),
    top: int = typer.Option(10, "--top", min=0, help="How many moved rollouts to show."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Compare two scored files of the same rollouts (for example before and after a rescore).

    Example: rewardsmith diff v1.jsonl v2.jsonl --store run.db --top 10
    """
    if rollouts is not None and store is not None:
        raise fail("give either --rollouts or --store, not both")
    if store is not None and not store.is_file():
        raise fail(f"no store at {str(store)!r}")
    from rewardsmith.analysis.diff import diff_files

    report = diff_files(old, new, top=top, rollouts=rollouts, store=store, run=run)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
        return
    render_diff(report, console, old=str(old), new=str(new))
