"""``rewardsmith check-env``: run inside the trainer's environment before launch, it loads the
rubric and the reward the trainer will call, as the trainer will.

Exit status: 0 when everything loads, 1 when something does not, 2 on bad usage.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import typer

from ._app import app, console, fail, handle_errors

if TYPE_CHECKING:
    from ..integrations.preflight import EnvReport

__all__ = ["check_env"]


def _runtime_env(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"--runtime-env-json: not valid JSON ({exc.msg} at character {exc.pos})") \
            from None
    if not isinstance(value, dict):
        raise fail("--runtime-env-json: expected a JSON object such as "
                   '\'{"env_vars": {"PYTHONPATH": "/root/lab"}}\'')
    return value


def _render(report: EnvReport) -> None:
    from rich.table import Table

    table = Table(title=f"Checked in {report.where}")
    table.add_column("")
    table.add_column("what")
    table.add_column("found", overflow="fold")
    for finding in report.findings:
        mark = "[green]ok[/green]" if finding.ok else "[bold red]FAIL[/bold red]"
        table.add_row(mark, finding.what, finding.detail)
    console.print(table)
    verdict = "everything loads" if report.ok else "something does not load (see FAIL above)"
    console.print(verdict, markup=False, highlight=False)


@app.command("check-env")
@handle_errors
def check_env(
    rubric: str | None = typer.Option(
        None, "--rubric", "-r", help="Rubric YAML or reward name (default: REWARDSMITH_RUBRIC, "
        "as the trainer adapters read it)."),
    custom_rm_path: str | None = typer.Option(
        None, "--custom-rm-path", help="The reward path given to slime/Miles, imported as they "
        "import it (e.g. rewardsmith.integrations.slime.custom_rm or my_rewards.custom_rm)."),
    ray: bool = typer.Option(False, "--ray", help="Check inside a Ray task (the trainer's "
                             "workers) instead of this process."),
    runtime_env_json: str | None = typer.Option(
        None, "--runtime-env-json", help="With --ray: the runtime env the trainer is given "
        "(the same JSON as slime's --runtime-env-json)."),
    address: str | None = typer.Option(None, "--address", help="With --ray: the cluster "
                                       "(default: RAY_ADDRESS, else a local one)."),
    as_json: bool = typer.Option(False, "--json", help="Print the findings as JSON."),
) -> None:
    """Check, in the trainer's environment, that the rubric and the reward load.

    Example: rewardsmith check-env --custom-rm-path rewardsmith.integrations.slime.custom_rm
    --ray --runtime-env-json '{"env_vars": {"REWARDSMITH_RUBRIC": "/root/lab/rubric.yaml",
    "PYTHONPATH": "/root/lab"}}'
    """
    from ..integrations.preflight import check_environment, check_in_ray

    if (runtime_env_json is not None or address is not None) and not ray:
        raise fail("--runtime-env-json and --address go with --ray")
    if ray:
        report = check_in_ray(rubric, custom_rm_path, runtime_env=_runtime_env(runtime_env_json),
                              address=address)
    else:
        report = check_environment(rubric, custom_rm_path)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        _render(report)
    raise typer.Exit(0 if report.ok else 1)
