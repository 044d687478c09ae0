"""``rewardsmith list``: every built-in reward with a one-line description."""

from __future__ import annotations

import json

import typer

from ._app import app, console


@app.command("list")
def list_rewards(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """List the built-in rewards.

    Example: rewardsmith list
    """
    from rich.table import Table

    from ..rewards import all_builtins

    builtins = all_builtins()
    if as_json:
        rows = [{"name": b.name, "kind": b.kind, "description": b.description} for b in builtins]
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table("name", "kind", "description")
    for item in builtins:
        table.add_row(item.name, item.kind, item.description)
    console.print(table)
