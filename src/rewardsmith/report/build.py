"""``build_report``: a scored file (and optionally its store, a baseline file, its rollouts)
in, one self-contained HTML page out."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rewardsmith.jobs.summary import position_bias_warnings

from ..errors import ConfigError, InputError
from ..files import atomic_text, refuse_output_over_input
from .analysis import (
    advantage_stats,
    distribution,
    emulated_advantages,
    group_index,
    group_stats,
    latency,
    status_counts,
)
from .compare import compare
from .page import count, esc, page
from .plots import Plotter
from .scored import read_scored
from .sections import ReportData, linked_ids, sections
from .steps import StepCurve, curve_for, is_step_log
from .store_info import read_store_facts, rollout_texts

__all__ = ["build_report", "collect", "render"]


def collect(scored: str | Path, *, store: str | Path | None = None, run: str | None = None,
            compare_with: str | Path | None = None, rollouts: str | Path | None = None,
            warnings: Sequence[str] = (), top: int = 20,
            steps: Sequence[str | Path] | StepCurve | None = None) -> ReportData:
    """Read the inputs and compute every number the page shows (no HTML yet)."""
    if top < 0:
        raise ConfigError(f"top must be 0 or more, got {top}")
    if store is not None and rollouts is not None:
        raise ConfigError("give the rollouts' text either from a store or from a rollouts "
                          "file, not both")
    if is_step_log(scored):
        raise InputError("a step log holds each step's figures, not the rollouts the page "
                         "shows: give the run's scored file, with the log as --steps "
                         "(rewardsmith report LOG alone prints its table)", source=str(scored))
    columns = read_scored(scored)
    index = group_index(columns.groups)
    advantages = emulated_advantages(columns.reward, index)
    facts = read_store_facts(store, columns, run) if store is not None else None
    data = ReportData(
        scored=columns,
        statuses=status_counts(columns),
        reward=distribution("reward", columns.reward),
        components=[distribution(name, values) for name, values in columns.components.items()],
        groups=group_stats(columns.reward, index),
        advantages=advantage_stats(columns.reward, index, advantages),
        file_advantage=distribution("advantage", columns.advantage),
        latency=latency(columns, top=top),
        store=facts,
        warnings=[*(str(w) for w in warnings), *position_bias_warnings(columns.position_bias)],
        steps=curve_for(scored, steps),
    )
    if compare_with is not None:
        other = read_scored(compare_with)
        other_index = group_index(other.groups)
        data.other = other
        data.comparison = compare(columns, other, here_groups=index, other_groups=other_index,
                                  here_advantages=advantages,
                                  other_advantages=emulated_advantages(other.reward,
                                                                       other_index),
                                  top=top)
    ids = linked_ids(data)
    if facts is not None:
        data.texts = rollout_texts(ids, store=facts.path, run=facts.run.id)
        data.text_source = "store"
    elif rollouts is not None:
        data.texts = rollout_texts(ids, rollouts=rollouts)
        data.text_source = "rollouts"
    return data


def render(data: ReportData, *, title: str | None = None) -> str:
    """The HTML page for ``data``."""
    plots = Plotter()
    parts = sections(data, plots)
    name = Path(data.scored.source).name
    subtitle = (f"{count(len(data.scored))} rollouts in <code>{esc(data.scored.source)}</code>"
                " &middot; made by rewardsmith report")
    return page(title or f"Rewards: {name}", subtitle, parts)


def build_report(scored: str | Path, *, output: str | Path | None = None,
                 store: str | Path | None = None, run: str | None = None,
                 compare_with: str | Path | None = None, rollouts: str | Path | None = None,
                 warnings: Sequence[str] = (), top: int = 20, title: str | None = None,
                 steps: Sequence[str | Path] | StepCurve | None = None) -> str:
    """The HTML report of a scored file, as a string; also written (atomically) to ``output``
    when given.

    ``store``: the store the file was scored with (rubric, judge calls, rollouts' text), and
    ``run`` its run (default: the latest run over the same rollouts). ``compare_with``: a
    baseline scored file of the same rollouts (paired by id). ``rollouts``: the rollouts file,
    for their text when there is no store. ``warnings``: lines shown in a Warnings section at
    the top. ``top``: how many slowest and most-changed rollouts to list. ``steps``: scored
    files of successive training steps (or a ``StepCurve`` already read) for the Training
    steps section, the reward and each component's mean per step; without them the section
    is drawn when the scored file's own lines carry ``step``.

    Raises ``InputError`` for a bad scored line (file and line named) or steps out of
    order, ``StoreError`` for a store without such a run, ``ConfigError`` for bad options, an
    output that is one of the inputs, or matplotlib missing.
    """
    if output is not None:
        if Path(output).is_dir():
            raise ConfigError(f"the output {str(output)!r} is a folder: name a file")
        refuse_output_over_input(output, [("the scored file", scored),
                                          ("the baseline file", compare_with),
                                          ("the store", store), ("the rollouts file", rollouts),
                                          *[("a steps file", path) for path in
                                            (() if isinstance(steps, StepCurve)
                                             else steps or ())]])
    data = collect(scored, store=store, run=run, compare_with=compare_with, rollouts=rollouts,
                   warnings=warnings, top=top, steps=steps)
    text = render(data, title=title)
    if output is not None:
        with atomic_text(output) as handle:
            handle.write(text)
    return text

