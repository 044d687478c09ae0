"""Rich tables for summaries (the face layer's only formatting code)."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from rewardsmith.jobs.summary import (
    ComponentStats,
    RunSummary,
    money,
    position_bias_warnings,
)

__all__ = ["render_summary"]


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def render_summary(summary: RunSummary, console: Console) -> None:
    table = Table(title=f"rubric {summary.rubric_name} (id {summary.rubric_id})",
                  title_justify="left", box=box.SIMPLE_HEAD)
    width = max([len("component")] + [len(c.name) for c in summary.components])
    table.add_column("component", justify="left", min_width=min(width, 40), overflow="fold")
    for column in ("mean", "std", "min", "max", "n", "errors", "timeouts", "masked"):
        table.add_column(column, justify="right")

    def row(stats: ComponentStats, *, bold: bool = False) -> None:
        name = f"[bold]{stats.name}[/]" if bold else stats.name
        table.add_row(name, _num(stats.mean), _num(stats.std), _num(stats.minimum),
                      _num(stats.maximum), str(stats.count), str(stats.errors),
                      str(stats.timeouts), str(stats.masked))

    for stats in summary.components:
        row(stats)
    row(summary.reward, bold=True)
    console.print(table)
    statuses = ", ".join(f"{k} {v}" for k, v in summary.statuses.items())
    console.print(f"rollouts {summary.rollouts} in {summary.groups} groups: {statuses}")
    console.print(
        f"groups with zero reward variance (they teach nothing): "
        f"{summary.zero_variance_groups} of {summary.groups}"
    )
    if summary.bad_lines:
        console.print(f"[yellow]skipped {len(summary.bad_lines)} bad input line(s):[/]")
        for line in summary.bad_lines[:20]:
            console.print(f"  {line}", markup=False)
        if len(summary.bad_lines) > 20:
            console.print(f"  ... and {len(summary.bad_lines) - 20} more")
    checks = summary.extra.get("advantages") or {}
    if summary.extra.get("advantages_error"):
        console.print(f"[yellow]warning:[/] {summary.extra['advantages_error']}", markup=True,
                      highlight=False)
    broken = {name: c for name, c in checks.items() if c.get("broken_groups")}
    if broken:
        names = ", ".join(f"{n} ({c['broken_groups']} groups, up to {c['worst_magnitude']:.3g})"
                          for n, c in broken.items())
        step = next(iter(broken.values())).get("suggested_step")
        console.print(f"[yellow]warning:[/] groups whose rewards are all equal get non-zero "
                      f"advantages under {names}; add 'quantize: {step}' to the rubric "
                      f"(see 'rewardsmith advantages')")
    elif checks:
        console.print(f"advantages: equal-reward groups get exactly 0 under "
                      f"{', '.join(checks)}")
    _render_timing(summary, console)
    for name, u in (summary.extra.get("usage") or {}).items():
        line = (f"{name}: {u.get('calls', 0):.0f} calls ({u.get('failed', 0):.0f} failed, "
                f"{u.get('retries', 0):.0f} retries), {u.get('replayed', 0):.0f} grades "
                f"replayed, {u.get('shared', 0):.0f} shared, tokens {u.get('tokens_in', 0):.0f} "
                f"in / {u.get('tokens_out', 0):.0f} out, cost {money(u.get('cost', 0))}")
        if u.get("failed_replayed"):
            line += (f", {u['failed_replayed']:.0f} failed grades replayed (failed too often; "
                     f"--refresh asks again)")
        if u.get("budget_exhausted"):
            line += f" [yellow]budget spent: {u.get('unscored', 0):.0f} grades unscored[/]"
        console.print(line)
    for warning in position_bias_warnings(summary.extra.get("position_bias") or {}):
        console.print(f"[yellow]warning:[/] {warning}")
    console.print(
        f"{summary.seconds:.2f} s, {summary.rollouts_per_second:,.0f} rollouts/s", style="dim"
    )


def _render_timing(summary: RunSummary, console: Console) -> None:
    """Where the time went, for a run scored with ``--timing``: per component, and the
    slowest calls (the slow reward and the slow rollouts)."""
    timing = summary.extra.get("timing") or {}
    if not timing:
        return
    table = Table(title="call time per component (seconds)", title_justify="left",
                  box=box.SIMPLE_HEAD)
    table.add_column("component")
    for column in ("calls", "p50", "p99", "max", "total"):
        table.add_column(column, justify="right")
    for name, t in sorted(timing.items(), key=lambda item: -item[1]["total"]):
        table.add_row(name, f"{t['calls']:,.0f}", f"{t['p50']:.3g}", f"{t['p99']:.3g}",
                      f"{t['max']:.3g}", f"{t['total']:.3g}")
    console.print(table)
    slowest = summary.extra.get("slowest") or []
    if slowest:
        console.print("slowest calls: " + ", ".join(
            f"{s['id']} ({s['component']}, {s['seconds']:.3g} s)" for s in slowest[:5]),
            markup=False, highlight=False, soft_wrap=True)
