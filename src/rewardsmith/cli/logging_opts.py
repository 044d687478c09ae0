"""``--log-to`` and its options, shared by ``score`` and ``rescore``: the run's statistics go to
W&B, MLflow or TensorBoard as one step.

Light at import (typer and the standard library only): the tracking package, and through it
each tracker's library, is imported when a run is logged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import typer

from ._app import err_console, fail

if TYPE_CHECKING:
    from ..types import Score

__all__ = ["LOG_DIR_OPTION", "LOG_PROJECT_OPTION", "LOG_RUN_OPTION", "LOG_STEP_OPTION",
           "LOG_TO_OPTION", "RunLogging", "tracker_names"]

TRACKERS_HELP = "wandb, mlflow, tensorboard or jsonl (a step log)"

LOG_TO_OPTION: Any = typer.Option(
    None, "--log-to", help=f"Log the run's statistics as one step to a tracker: {TRACKERS_HELP} "
    "(repeat, or separate with commas, for several). See docs/tracking.md.")
LOG_PROJECT_OPTION: Any = typer.Option(
    None, "--log-project", help="W&B project, MLflow experiment, or a TensorBoard folder "
    "under --log-dir.")
LOG_RUN_OPTION: Any = typer.Option(None, "--log-run", help="The run's name in the tracker.")
LOG_DIR_OPTION: Any = typer.Option(
    None, "--log-dir", help="Where trackers write: W&B's directory, an MLflow tracking URI or "
    "store directory, the TensorBoard log directory (default: runs).")
LOG_STEP_OPTION: Any = typer.Option(None, "--log-step", min=0,
                                    help="The step to log at (default: 0).")


def tracker_names(values: Sequence[str] | None, option: str = "--log-to") -> list[str]:
    """Tracker names from a repeatable option whose values may also be comma-separated;
    an unknown name is a usage error naming the choices."""
    if not values:
        return []  # nothing asked: the tracking package is not imported at all
    from ..tracking import TRACKER_NAMES

    names: list[str] = []
    for value in values or []:
        for name in value.split(","):
            name = name.strip().lower()
            if not name:
                continue
            if name not in TRACKER_NAMES:
                raise fail(f"{option} {name!r}: choose {TRACKERS_HELP}")
            if name not in names:
                names.append(name)
    return names


@dataclass
class RunLogging:
    """What ``--log-to`` asked for: collects the run's scores as they stream out (``observe``
    fits ``ScoreJob.post_process``), then logs them as one step (``finish``)."""

    names: list[str]
    project: str | None = None
    run: str | None = None
    directory: str | None = None
    step: int | None = None
    _stats: Any = field(default=None, repr=False)

    @classmethod
    def from_options(cls, log_to: Sequence[str] | None, project: str | None = None,
                     run: str | None = None, directory: str | None = None,
                     step: int | None = None) -> RunLogging | None:
        """None without ``--log-to``. Checks the names and that each tracker's library is
        installed now, before anything is scored or spent."""
        names = tracker_names(log_to)
        if not names:
            given = [flag for flag, value in (("--log-project", project), ("--log-run", run),
                                              ("--log-dir", directory), ("--log-step", step))
                     if value is not None]
            if given:
                verb = "needs" if len(given) == 1 else "need"
                raise fail(f"{', '.join(given)} {verb} --log-to ({TRACKERS_HELP})")
            return None
        from ..tracking import StepStats, check_available

        check_available(names)
        return cls(names, project, run, directory, step, StepStats())

    def observe(self, scores: Sequence[Score]) -> None:
        """Add scores (a group at a time, or all at once) to the step."""
        self._stats.add(scores)

    def finish(self, usage: Mapping[str, Mapping[str, float]] | None = None, *,
               quiet: bool = False) -> dict[str, float]:
        """Log what was observed as one step (with the run's judge usage, when it had judges);
        returns the metrics logged."""
        from ..tracking import open_trackers

        metrics: dict[str, float] = self._stats.metrics(usage)
        with open_trackers(self.names, project=self.project, run=self.run,
                           directory=self.directory) as trackers:
            step = trackers.log_metrics(metrics, step=self.step)
        if not quiet:
            err_console.print(f"logged {len(metrics)} statistics at step {step} to "
                              f"{', '.join(self.names)}", highlight=False)
        return metrics

    def log_scores(self, scores: Sequence[Score],
                   usage: Mapping[str, Mapping[str, float]] | None = None, *,
                   quiet: bool = False) -> dict[str, float]:
        """``observe`` then ``finish``: for a run whose scores come back all at once."""
        self.observe(scores)
        return self.finish(usage, quiet=quiet)
