"""``rewardsmith advantages``: what a trainer will do with scored rewards, as a gate.

Exit status: 0 when sound, 1 when groups of equal rewards get non-zero advantages under the
chosen trainer, 2 on bad usage or input.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import InputError
from ._app import app, console, handle_errors

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
    from ..io import read_json_objects

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
_TRAINER_HELP = f"Formula to check: {', '.join(TRAINER_NAMES)}."


@app.command("advantages")
@handle_errors
def advantages(
    scored: Annotated[
        Path, typer.Argument(help="Scored JSONL (id, group, reward).", dir_okay=False)
    ],
    trainer: Annotated[str, typer.Option("--trainer", "-t", help=_TRAINER_HELP)] = "rewardsmith",
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
    from ..advantages import check_advantages

    report = check_advantages(
        rewards, groups, trainer=trainer, dtype=dtype, scale=scale, method=method, ids=ids
    )
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        report.render(console)
    raise typer.Exit(report.exit_code)
