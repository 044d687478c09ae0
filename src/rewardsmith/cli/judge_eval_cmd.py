"""``rewardsmith judge-eval``: how far a rubric's judges agree with hand-labeled cases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from ._app import app, console, err_console, handle_errors


@app.command("judge-eval")
@handle_errors
def judge_eval(
    cases: Path = typer.Argument(..., help="Hand-labeled cases: rollout JSONL lines with "
                                 "'human' (a number, or an object of numbers by criterion).",
                                 dir_okay=False),
    rubric: Path = typer.Option(..., "--rubric", "-r", help="Rubric YAML with judge: "
                                "components."),
    store: Path | None = typer.Option(None, "--store", help="Judge store file (default: the "
                                      "judge's store: key, else ./rewardsmith.db)."),
    refresh: bool = typer.Option(False, "--refresh", help="Ask the judges again instead of "
                                 "replaying recorded grades (the old ones are kept)."),
    threshold: float = typer.Option(0.5, "--threshold", help="Where a judge score passes "
                                    "when the human labels are 0 and 1."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON "
                                 "document."),
) -> None:
    """Agreement of each judged criterion with human labels: accuracy, Cohen's kappa,
    Spearman, confusion matrix, pair-order agreement, position-bias rate, self-consistency
    across samples, and the cost.

    Example: rewardsmith judge-eval labeled.jsonl --rubric rubric.yaml --json
    """
    from rewardsmith.rubric import Rubric

    from ..engine import Engine  # imported when used: it starts nothing until scoring
    from ..judge.label_report import eval_report, judged_components, read_cases

    chosen = Rubric.from_yaml(rubric)
    judged = judged_components(chosen)
    labeled = read_cases(cases)
    if refresh:
        for judge in {id(e.judge): e.judge for _, e in judged}.values():
            judge.refresh()
    with Engine(chosen, workers=0, store_path=None if store is None else str(store)) as engine:
        engine.check()
        scores = engine.score([case.rollout for case in labeled])
        usage = engine.usage()
    report = eval_report(chosen, labeled, scores, usage, binary_threshold=threshold)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    _render(report)


def _number(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _render(report: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table("criterion", "mode", "cases", "accuracy", "kappa", "spearman", "pair order",
                  "position bias", "sample spread", "unscored", title=f"judge-eval: "
                  f"{report['rubric']} ({report['cases']} cases)")
    for name, found in report["criteria"].items():
        consistency = found["self_consistency"]
        table.add_row(name, f"{found['mode']} x{found['samples']}", str(found["cases"]),
                      _number(found["accuracy"]), _number(found["kappa"]),
                      _number(found["spearman"]), _number(found["pair_order_agreement"]),
                      _number(found["position_bias_rate"]),
                      _number(consistency["mean_spread"] if consistency else None),
                      str(found["unscored"]))
    console.print(table)
    for name, found in report["criteria"].items():
        labels = [f"{label:g}" for label in found["labels"]]
        matrix = Table("human \\ judge", *labels, title=f"{name}: confusion matrix")
        for label, row in zip(labels, found["confusion"], strict=True):
            matrix.add_row(label, *(str(n) for n in row))
        console.print(matrix)
    for key, usage in report["cost"].items():
        err_console.print(f"{key}: {usage.get('calls', 0):.0f} calls, "
                          f"{usage.get('replayed', 0):.0f} replayed, "
                          f"{usage.get('tokens_in', 0) + usage.get('tokens_out', 0):.0f} tokens, "
                          f"cost {usage.get('cost', 0):.4f}")
