"""The report's "Training steps" section: the reward curve as a plot and a table."""

from __future__ import annotations

from .page import Section, count, esc, figure, number, share, table
from .plots import Plotter
from .steps import StepCurve

__all__ = ["step_section"]

_OPEN_ROWS = 30  # a longer table is folded under its plot
_POINTS = 20  # the smoothing window of a long run: a twentieth of its steps


def step_section(curve: StepCurve, plots: Plotter) -> Section:
    rows = curve.rows
    window = max(1, len(rows) // _POINTS)
    series = [("reward", [row.reward for row in rows]),
              *[(name, [row.components.get(name) for row in rows]) for name in curve.components]]
    caption = "Mean reward and mean of each component per step, over the values present."
    if window > 1:
        caption += f" Faint: each step; lines: the mean of the last {window} steps."
    first, last = rows[0], rows[-1]
    intro = (f'<p class="note">{count(len(rows))} steps ({first.step} to {last.step}) from '
             + ", ".join(f"<code>{esc(source)}</code>" for source in curve.sources[:3])
             + (f" and {count(len(curve.sources) - 3)} more files" if len(curve.sources) > 3
                else "")
             + f"; mean reward {number(first.reward)} at the first step, "
             f"{number(last.reward)} at the last. A masked or failed value is left out of its "
             "step's mean, as the trackers log it.</p>")
    body = intro + figure(plots.curves([row.step for row in rows], series, window=window,
                                       ylabel="mean per step"), caption, "steps")
    headers = ["step", "rollouts", "no reward", "zero-variance groups", "reward",
               *curve.components]
    cells = ([str(row.step), count(row.rollouts), count(row.without_reward),
              share(row.zero_variance_groups, row.ranked_groups), number(row.reward),
              *[number(row.components.get(name)) for name in curve.components]]
             for row in rows)
    grid = table(headers, cells, numeric=[True] * len(headers))
    if len(rows) > _OPEN_ROWS:
        grid = f"<details><summary>The {count(len(rows))} steps as a table</summary>{grid}</details>"
    return Section("steps", "Training steps", body + grid)
