"""Trackers by name (``wandb``, ``mlflow``, ``tensorboard``, ``jsonl``), opened from one set of
options.

The same three options mean the nearest thing in each tracker:

===========  ===================  =====================  ===============================
option       wandb                mlflow                 tensorboard
===========  ===================  =====================  ===============================
project      project              experiment             a folder under the directory
run          run name             run name               the run's folder
directory    where ``wandb/`` is  tracking URI or store  log directory (default ``runs``)
===========  ===================  =====================  ===============================

``jsonl`` (a step log, nothing to install) takes them as TensorBoard does: the run's file is
``directory/project/run.jsonl``.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, LoadError
from .base import Tracker, Trackers

__all__ = ["TRACKER_NAMES", "check_available", "open_tracker", "open_trackers"]


@dataclass(frozen=True)
class _Kind:
    module: str  # what must be importable
    extra: str  # the rewardsmith extra that installs it
    shared_folder: str  # its folder inside a directory that several trackers share
    opener: Callable[[str | None, str | None, str | None], Tracker]


def _wandb(project: str | None, run: str | None, directory: str | None) -> Tracker:
    from .wandb_tracker import WandbTracker

    return WandbTracker(project=project, run=run, directory=directory)


def _mlflow(project: str | None, run: str | None, directory: str | None) -> Tracker:
    from .mlflow_tracker import MlflowTracker

    return MlflowTracker(experiment=project, run=run, tracking_uri=directory)


def _tensorboard(project: str | None, run: str | None, directory: str | None) -> Tracker:
    from .tensorboard_tracker import TensorBoardTracker

    root = Path(directory or "runs")
    return TensorBoardTracker(root / project if project else root, run=run)


def _jsonl(project: str | None, run: str | None, directory: str | None) -> Tracker:
    from .jsonl_tracker import JsonlTracker

    root = Path(directory or "runs")
    return JsonlTracker(directory=root / project if project else root, run=run)


_KINDS: dict[str, _Kind] = {
    "wandb": _Kind("wandb", "wandb", "", _wandb),  # W&B makes its own wandb/ folder
    "mlflow": _Kind("mlflow", "mlflow", "mlruns", _mlflow),
    "tensorboard": _Kind("tensorboardX", "tensorboard", "tensorboard", _tensorboard),
    "jsonl": _Kind("json", "", "jsonl", _jsonl),  # the standard library: always there
}
TRACKER_NAMES = tuple(_KINDS)


def _kind(name: str) -> _Kind:
    found = _KINDS.get(name)
    if found is None:
        raise ConfigError(f"unknown tracker {name!r}: choose {', '.join(TRACKER_NAMES)}")
    return found


def check_available(names: Sequence[str]) -> None:
    """Fail now, before any scoring, when a tracker is unknown or its library is missing."""
    for name in names:
        kind = _kind(name)
        if importlib.util.find_spec(kind.module) is None:
            raise LoadError(f"logging to {name} needs the {kind.module} package, which is not "
                            f"installed: pip install 'rewardsmith[{kind.extra}]'")


def open_tracker(name: str, *, project: str | None = None, run: str | None = None,
                 directory: str | os.PathLike[str] | None = None) -> Tracker:
    """One tracker by name (see the module docstring for what the options mean in each)."""
    kind = _kind(name)
    return kind.opener(project, run, None if directory is None else os.fspath(directory))


def open_trackers(names: Sequence[str], *, project: str | None = None, run: str | None = None,
                  directory: str | os.PathLike[str] | None = None) -> Trackers:
    """Every named tracker, fed the same steps. A name given twice is opened once. When one
    fails to open, those already opened are closed before the error is raised.

    A directory (not a URI) that several trackers share gets a folder per tracker: ``wandb/``,
    ``mlruns/`` and ``tensorboard/``, so no tracker finds another's files in its own store."""
    wanted = list(dict.fromkeys(names))
    if not wanted:
        raise ConfigError("no tracker named: give one or more of " + ", ".join(TRACKER_NAMES))
    check_available(wanted)
    opened: list[Tracker] = []
    try:
        for name in wanted:
            where = directory
            if directory is not None and len(wanted) > 1 and "://" not in os.fspath(directory):
                where = Path(directory) / _KINDS[name].shared_folder
            opened.append(open_tracker(name, project=project, run=run, directory=where))
    except BaseException:
        Trackers(opened).close()
        raise
    return Trackers(opened)
