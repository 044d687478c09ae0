"""A step log in a JSONL file: one line per step, ``{"step": N, "time": T, "metrics": {...}}``.

Needs nothing installed, and ``rewardsmith report STEPLOG`` reads it back as the run's reward
curve: the trainer adapters' steps, for trainers whose runs leave no scored files behind.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import IO

from ..errors import ConfigError
from .base import TrackerBase
from .tensorboard_tracker import default_run_name

__all__ = ["STEP_LOG_KEYS", "JsonlTracker"]

STEP_LOG_KEYS = ("step", "time", "metrics")  # what a step log's line holds


class JsonlTracker(TrackerBase):
    """Steps appended to ``path`` (default: ``directory/run.jsonl``, the run named per process
    as TensorBoard's are), each line written and flushed when its step is logged, so a crash
    loses no step already logged. An existing file is never appended to: two runs in one log
    would read as one curve. A ``path`` given is refused then; a file named from ``run`` gets
    the process id added instead (``run-PID.jsonl``), so ranks that share a run name each keep
    their own log and none of them fails to start."""

    name = "jsonl"

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 directory: str | os.PathLike[str] = "runs", run: str | None = None):
        super().__init__()
        name = run or default_run_name()
        candidates = ([Path(path)] if path is not None else
                      [Path(directory) / f"{name}.jsonl",
                       Path(directory) / f"{name}-{os.getpid()}.jsonl"])
        for candidate in candidates:
            self.path = candidate
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file: IO[str] = self.path.open("x", encoding="utf-8")
                break
            except FileExistsError:
                continue
            except OSError as exc:
                raise ConfigError(f"cannot write the step log {str(self.path)!r}: "
                                  f"{exc.strerror or exc}") from exc
        else:
            raise ConfigError(f"the step log {str(self.path)!r} exists: name a new file (or "
                              "another run), so two runs do not read as one")

    def _write(self, metrics: dict[str, float], step: int) -> None:
        line = {"step": step, "time": round(time.time(), 3), "metrics": metrics}
        self._file.write(json.dumps(line, allow_nan=False) + "\n")
        self._file.flush()

    def _finish(self) -> None:
        self._file.close()
