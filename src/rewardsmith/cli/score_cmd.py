"""``rewardsmith score`` and ``rewardsmith demo``."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import IO, TYPE_CHECKING

import typer

from ._app import EXIT_FAILED, app, console, err_console, fail, handle_errors, real_console
from .backend_opts import BACKEND_HELP, RAY_ADDRESS_HELP, use_backend
from .logging_opts import (
    LOG_DIR_OPTION,
    LOG_PROJECT_OPTION,
    LOG_RUN_OPTION,
    LOG_STEP_OPTION,
    LOG_TO_OPTION,
    RunLogging,
)
from .streams import results_on_stdout, write_json

if TYPE_CHECKING:
    from rich.progress import Progress

    from rewardsmith.jobs.score import (
        ScoreJob,
        ScoreResult,
    )
    from rewardsmith.rubric import Rubric

    from ..types import Rollout

# The store's default name, repeated here so that `--help` does not import the store; a test
# keeps the two equal.
DEFAULT_STORE_PATH = "rewardsmith.db"


def load_rubric(rubric: Path | None, reward: str | None, params: list[str] | None) -> Rubric:
    """The rubric named on the command line: a YAML file, or one reward by name."""
    from rewardsmith.rubric import Rubric

    if rubric is not None and reward is not None:
        raise fail("give either --rubric or --reward, not both")
    if rubric is not None:
        if params:
            raise fail("--param goes with --reward; put params in the rubric file instead")
        return Rubric.from_yaml(rubric)
    if reward is not None:
        return Rubric.single(reward, params=parse_params(params or []))
    raise fail("missing --rubric RUBRIC.yaml (or --reward NAME for a single reward)")


def parse_params(items: list[str]) -> dict[str, object]:
    """``k=v`` pairs; a value that is JSON (a number, true/false, null, a list) is read as JSON,
    anything else is kept as text (so ``marker=####`` stays ``"####"``)."""
    params: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise fail(f"--param {item!r}: expected key=value")
        try:
            params[key.strip()] = json.loads(value)
        except ValueError:
            params[key.strip()] = value
    return params


@contextlib.contextmanager
def _progress(enabled: bool) -> Iterator[Progress | None]:
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeRemainingColumn(), console=real_console(err_console),
                  transient=True) as bar:
        yield bar


def run_score_job(job: ScoreJob, source: Path, rollouts: list[Rollout], bad_lines: list[str],
                  output: IO[str] | None, show_progress: bool) -> ScoreResult:
    with _progress(show_progress) as bar:
        # The count is known once the file is read: the bar shows 0/N from the start, not 0/?.
        task = bar.add_task("scoring", total=len(rollouts)) if bar is not None else None

        def progress(done: int, total: int) -> None:
            if bar is not None and task is not None:
                bar.update(task, completed=done, total=total)

        return job.run_rollouts(rollouts, output, progress=progress, bad_lines=bad_lines,
                                source=str(source))


