"""``rewardsmith rescore``, ``rewardsmith runs`` and ``rewardsmith import-scores``: the store."""

from __future__ import annotations

import contextlib
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ._app import EXIT_FAILED, app, console, err_console, fail, handle_errors
from .backend_opts import BACKEND_HELP, RAY_ADDRESS_HELP, use_backend
from .logging_opts import (
    LOG_DIR_OPTION,
    LOG_PROJECT_OPTION,
    LOG_RUN_OPTION,
    LOG_STEP_OPTION,
    LOG_TO_OPTION,
    RunLogging,
)
from .score_cmd import DEFAULT_STORE_PATH
from .streams import results_on_stdout, write_json

if TYPE_CHECKING:
    from rich.console import Console

    from rewardsmith.jobs.rescore import (
        RescorePlan,
        RescoreResult,
    )

STORE_HELP = "The store file (SQLite) written by 'rewardsmith score --store'."


def _existing_store(path: Path) -> Path:
    if not path.is_file():
        raise fail(f"no store at {str(path)!r}: score rollouts with 'rewardsmith score ... "
                   f"--store {path}' first (or import a scored file with import-scores)")
    return path


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.4f}"


def render_plan(plan: RescorePlan, target: Console) -> None:
    from rich.table import Table

    table = Table(title=f"rescore of run {plan.source_run}: {plan.rollouts:,} rollouts, "
                  f"{plan.groups_to_score:,} of {plan.groups:,} groups to score",
                  title_justify="left")
    for column in ("component", "kind", "reused", "compute", "judge calls", "est. cost", "why"):
        table.add_column(column, justify="left" if column in ("component", "kind", "why")
                         else "right", overflow="fold")
    for row in plan.components:
        calls = f"{row.judge_calls:,}" if row.kind == "judge" else "-"
        cost = _money(row.estimated_cost) if row.kind == "judge" else "-"
        table.add_row(row.name, row.kind, f"{row.reused:,}", f"{row.compute:,}", calls, cost,
                      row.reason)
    target.print(table)
    if plan.judge_calls:
        target.print(f"judge calls: {plan.judge_calls:,} (est. cost "
                     f"{_money(plan.estimated_cost)})")


