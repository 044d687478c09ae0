"""``rewardsmith log``: scored files as steps of a W&B, MLflow or TensorBoard run."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ._app import app, console, fail, handle_errors


@app.command("log")
@handle_errors
def log_command(
    scored: list[Path] = typer.Argument(..., help="Scored files (JSONL or Parquet), one step "
                                        "each, in the order given.", dir_okay=False),
    to: list[str] = typer.Option(..., "--to", help="The tracker: wandb, mlflow or "
                                 "tensorboard (repeat, or separate with commas, for several)."),
    project: str | None = typer.Option(None, "--project", help="W&B project, MLflow "
                                       "experiment, or a TensorBoard folder under --dir."),
    run: str | None = typer.Option(None, "--run", help="The run's name in the tracker."),
    directory: str | None = typer.Option(None, "--dir", help="Where trackers write: W&B's "
                                         "directory, an MLflow tracking URI or store "
                                         "directory, the TensorBoard log directory "
                                         "(default: runs)."),
    first_step: int = typer.Option(0, "--first-step", min=0, help="The first file's step."),
    as_json: bool = typer.Option(False, "--json", help="Print each step's metrics as JSON."),
) -> None:
    """Log scored files to a tracker, one step per file (per-component statistics, statuses,
    zero-variance groups, latency when the lines carry timing).

    Example: rewardsmith log step0.jsonl step1.jsonl step2.jsonl --to tensorboard --dir runs
    """
    from ..tracking import LoggedStep, check_available, file_stats, open_trackers
    from .logging_opts import tracker_names

    names = tracker_names(to, "--to")
    if not names:
        raise fail(f"--to: name a tracker ({', '.join(('wandb', 'mlflow', 'tensorboard'))})")
    check_available(names)
    missing = [str(path) for path in scored if not path.is_file()]
    if missing:
        raise fail(f"no such file: {', '.join(map(repr, missing))}")
    # Every file is read and checked before a tracker opens: a bad file leaves no empty run.
    computed = [(str(path), file_stats(path)) for path in scored]
    steps: list[LoggedStep] = []
    with open_trackers(names, project=project, run=run, directory=directory) as trackers:
        for index, (source, metrics) in enumerate(computed):
            at = trackers.log_metrics(metrics, step=first_step + index)
            steps.append(LoggedStep(at, source, metrics))
    if as_json:
        typer.echo(json.dumps([step.to_dict() for step in steps], indent=2))
        return
    for step in steps:
        metrics = step.metrics
        mean = metrics.get("reward/mean")
        console.print(
            f"step {step.step}: {step.source}: {int(metrics['rollouts']):,} rollouts, reward "
            f"mean {'-' if mean is None else f'{mean:.4g}'}, "
            f"{int(metrics['groups/zero_variance']):,} zero-variance group(s)",
            highlight=False, markup=False, soft_wrap=True)
    console.print(f"logged {len(steps)} step(s) to {', '.join(names)}", highlight=False)
