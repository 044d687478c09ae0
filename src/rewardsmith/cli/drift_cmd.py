"""``rewardsmith drift``: warnings over the scored files of successive training steps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ._app import EXIT_FAILED, app, console, err_console, fail, handle_errors

if TYPE_CHECKING:
    from ..analysis.drift import DriftWatch


def _weights(items: list[str]) -> dict[str, float] | None:
    if not items:
        return None
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            out[name.strip()] = float(value)
        except ValueError:
            raise fail(f"--weight {item!r}: expected COMPONENT=W, e.g. format=0.2") from None
    return out


def _pairs(items: list[str]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        first, sep, second = item.partition(",")
        if not sep or not first.strip() or not second.strip():
            raise fail(f"--pair {item!r}: expected two component names, e.g. correct,judge")
        out.append((first.strip(), second.strip()))
    return out


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def render_drift(watch: DriftWatch) -> None:
    from rich.table import Table

    table = Table(title="per step", title_justify="left")
    columns = ["step", "rollouts", "reward mean", "zero-var groups", "top share", "length"]
    columns += [f"disagree {a}~{b}" for a, b in watch.pairs]
    for column in columns:
        table.add_column(column, justify="right")
    for stats in watch.history:
        top = "-"
        if stats.shares:
            name = max(stats.shares, key=lambda n: stats.shares[n])
            top = f"{name} {stats.shares[name]:.0%}"
        row = [str(stats.step), f"{stats.rollouts:,}",
               "-" if stats.reward_mean is None else f"{stats.reward_mean:.4g}",
               _pct(stats.zero_variance_fraction), top,
               "-" if stats.mean_length is None else f"{stats.mean_length:.4g}"]
        for a, b in watch.pairs:
            figures = stats.agreement.get(f"{a}~{b}")
            row.append("-" if figures is None else _pct(float(figures["disagreement"] or 0)))
        table.add_row(*row)
    console.print(table)
    if not watch.warnings:
        console.print("no drift warnings")
    for warning in watch.warnings:
        console.print(f"[yellow]warning[/] {warning.message}", highlight=False, soft_wrap=True)


@app.command("drift")
@handle_errors
def drift_command(
    steps: list[Path] = typer.Argument(..., help="Scored files, one per training step in "
                                       "order (or files whose lines carry 'step')."),
    rollouts: list[Path] = typer.Option([], "--rollouts", help="The rollouts file of each "
                                        "step (once per scored file, same order), for "
                                        "completion lengths when the scored lines carry no "
                                        "'length' metric."),
    pair: list[str] = typer.Option([], "--pair", metavar="A,B", help="Two components whose "
                                   "disagreement to follow (a verifier and a judge). "
                                   "Repeatable."),
    weight: list[str] = typer.Option([], "--weight", metavar="COMPONENT=W", help="The "
                                     "rubric's weights (else fitted per step). Repeatable."),
    length_metric: str = typer.Option("length", "--length-metric", help="The metric that "
                                      "holds each completion's length."),
    dominance: float = typer.Option(0.8, "--dominance", help="Warn when one component holds "
                                    "this share of the within-group reward variance."),
    length_change: float = typer.Option(0.3, "--length-change", help="Warn when the mean "
                                        "length moves this far (relative) from the first "
                                        "steps'."),
    zero_variance: float = typer.Option(0.5, "--zero-variance", help="Warn when this share "
                                        "of groups have all-equal rewards."),
    disagreement_rise: float = typer.Option(0.15, "--disagreement-rise", help="Warn when a "
                                            "pair's disagreement rate rose this much over the "
                                            "first steps' and is rising."),
    agree_cutoff: float = typer.Option(0.5, "--agree-cutoff", help="A component passes a "
                                       "rollout when its value is at least this."),
    baseline_steps: int = typer.Option(1, "--baseline-steps", help="How many first steps "
                                       "form the reference."),
    trend_window: int = typer.Option(3, "--trend-window", help="Steps over which a "
                                     "disagreement must be rising."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when there is any warning."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document (per-step "
                                 "figures, warnings, thresholds) on stdout."),
) -> None:
    """Watch scored files of successive training steps for signs the reward stopped teaching:
    one component dominating, completion length drifting, groups with no reward variance, a
    verifier and a judge disagreeing more and more.

    Example: rewardsmith drift step1.jsonl step2.jsonl step3.jsonl --pair correct,judge
    """
    from ..analysis.drift import DriftThresholds, drift_files

    thresholds = DriftThresholds(dominance=dominance, length_change=length_change,
                                 zero_variance=zero_variance,
                                 disagreement_rise=disagreement_rise,
                                 agree_cutoff=agree_cutoff, baseline_steps=baseline_steps,
                                 trend_window=trend_window)
    watch = drift_files(steps, rollouts=rollouts or None, thresholds=thresholds,
                        weights=_weights(weight), pairs=_pairs(pair),
                        length_metric=length_metric)
    if as_json:
        typer.echo(json.dumps(watch.to_dict(), indent=2, allow_nan=False))
    else:
        render_drift(watch)
    if strict and watch.warnings:
        if not as_json:
            err_console.print(f"{len(watch.warnings)} drift warning(s) (--strict)")
        raise typer.Exit(EXIT_FAILED)