@app.command("score")
@handle_errors
def score(
    ctx: typer.Context,
    rollouts: Path | None = typer.Argument(None, help="Rollout JSONL (one object a line), or "
                                           "Parquet (.parquet).", dir_okay=False,
                                           show_default=False),
    completion: str | None = typer.Option(
        None, "--completion", help="Score this one completion instead of a file ('-' reads it "
        "from stdin) and print its scored line; records nothing unless --store is given."),
    answer: str | None = typer.Option(None, "--answer", help="With --completion: the reference "
                                      "answer (a JSON object or list is decoded)."),
    prompt: str | None = typer.Option(None, "--prompt", help="With --completion: the prompt."),
    rubric: Path | None = typer.Option(None, "--rubric", "-r", help="Rubric YAML file."),
    reward: str | None = typer.Option(None, "--reward", help="Score with one reward instead "
                                      "of a rubric (built-in name or import path)."),
    param: list[str] | None = typer.Option(None, "--param", "-p", help="k=v for --reward."),
    output: str = typer.Option("-", "--output", "-o", help="Scored JSONL path, a .parquet "
                               "path, or '-' for stdout."),
    store: Path = typer.Option(Path(DEFAULT_STORE_PATH), "--store",
                               help="Record the rollouts and each component's result in this "
                               "SQLite file (reused by reruns and 'rewardsmith rescore')."),
    no_store: bool = typer.Option(False, "--no-store", help="Record nothing."),
    on_bad_line: str = typer.Option("fail", "--on-bad-line",
                                    help="'fail' stops at the first unreadable line; 'skip' "
                                    "reports it and goes on."),
    strict_groups: bool = typer.Option(False, "--strict-groups",
                                       help="Refuse a file whose groups are written two ways "
                                       "(some rollouts with a group and some without, or 1 "
                                       "and \"1\"), exit 2; without it, a warning naming "
                                       "the lines."),
    workers: int | None = typer.Option(None, "--workers", "-w", min=0,
                                       help="Worker processes (default: one per core; 0 runs "
                                       "in-process without hard timeouts)."),
    batch_size: int | None = typer.Option(None, "--batch-size", min=1,
                                          help="Rollouts sent to a worker at once, at most "
                                          "(whole groups; default 2048, smaller near the end "
                                          "and for small inputs so every worker has work)."),
    backend: str | None = typer.Option(None, "--backend", help=BACKEND_HELP),
    ray_address: str | None = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    max_concurrency: int = typer.Option(64, "--max-concurrency", min=1,
                                        help="Async reward calls at once."),
    max_error_rate: float = typer.Option(0.01, "--max-error-rate", min=0.0, max=1.0,
                                         help="Exit 1 when more than this fraction of "
                                         "rollouts errored or timed out."),
    trainer: str | None = typer.Option(None, "--trainer", "-t",
                                       help="Check advantages under this trainer's float32 "
                                       "arithmetic (default: every trainer rewardsmith emulates)."),
    advantage: str = typer.Option("grpo", "--advantage",
                                  help="The advantage column: grpo, dr_grpo or rloo."),
    allow_empty: bool = typer.Option(False, "--allow-empty", help="Accept an input file "
                                     "without rollouts (otherwise an error, exit 2)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as one JSON "
                                 "document: on stdout, or on stderr with -o -."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar, no summary."),
    refresh: bool = typer.Option(False, "--refresh", help="Ask LLM judges again for grades "
                                 "already recorded (the old ones are kept in the store)."),
    timing: bool = typer.Option(False, "--timing", help="Record each component's call time "
                                "(seconds): a 'timing' object on each scored line, in the "
                                "store, and the slowest components and rollouts in the summary."),
    log_to: list[str] | None = LOG_TO_OPTION,
    log_project: str | None = LOG_PROJECT_OPTION,
    log_run: str | None = LOG_RUN_OPTION,
    log_dir: str | None = LOG_DIR_OPTION,
    log_step: int | None = LOG_STEP_OPTION,
) -> None:
    """Score rollouts with a rubric and print a summary.

    Example: rewardsmith score rollouts.jsonl --rubric rubric.yaml -o scored.jsonl

    One completion: rewardsmith score --completion "... #### 42" --answer 42 --reward gsm8k
    """
    if completion is not None:
        if rollouts is not None:
            raise fail("give a rollouts file or --completion, not both")
        rollouts = _one_rollout_file(ctx, completion, answer, prompt)
        source = ctx.get_parameter_source("store")
        if getattr(source, "name", "") != "COMMANDLINE":
            no_store = True  # a one-off try leaves no store behind unless asked to
        quiet = quiet or not as_json
    elif rollouts is None:
        raise fail("missing ROLLOUTS: a rollouts file (JSONL or Parquet), or --completion TEXT")
    elif answer is not None or prompt is not None:
        raise fail("--answer and --prompt go with --completion (a file's rollouts carry their "
                   "own)")
    from rewardsmith.files.parquet import (
        is_parquet,
        write_scores_any,
    )
    from rewardsmith.jobs.score import ScoreJob
    from rewardsmith.store.sqlite_setup import read_only_reason

    from ..files.atomic import atomic_text
    from ..files.paths import refuse_output_over_input
    from .error_rate import ErrorRateCheck

    if on_bad_line not in ("fail", "skip"):
        raise fail(f"--on-bad-line must be 'fail' or 'skip', not {on_bad_line!r}")
    # Made absolute before any reward runs: one that changes this process's folder cannot
    # move the results or the store.
    rollouts, store = rollouts.absolute(), store.absolute()
    if output != "-":
        output = str(Path(output).absolute())
    refuse_output_over_input(output, [("the rollouts file", rollouts), ("the rubric", rubric),
                                      ("the store", None if no_store else store)])
    if not no_store:
        refuse_output_over_input(store, [("the rollouts file", rollouts), ("the rubric", rubric)])
        reason = read_only_reason(store)
        if reason is not None:
            raise fail(f"the store {str(store)!r} is read-only ({reason}): give a writable "
                       f"--store, or --no-store")
    tracked = RunLogging.from_options(log_to, log_project, log_run, log_dir, log_step)
    use_backend(backend, ray_address)
    chosen = load_rubric(rubric, reward, param)
    if refresh:
        from ..judge import refresh_judges

        refresh_judges(chosen)
    job = ScoreJob(chosen, workers=workers, max_concurrency=max_concurrency,
                   on_bad_line=on_bad_line, keep_scores=is_parquet(output),  # type: ignore[arg-type]
                   trainer=_trainer_name(trainer), advantage_method=_method_name(advantage),
                   store=None if no_store else str(store), timing=timing,
                   post_process=None if tracked is None else tracked.observe,
                   strict_groups=strict_groups, batch_size=batch_size)
    items, bad_lines = job.read(rollouts)
    for warning in job.input_warnings:
        err_console.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    if not items and not bad_lines and not allow_empty:
        raise fail(f"{str(rollouts)!r} holds no rollouts (an empty file); pass --allow-empty "
                   f"to score it anyway")
    show_progress = not quiet and err_console.is_terminal

    def run(handle: IO[str] | None) -> ScoreResult:
        return run_score_job(job, rollouts, items, bad_lines, handle, show_progress)

    # stdout carries results (the scored lines, or the --json document): anything else the run
    # prints goes to stderr meanwhile.
    guard_stdout = output == "-" or as_json
    with results_on_stdout() if guard_stdout else contextlib.nullcontext(sys.stdout) as stdout:
        if is_parquet(output):
            result = run(None)
            write_scores_any(output, result.scores)  # replaced atomically
        elif output == "-":
            result = run(stdout)
        else:
            with atomic_text(output) as handle:
                result = run(handle)
        check = ErrorRateCheck.of(result.summary, max_error_rate)
        if as_json:
            document = {**result.summary.to_dict(), "check": check.to_dict()}
            write_json(document, sys.stderr if output == "-" else stdout)
    if result.summary.extra.get("store_error"):  # after the output is written
        if as_json:  # the document says it already: one JSON document, the exit says it too
            raise typer.Exit(2)
        raise fail(str(result.summary.extra["store_error"]))
    if tracked is not None:
        tracked.finish(result.summary.extra.get("usage"), quiet=quiet or as_json)
    if not as_json and not quiet:
        from .render import render_summary  # rich's tables: only when a summary is shown

        render_summary(result.summary, err_console)
    if not check.passed:
        if not as_json:
            err_console.print(f"[red]{check.message}[/]")
        raise typer.Exit(EXIT_FAILED)


def _one_rollout_file(ctx: typer.Context, completion: str, answer: str | None,
                      prompt: str | None) -> Path:
    """A rollouts file of the one rollout given on the command line, removed when the command
    ends."""
    import tempfile

    text = sys.stdin.read() if completion == "-" else completion
    value: object = answer
    if answer is not None and answer.lstrip().startswith(("{", "[")):
        try:
            value = json.loads(answer)
        except json.JSONDecodeError as exc:
            raise fail(f"--answer looks like JSON but is not ({exc.msg} at character "
                       f"{exc.pos}); quote it as text or fix it") from None
    folder = tempfile.TemporaryDirectory(prefix="rewardsmith-one-")
    ctx.call_on_close(folder.cleanup)
    path = Path(folder.name) / "completion.jsonl"
    row = {"id": "completion", "group": "completion", "prompt": prompt or "",
           "completion": text, "answer": value}
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _trainer_name(name: str | None) -> str | None:
    from .advantages_cmd import TRAINER_NAMES

    if name is not None and name not in TRAINER_NAMES:
        raise fail(f"--trainer {name!r}: choose one of {', '.join(TRAINER_NAMES)}")
    return name


def _method_name(name: str) -> str:
    if name not in ("grpo", "dr_grpo", "rloo"):
        raise fail(f"--advantage {name!r}: choose grpo, dr_grpo or rloo")
    return name


@app.command("demo")
@handle_errors
def demo(
    output: str | None = typer.Option(None, "--output", "-o",
                                      help="Also write the scored JSONL here."),
    workers: int | None = typer.Option(None, "--workers", "-w", min=0),
) -> None:
    """Score the bundled sample of GSM8K-style rollouts with the bundled rubric.

    Example: rewardsmith demo -o demo-scored.jsonl
    """
    from rewardsmith.jobs.score import ScoreJob
    from rewardsmith.rubric import Rubric

    from ..files.atomic import atomic_text
    from .render import render_summary

    data = resources.files("rewardsmith") / "data"
    with resources.as_file(data / "demo_rubric.yaml") as rubric_path, \
            resources.as_file(data / "demo_rollouts.jsonl") as rollouts_path:
        console.print(f"[bold]rewardsmith demo[/]: scoring {rollouts_path.name} with "
                      f"{rubric_path.name}\n")
        console.print(rubric_path.read_text(encoding="utf-8"), markup=False, highlight=False,
                      soft_wrap=True)
        job = ScoreJob(Rubric.from_yaml(rubric_path), workers=workers)
        if output:
            with atomic_text(output) as handle:
                result = job.run(rollouts_path, handle)
        else:
            result = job.run(rollouts_path)
    render_summary(result.summary, console)
    console.print("\nfirst scored rollouts:")
    for score_ in result.scores[:4]:
        console.print(json.dumps(score_.to_dict()), markup=False, highlight=False, soft_wrap=True)
