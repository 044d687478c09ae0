"""TensorBoard: scalar event files written with ``tensorboardX``.

``tensorboardX`` writes the same event files TensorBoard reads, needing only numpy and protobuf:
no TensorFlow and no PyTorch, which a CPU-only scoring job should not have to install.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

from ..errors import ConfigError, LoadError
from .base import TrackerBase

__all__ = ["TensorBoardTracker", "default_run_name"]


def default_run_name() -> str:
    """``rewardsmith-<date>-<time>-<host>-<pid>``: unique per process, so processes that log
    into one directory (one per trainer rank) never share an event file's run."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"rewardsmith-{stamp}-{socket.gethostname()}-{os.getpid()}"


class TensorBoardTracker(TrackerBase):
    """Scalars under ``directory/run`` (``tensorboard --logdir directory`` shows them).

    Each step is flushed to disk when logged, so a crash loses no step already logged.
    """

    name = "tensorboard"

    def __init__(self, directory: str | os.PathLike[str] = "runs", run: str | None = None):
        super().__init__()
        try:
            from tensorboardX import SummaryWriter
        except ImportError as exc:
            raise LoadError("logging to TensorBoard needs tensorboardX: "
                            "pip install 'rewardsmith[tensorboard]'") from exc
        self.logdir = Path(directory) / (run or default_run_name())
        try:
            self._writer: Any = SummaryWriter(logdir=str(self.logdir))
        except OSError as exc:
            raise ConfigError(f"cannot write TensorBoard events under {str(self.logdir)!r}: "
                              f"{exc.strerror or exc}") from exc

    def _write(self, metrics: dict[str, float], step: int) -> None:
        wall = time.time()
        for key, value in metrics.items():
            self._writer.add_scalar(key, value, global_step=step, walltime=wall)
        self._writer.flush()

    def _finish(self) -> None:
        self._writer.close()