@app.command("rescore")
@handle_errors
def rescore_command(
    rubric: Path = typer.Option(..., "--rubric", "-r", help="The new rubric YAML.",
                                dir_okay=False),
    store: Path = typer.Option(Path(DEFAULT_STORE_PATH), "--store", "-s", help=STORE_HELP),
    run: str | None = typer.Option(None, "--run", help="The run whose rollouts to rescore "
                                   "(an id or unique prefix; default: the latest run)."),
    output: str | None = typer.Option(None, "--output", "-o", help="Scored output: .jsonl, "
                                      ".parquet, or '-' for stdout."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only say, per component, what is "
                                 "reused and what would be computed (judge calls, cost); "
                                 "spend nothing."),
    workers: int | None = typer.Option(None, "--workers", "-w", min=0,
                                       help="Worker processes for what must be computed."),
    backend: str | None = typer.Option(None, "--backend", help=BACKEND_HELP),
    ray_address: str | None = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    max_concurrency: int = typer.Option(64, "--max-concurrency", min=1,
                                        help="Async reward calls at once."),
    advantage: str = typer.Option("grpo", "--advantage",
                                  help="The advantage column: grpo, dr_grpo or rloo."),
    max_error_rate: float = typer.Option(0.01, "--max-error-rate", min=0.0, max=1.0,
                                         help="Exit 1 when more than this fraction of "
                                         "rollouts errored or timed out."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan and summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No tables."),
    log_to: list[str] | None = LOG_TO_OPTION,
    log_project: str | None = LOG_PROJECT_OPTION,
    log_run: str | None = LOG_RUN_OPTION,
    log_dir: str | None = LOG_DIR_OPTION,
    log_step: int | None = LOG_STEP_OPTION,
) -> None:
    """Score stored rollouts with a new rubric, computing only the components that changed.

    Example: rewardsmith rescore --store run.db --rubric v2.yaml -o v2.jsonl
    """
    if advantage not in ("grpo", "dr_grpo", "rloo"):
        raise fail(f"--advantage {advantage!r}: choose grpo, dr_grpo or rloo")
    if output is None and not dry_run:
        raise fail("missing --output (a .jsonl or .parquet path, or '-'), or use --dry-run")
    from rewardsmith.jobs.rescore import rescore
    from rewardsmith.rubric import Rubric
    from rewardsmith.store import Store
    from rewardsmith.store.sqlite_setup import read_only_reason

    from ..files.paths import refuse_output_over_input
    from .error_rate import ErrorRateCheck

    refuse_output_over_input(output, [("the store", store), ("the rubric", rubric)])
    _existing_store(store)
    reason = read_only_reason(store)
    if reason is not None and not dry_run:
        raise fail(f"the store {str(store)!r} is read-only ({reason}): a rescore records a new "
                   f"run in it (--dry-run only reads)")
    tracked = RunLogging.from_options(log_to, log_project, log_run, log_dir, log_step)
    use_backend(backend, ray_address)
    new = Rubric.from_yaml(rubric)
    guard_stdout = output == "-" or as_json
    with Store(store, read_only=True if dry_run else None) as opened, \
            results_on_stdout() if guard_stdout else contextlib.nullcontext(sys.stdout) as stdout:
        result = rescore(opened, new, run=run, dry_run=dry_run, workers=workers,
                         max_concurrency=max_concurrency, keep_scores=tracked is not None,
                         advantage_method=advantage,
                         output=stdout if output == "-" and not dry_run else output)
        summary = result.summary
        check = None if summary is None else ErrorRateCheck.of(summary, max_error_rate)
        if as_json:
            document = result.to_dict()
            if check is not None:
                document["check"] = check.to_dict()
            write_json(document, sys.stderr if output == "-" else stdout)
    if tracked is not None and result.summary is not None:
        tracked.log_scores(result.scores, result.usage, quiet=quiet or as_json)
    if not as_json and not quiet:
        report = err_console if output == "-" else console
        render_plan(result.plan, report)
        _render_result(result, report)
    if check is not None and not check.passed:
        if not as_json:
            err_console.print(f"[red]{check.message}[/]")
        raise typer.Exit(EXIT_FAILED)


def _render_result(result: RescoreResult, target: Console) -> None:
    if result.dry_run or result.summary is None:
        target.print("dry run: nothing was computed or written")
        return
    from .render import render_summary

    render_summary(result.summary, target)
    target.print(f"new run {result.run_id}: {result.reward_calls:,} reward function calls made")


@app.command("runs")
@handle_errors
def runs_command(
    store: Path = typer.Option(Path(DEFAULT_STORE_PATH), "--store", "-s", help=STORE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    rubric: Path | None = typer.Option(None, "--rubric", "-r", dir_okay=False,
                                       help="Also say, per component of this rubric, how many "
                                       "of a run's results it would reuse and why the others "
                                       "are not (params changed, code changed: which file)."),
    run: str | None = typer.Option(None, "--run", help="With --rubric: the run to compare "
                                   "with (an id or unique prefix; default: the latest run)."),
) -> None:
    """List the runs recorded in a store, oldest first.

    Example: rewardsmith runs --store run.db --rubric v2.yaml
    """
    from rich.table import Table

    from rewardsmith.store import Store

    plan = None
    with Store(_existing_store(store), read_only=True) as opened:
        runs = opened.runs()
        if rubric is not None:
            from rewardsmith.jobs.rescore import rescore
            from rewardsmith.rubric import Rubric

            plan = rescore(opened, Rubric.from_yaml(rubric), run=run, dry_run=True).plan
    if as_json:
        if plan is None:
            typer.echo(json.dumps([r.to_dict() for r in runs], indent=2))
        else:
            typer.echo(json.dumps({"runs": [r.to_dict() for r in runs],
                                   "reuse": plan.to_dict()}, indent=2))
        return
    table = Table("run", "kind", "status", "rubric", "rollouts", "started", "source")
    for info in runs:
        started = datetime.fromtimestamp(info.created).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(info.id, info.kind, info.status, f"{info.rubric_name} ({info.rubric_id})",
                      f"{info.size:,}", started, info.source)
    console.print(table)
    if plan is not None:
        render_plan(plan, console)


@app.command("import-scores")
@handle_errors
def import_scores_command(
    scored: Path = typer.Argument(..., help="Scored JSONL or Parquet made elsewhere.",
                                  dir_okay=False),
    rubric: Path = typer.Option(..., "--rubric", "-r", help="The rubric that produced the "
                                "scores (it says what each component name means).",
                                dir_okay=False),
    rollouts: Path | None = typer.Option(None, "--rollouts", help="The rollouts the scores "
                                         "are for (matched by id); default: the scored file "
                                         "itself, when it carries the rollout fields.",
                                         dir_okay=False),
    store: Path = typer.Option(Path(DEFAULT_STORE_PATH), "--store", "-s",
                               help="The store to import into (created when missing)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Import a scored file into a store, so a rescore reuses its component values.

    Example: rewardsmith import-scores scored.jsonl --rollouts rollouts.jsonl -r v1.yaml
    """
    from rich.table import Table

    from rewardsmith.jobs.recording import import_scores
    from rewardsmith.rubric import Rubric
    from rewardsmith.store.sqlite_setup import read_only_reason

    from ..files.paths import refuse_output_over_input

    refuse_output_over_input(store, [("the scored file", scored), ("the rubric", rubric),
                                     ("the rollouts file", rollouts)])
    reason = read_only_reason(store)
    if reason is not None:
        raise fail(f"the store {str(store)!r} is read-only ({reason}): importing writes a run "
                   f"into it")
    result = import_scores(store, scored, Rubric.from_yaml(rubric), rollouts=rollouts)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return
    console.print(f"imported {result.rollouts:,} rollouts into {store} as run {result.run_id}")
    table = Table("component", "stored", "not reusable (failed or missing)")
    for name, count in result.imported.items():
        table.add_row(name, f"{count:,}", f"{result.not_reusable[name]:,}")
    console.print(table)
