"""``rewardsmith test``: a reward's hand-labeled cases, edge cases and hack probes, as a gate.

Exit status: 0 when every check passes, 1 when any fails, 2 when the reward, the rubric or the
cases file cannot be loaded (or the options are wrong).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..testing.kind_names import KIND_NAMES
from ._app import app, console, err_console, fail, handle_errors
from .score_cmd import parse_params
from .streams import results_on_stdout

if TYPE_CHECKING:
    from ..testing import TestReport

__all__ = ["test_reward"]


def _parse_range(text: str) -> tuple[float, float]:
    low_text, sep, high_text = text.replace(":", ",").partition(",")
    try:
        if not sep:
            raise ValueError
        low, high = float(low_text), float(high_text)
    except ValueError:
        raise fail(f"--range {text!r}: expected LOW,HIGH such as 0,1") from None
    if not low <= high:
        raise fail(f"--range {text!r}: LOW must not be above HIGH")
    return low, high


def _init(target: str, cases: Path | None) -> None:
    from ..testing import write_starter_cases
    from ..testing.cases import starter_path

    path = write_starter_cases(cases or starter_path(target))
    console.print(f"wrote {path}: ten cases to edit (correct, wrong, empty, whitespace, "
                  f"truncated, long, unicode, missing label, almost right, hack).", markup=False,
                  highlight=False)
    console.print(f"Set each 'expected' to the reward you want, then run: rewardsmith test "
                  f"{target if ':' in target else target + ':YOUR_FUNCTION'} --cases {path}",
                  markup=False, highlight=False)


@app.command("test")
@handle_errors
def test_reward(
    reward: str | None = typer.Argument(
        None, help="A built-in name, module:func, module.func, path/file.py:func, or a rubric "
        "file (.yaml/.yml)."),
    cases: Path | None = typer.Option(None, "--cases", "-c", dir_okay=False,
                                      help="Hand-labeled cases (JSONL with 'expected')."),
    param: list[str] | None = typer.Option(None, "--param", "-p", help="k=v for the reward."),
    timeout: float | None = typer.Option(None, "--timeout", min=0.001,
                                         help="Seconds per reward call (default: as a run)."),
    kind: list[str] | None = typer.Option(
        None, "--kind", "-k", help=f"What the reward grades, for its probes: "
        f"{', '.join(KIND_NAMES)}; 'auto' to detect, 'none' for no probes. Repeatable."),
    value_range: str | None = typer.Option(None, "--range",
                                           help="Allowed values LOW,HIGH (e.g. 0,1)."),
    no_edges: bool = typer.Option(False, "--no-edges", help="Skip the edge cases."),
    no_probes: bool = typer.Option(False, "--no-probes", help="Skip the hack probes."),
    workers: int | None = typer.Option(None, "--workers", "-w", min=1,
                                       help="Worker processes (default 2)."),
    group_rm: bool = typer.Option(
        False, "--group-rm", help="Call a slime/Miles custom_rm as slime's --group-rm does: "
        "custom_rm(args, samples), one reward per sample back."),
    reward_key: str | None = typer.Option(
        None, "--reward-key", help="As slime's --reward-key: the custom_rm returns a dict and "
        "the reward is this key of it."),
    failures_only: bool = typer.Option(False, "--failures-only",
                                       help="Show only the checks that failed."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    init: str | None = typer.Option(
        None, "--init", help="Write a starter cases file for this reward file "
        "(my_rewards.py -> my_rewards.cases.jsonl, or --cases PATH) and exit."),
) -> None:
    """Test a reward before a run: your cases, edge cases and hack probes.

    Example: rewardsmith test my_rewards.py:score --cases my_rewards.cases.jsonl

    A slime/Miles reward written as custom_rm(args, sample) is called as slime calls it; add
    --group-rm and --reward-key KEY as in the trainer's own flags.
    """
    if init is not None:
        if reward is not None:
            raise fail("--init takes the reward file itself: rewardsmith test --init my_rewards.py")
        _init(init, cases)
        return
    if reward is None:
        raise fail("missing REWARD: a built-in name, module:func, path/file.py:func or a "
                   "rubric .yaml (or --init my_rewards.py for a starter cases file)")
    from ..testing import run_reward_tests

    def run() -> TestReport:
        return run_reward_tests(
            reward,
            cases=cases,
            params=parse_params(param or []) or None,
            timeout=timeout,
            edges=not no_edges,
            probes=not no_probes,
            kinds=kind or None,
            value_range=_parse_range(value_range) if value_range is not None else None,
            workers=workers,
            group_rm=True if group_rm else None,
            reward_key=reward_key,
        )

    if as_json:
        # The report is the only thing on stdout: what the reward prints goes to stderr.
        with results_on_stdout() as out:
            report = run()
            out.write(report.to_json().rstrip("\n") + "\n")
        raise typer.Exit(report.exit_code)
    report = run()
    report.render(console, only_failures=failures_only)
    if not report.passed:
        err_console.print(f"[bold red]{len(report.failed)} check(s) failed[/]")
    raise typer.Exit(report.exit_code)
