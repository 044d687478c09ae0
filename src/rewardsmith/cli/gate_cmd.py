"""``rewardsmith gate``: may a new run be promoted over a baseline run of the same prompts?
Exit 0 when it passes, 1 when it does not (the reasons printed), 2 on bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ._app import EXIT_FAILED, app, console, fail, handle_errors

if TYPE_CHECKING:
    from ..analysis.gate import GateResult


def _regressions(items: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise fail(f"--max-regression {item!r}: expected COMPONENT=X, e.g. format=0.02")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise fail(f"--max-regression {item!r}: {value!r} is not a number") from None
    return out


def _num(value: float | None, signed: bool = True) -> str:
    if value is None:
        return "-"
    return f"{value:+.4g}" if signed else f"{value:.4g}"


def render_gate(result: GateResult, *, new: str, baseline: str) -> None:
    from rich.table import Table

    unpaired = ""
    if result.unpaired_new or result.unpaired_baseline:
        unpaired = (f"; unpaired: {len(result.unpaired_new):,} in the new run, "
                    f"{len(result.unpaired_baseline):,} in the baseline")
    console.print(f"[bold]{new}[/] against [bold]{baseline}[/]: {result.pairs:,} rollouts "
                  f"paired by {result.pairing} over {result.groups:,} prompts{unpaired}",
                  highlight=False, soft_wrap=True)
    table = Table(title=f"new - baseline ({result.confidence:.0%} interval, paired bootstrap "
                  f"over prompts, {result.resamples:,} resamples, seed {result.seed})",
                  title_justify="left")
    for column in ("statistic", "pairs", "prompts", "baseline", "new", "delta", "low", "high"):
        table.add_column(column, justify="left" if column == "statistic" else "right")
    for item in result.comparisons:
        table.add_row(f"[bold]{item.name}[/]" if item.name == "reward" else item.name,
                      f"{item.pairs:,}", f"{item.groups:,}", _num(item.baseline_mean, False),
                      _num(item.new_mean, False), _num(item.delta), _num(item.low),
                      _num(item.high))
    console.print(table)
    for note in result.notes:
        console.print(f"note: {note}", highlight=False, soft_wrap=True)
    for check in result.checks:
        mark = "[green]pass[/]" if check.passed else "[red]FAIL[/]"
        console.print(f"{mark} {check.message}", highlight=False, soft_wrap=True)
    console.print("[bold green]PASSED[/]" if result.passed else
                  f"[bold red]FAILED[/]: {len(result.reasons)} check(s) not met")


@app.command("gate")
@handle_errors
def gate_command(
    new: Path = typer.Argument(..., help="The new run's scored file (JSONL or Parquet).",
                               dir_okay=False),
    baseline: Path = typer.Option(..., "--baseline", "-b", help="The baseline run's scored "
                                  "file, of the same prompts.", dir_okay=False),
    min_delta: float | None = typer.Option(None, "--min-delta", help="The reward's mean "
                                           "difference must be at least this, with confidence "
                                           "(the interval's lower bound). May be negative."),
    max_regression: list[str] = typer.Option([], "--max-regression", metavar="COMPONENT=X",
                                             help="COMPONENT (or reward) may drop by at most "
                                             "X, with confidence. Repeatable."),
    confidence: float = typer.Option(0.95, "--confidence", help="Confidence of the "
                                     "two-sided interval."),
    resamples: int = typer.Option(2000, "--resamples", help="Bootstrap resamples."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
    pair_by: str = typer.Option("auto", "--pair-by", help="auto | id | position (the k-th "
                                "rollout of a group with the k-th). auto: id when the runs "
                                "share ids, else position."),
    max_failure_increase: float = typer.Option(0.05, "--max-failure-increase",
                                               help="How much the share of paired rollouts "
                                               "not ok (error, timeout, masked) may grow; 1 "
                                               "turns the check off."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document (the verdict "
                                 "and its figures) on stdout."),
) -> None:
    """Compare a new scored run with a baseline run of the same prompts, with confidence.

    Exit status: 0 passed, 1 failed (reasons printed), 2 bad input.

    Example: rewardsmith gate new.jsonl --baseline old.jsonl --min-delta 0 --max-regression format=0.02
    """
    from ..analysis.gate import gate_files

    if pair_by not in ("auto", "id", "position"):
        raise fail(f"--pair-by must be auto, id or position, got {pair_by!r}")
    result = gate_files(new, baseline, min_delta=min_delta,
                        max_regression=_regressions(max_regression), confidence=confidence,
                        resamples=resamples, seed=seed, pair_by=pair_by,
                        max_failure_increase=max_failure_increase)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2, allow_nan=False))
    else:
        render_gate(result, new=str(new), baseline=str(baseline))
    if not result.passed:
        raise typer.Exit(EXIT_FAILED)
