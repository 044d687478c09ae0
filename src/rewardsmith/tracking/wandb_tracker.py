"""Weights & Biases: a run of its own, or the run a trainer already started.

Offline use (``WANDB_MODE=offline``) writes the run under ``<directory>/wandb/`` for a later
``wandb sync``; every other W&B setting (``WANDB_*`` variables, a logged-in key) applies as
usual.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError, LoadError
from .base import TrackerBase, TrackingError

__all__ = ["ATTACHED_PREFIX", "WandbTracker"]

# Keys go under this prefix in a run a trainer owns, beside the trainer's own keys.
ATTACHED_PREFIX = "rewardsmith/"


def _wandb() -> Any:
    try:
        import wandb
    except ImportError as exc:
        raise LoadError("logging to Weights & Biases needs wandb: "
                        "pip install 'rewardsmith[wandb]'") from exc
    return wandb


class WandbTracker(TrackerBase):
    """Logs each step with ``run.log(metrics, step=step)``.

    When a W&B run is already active in this process (a trainer started it) and ``attach`` is
    true, the metrics go into that run under ``rewardsmith/``, with ``rewardsmith/step`` as
    their x-axis: the trainer keeps its own step counter, which W&B requires to only go up,
    and the run is left for the trainer to finish. Otherwise a new run is started (never
    finishing one that is active) and finished by :meth:`close`.
    """

    name = "wandb"

    def __init__(self, project: str | None = None, run: str | None = None,
                 directory: str | os.PathLike[str] | None = None,
                 config: Mapping[str, Any] | None = None, *, attach: bool = True):
        super().__init__()
        wandb = _wandb()
        active = wandb.run if attach else None
        self.attached = active is not None
        if active is not None:
            self.prefix = ATTACHED_PREFIX
            self._run: Any = active
            active.define_metric(f"{self.prefix}step")
            active.define_metric(f"{self.prefix}*", step_metric=f"{self.prefix}step")
            return
        self.prefix = ""
        if directory is not None:
            try:
                Path(directory).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create the W&B directory {str(directory)!r}: "
                                  f"{exc.strerror or exc}") from exc
        try:
            # console="off": W&B must not wrap stdout, which may be carrying scored lines.
            self._run = wandb.init(project=project, name=run,
                                   dir=None if directory is None else str(directory),
                                   config=dict(config or {}), reinit="create_new",
                                   settings=wandb.Settings(console="off"))
        except Exception as exc:  # W&B raises its own types (no login, no network...)
            raise TrackingError(f"wandb: cannot start a run: {exc}") from exc

    @property
    def run_id(self) -> str:
        return str(self._run.id)

    def _write(self, metrics: dict[str, float], step: int) -> None:
        if self.attached:
            row = {f"{self.prefix}{key}": value for key, value in metrics.items()}
            row[f"{self.prefix}step"] = float(step)
            self._run.log(row)
        else:
            self._run.log(metrics, step=step)

    def _finish(self) -> None:
        if not self.attached:
            self._run.finish()
