"""``rewardsmith report``: one self-contained HTML page about a scored run, and the reward
curve of a training run's steps as a table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ._app import app, console, err_console, fail, handle_errors

if TYPE_CHECKING:
    from ..report.steps import StepCurve


def _value(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def render_steps(curve: StepCurve) -> None:
    """The curve as a table on stdout: one row per step."""
    from rich.table import Table

    table = Table(title="mean per step (masked and failed values left out)",
                  title_justify="left")
    for column in ["step", "rollouts", "no reward", "zero-var groups", "reward",
                   *curve.components]:
        table.add_column(column, justify="right")
    for row in curve.rows:
        zero = row.zero_variance_share
        table.add_row(str(row.step), f"{row.rollouts:,}", f"{row.without_reward:,}",
                      "-" if zero is None else f"{zero:.0%}", _value(row.reward),
                      *[_value(row.components.get(name)) for name in curve.components])
    console.print(table)


@app.command("report")
@handle_errors
def report_command(
    scored: Path = typer.Argument(..., help="Scored file (JSONL, or Parquet without timing); "
                                  "or a step log of the jsonl tracker, whose table is printed.",
                                  dir_okay=False),
    output: Path | None = typer.Option(None, "--output", "-o", help="The HTML file to write "
                                       "(required unless the run has steps: then, without it, "
                                       "only the step table is printed).", dir_okay=False),
    store: Path | None = typer.Option(None, "--store", "-s", help="The store the file was "
                                      "scored with: rubric, judge calls and cost, rollouts' "
                                      "text."),
    run: str | None = typer.Option(None, "--run", help="The store's run (default: the latest "
                                   "run over the same rollouts)."),
    compare: Path | None = typer.Option(None, "--compare", help="A baseline scored file of the "
                                        "same rollouts: what moved, paired by id.",
                                        dir_okay=False),
    rollouts: Path | None = typer.Option(None, "--rollouts", help="The rollouts file, for the "
                                         "text of the rollouts the page names (without a "
                                         "store).", dir_okay=False),
    top: int = typer.Option(20, "--top", min=0, help="How many slowest and most-changed "
                            "rollouts to list."),
    title: str | None = typer.Option(None, "--title", help="The page's title."),
    steps: list[Path] = typer.Option([], "--steps", help="Scored files of successive "
                                     "training steps, in order (one step each, or lines "
                                     "carrying 'step'), or step logs of the jsonl tracker: "
                                     "the mean reward and each component's "
                                     "mean per step, as a table and a curve, and their drift "
                                     "warnings. Without it, the scored file's own steps when "
                                     "its lines carry 'step'. Repeatable.", dir_okay=False),
    as_json: bool = typer.Option(False, "--json", help="Print the per-step figures as one "
                                 "JSON document on stdout instead of the table."),
) -> None:
    """Write an HTML report of a scored run: distributions, statuses, groups, advantages per
    trainer, latency, judge cost, rubric; with --compare, what moved. Opens offline.
    For a training run: the reward and each component per step, also printed as a table.

    Example: rewardsmith report scored.jsonl --store rewardsmith.db -o report.html
    """
    from ..analysis.drift import drift_warnings
    from ..files import refuse_output_over_input
    from ..report import build_report
    from ..report.steps import curve_for, is_step_log

    refuse_output_over_input(output, [("a --steps file", path) for path in steps])
    curve = curve_for(scored, steps)
    if output is None and curve is None:
        raise fail("give -o/--output, the HTML file to write (without it only a training "
                   "run's step table is printed, and this file's lines carry no 'step': "
                   "give --steps)")
    if as_json and curve is None:
        raise fail("--json prints the per-step figures, and this file's lines carry no "
                   "'step': give --steps")
    if curve is not None:
        if as_json:
            typer.echo(json.dumps(curve.to_dict(), indent=2, allow_nan=False))
        else:
            render_steps(curve)
    if output is None:
        return
    # The drift watch needs each step's scores: a step log holds only their figures (and
    # build_report refuses one as the scored file, saying what to give instead).
    scored_steps = [path for path in steps if not is_step_log(path)]
    warnings = ([] if is_step_log(scored) else
                [str(w) for w in drift_warnings(scored, scored_steps)])
    text = build_report(scored, output=output, store=store, run=run, compare_with=compare,
                        rollouts=rollouts, top=top, title=title, warnings=warnings,
                        steps=curve)
    err_console.print(f"wrote {output} ({len(text.encode('utf-8')) / 1e6:.2f} MB)",
                      highlight=False)
