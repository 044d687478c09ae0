"""``rewardsmith report``: one self-contained HTML page about a scored run."""

from __future__ import annotations

from pathlib import Path

import typer

from ._app import app, err_console, handle_errors


@app.command("report")
@handle_errors
def report_command(
    scored: Path = typer.Argument(..., help="Scored file (JSONL, or Parquet without timing).",
                                  dir_okay=False),
    output: Path = typer.Option(..., "--output", "-o", help="The HTML file to write.",
                                dir_okay=False),
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
                                     "training steps, in order: their drift warnings are "
                                     "shown (also when the scored file's lines carry "
                                     "'step'). Repeatable.", dir_okay=False),
) -> None:
    """Write an HTML report of a scored run: distributions, statuses, groups, advantages per
    trainer, latency, judge cost, rubric; with --compare, what moved. Opens offline.

    Example: rewardsmith report scored.jsonl --store rewardsmith.db -o report.html
    """
    from ..analysis.drift import drift_warnings
    from ..files import refuse_output_over_input
    from ..report import build_report

    refuse_output_over_input(output, [("a --steps file", path) for path in steps])
    warnings = [str(w) for w in drift_warnings(scored, steps)]
    text = build_report(scored, output=output, store=store, run=run, compare_with=compare,
                        rollouts=rollouts, top=top, title=title, warnings=warnings)
    err_console.print(f"wrote {output} ({len(text.encode('utf-8')) / 1e6:.2f} MB)",
                      highlight=False)
