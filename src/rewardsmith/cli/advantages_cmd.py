"""``rewardsmith advantages``: what a trainer will do with scored rewards, as a gate.

Without ``--trainer`` every trainer rewardsmith emulates is checked (a file that is sound under
rewardsmith's exact formula can still break verl's or TRL's float32 one).

Exit status: 0 when sound, 1 when groups of equal rewards get non-zero advantages under a checked
trainer, 2 on bad usage or input.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InputError
from ._app import app, console, handle_errors

if TYPE_CHECKING:
    from ..advantages.report import AdvantageReport

__all__ = ["advantages", "read_scored_rewards"]


def _reward(value: Any, *, source: str, line: int) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(
            f"'reward' must be a number or null, got {value!r}", source=source, line=line
        )
    number = float(value)
    if not math.isfinite(number):
        raise InputError(
            f"'reward' is {value!r}; mask the rollout with null instead", source=source, line=line
        )
    return number


def read_scored_rewards(path: str | Path) -> tuple[list[float | None], list[str], list[str]]:
    """Rewards, groups and ids from scored JSONL; an ``InputError`` names each bad line.

    Each line needs ``group`` and ``reward`` (a number, or null when masked); ``id`` defaults
    to the line number. Blank lines are skipped.
    """
    source = str(path)
    rewards: list[float | None] = []
    groups: list[str] = []
    ids: list[str] = []
    from rewardsmith.files.rollouts import read_json_objects

    for number, data in read_json_objects(path):
        for key in ("group", "reward"):
            if key not in data:
                raise InputError(f"missing {key!r}", source=source, line=number)
        rewards.append(_reward(data["reward"], source=source, line=number))
        groups.append(str(data["group"]))
        ids.append(str(data.get("id", f"line {number}")))
    return rewards, groups, ids


# Named here so that help does not import numpy; a test keeps it equal to trainer_names().
TRAINER_NAMES = ("verl", "trl", "slime", "miles", "openrlhf", "nemo", "rewardsmith")
_TRAINER_HELP = (f"Formula to check: {', '.join(TRAINER_NAMES)} (default: every one; "
                 "rewardsmith's own with --method or --scale).")


@app.command("advantages")
@handle_errors
def advantages(
    scored: Annotated[
        Path, typer.Argument(help="Scored JSONL (id, group, reward).", dir_okay=False)
    ],
    trainer: Annotated[str | None, typer.Option("--trainer", "-t", help=_TRAINER_HELP)] = None,
    dtype: Annotated[
        str, typer.Option("--dtype", help="float32 (as trainers run) or float64.")
    ] = "float32",
    method: Annotated[
        str | None,
        typer.Option("--method", help="rewardsmith's own method: grpo, dr_grpo or rloo."),
    ] = None,
    scale: Annotated[
        str | None,
        typer.Option("--scale", help="std scaling: group, batch or none (trl and rewardsmith)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check the advantages a trainer will compute: exit 1 when equal groups get non-zero ones.

    Example: rewardsmith advantages scored.jsonl --trainer verl
    """
    rewards, groups, ids = read_scored_rewards(scored)
    if trainer is None and method is None and scale is None:
        from ..advantages.report import check_trainers

        _every_trainer(check_trainers(rewards, groups, TRAINER_NAMES, dtype=dtype, ids=ids),
                       as_json=as_json)
    from ..advantages import check_advantages

    report = check_advantages(rewards, groups, trainer=trainer or "rewardsmith", dtype=dtype,
                              scale=scale, method=method, ids=ids)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        report.render(console)
    raise typer.Exit(report.exit_code)


def _every_trainer(reports: dict[str, AdvantageReport], *, as_json: bool) -> None:
    """Print one line per trainer, then the whole report of the first broken one; exit."""
    exit_code = max(report.exit_code for report in reports.values())
    if as_json:
        typer.echo(json.dumps({"trainers": {name: report.to_dict()
                                            for name, report in reports.items()},
                               "exit_code": exit_code}, indent=2))
        raise typer.Exit(exit_code)
    from rich.table import Table

    table = Table(title="Advantages under every trainer (a broken group: equal rewards, "
                  "non-zero advantages)")
    for column in ("trainer", "dtype", "broken groups", "rollouts in them",
                   "worst |advantage|", "zero-variance groups"):
        table.add_column(column, justify="left" if column in ("trainer", "dtype") else "right")
    for name, report in reports.items():
        style = "bold red" if report.broken_groups else "green"
        worst = f"{report.worst_magnitude:.3g}" if report.broken_groups else "-"
        table.add_row(name, report.dtype, f"[{style}]{report.broken_groups}[/{style}]",
                      str(report.broken_rollouts), worst, str(report.zero_variance_groups))
    console.print(table)
    broken = [report for report in reports.values() if report.broken_groups]
    if broken:
        names = ", ".join(report.trainer for report in broken)
        console.print(f"broken under {names}; the first in full:", markup=False,
                      highlight=False)
        broken[0].render(console)
    raise typer.Exit(exit_code)
