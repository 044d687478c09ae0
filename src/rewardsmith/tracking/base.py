"""What every tracker shares: the ``Tracker`` protocol, step numbering, logging scores.

A tracker only has to write a flat ``{key: number}`` dict at a step (``log_metrics``) and close;
``TrackerBase`` turns scored results into those numbers (``tracking.stats``, the one place they
are computed) and numbers the steps, so the three trackers log the same keys the same way.
"""

from __future__ import annotations

import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Protocol, runtime_checkable

from ..errors import ConfigError, RewardsmithError
from .stats import ScoredResult, score_stats

__all__ = ["Tracker", "TrackerBase", "Trackers", "TrackingError", "Usage"]

Usage = Mapping[str, Mapping[str, float]]


class TrackingError(RewardsmithError):
    """A tracker's library failed to start a run or to log a step (a server that cannot be
    reached, a login that is missing); the message names the tracker and its error."""


@runtime_checkable
class Tracker(Protocol):
    """Somewhere scoring steps are logged: W&B, MLflow, TensorBoard, or several at once."""

    name: str

    def log_metrics(self, metrics: Mapping[str, float], *, step: int | None = None) -> int:
        """Log numbers at ``step`` (default: the step after the last one); returns the step."""
        ...

    def log_scores(self, results: Iterable[ScoredResult], *, step: int | None = None,
                   usage: Usage | None = None) -> dict[str, float]:
        """Log one scoring step's statistics; returns the metrics logged."""
        ...

    def close(self) -> None:
        """Flush and finish; logging after this is an error."""
        ...


def _checked(metrics: Mapping[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"metric key {key!r}: expected a non-empty string")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"metric {key!r}: expected a number, not {type(value).__name__}")
        if not math.isfinite(value):
            raise ConfigError(f"metric {key!r} is {value!r}: trackers need finite numbers")
        out[key] = float(value)
    return out


class TrackerBase(ABC):
    """Step numbering and ``log_scores`` for a tracker that implements ``_write``.

    Steps start at 0 and go up by one per call unless given. A given step may repeat the last
    one (more keys at that step) but never go back: W&B drops such points silently, so going
    back is an error here instead. Thread-safe: adapters may score from several threads.
    """

    name = "tracker"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_step: int | None = None
        self._closed = False

    @abstractmethod
    def _write(self, metrics: dict[str, float], step: int) -> None:
        """Send one step's metrics to the tracker."""

    @abstractmethod
    def _finish(self) -> None:
        """Flush and end what this tracker opened."""

    def _next(self, step: int | None) -> int:
        if self._closed:
            raise ConfigError(f"the {self.name} tracker is closed")
        if step is None:
            return 0 if self._last_step is None else self._last_step + 1
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ConfigError(f"step {step!r}: expected a whole number >= 0")
        if self._last_step is not None and step < self._last_step:
            raise ConfigError(f"step {step} comes after step {self._last_step} was logged: "
                              f"steps may repeat but not go back")
        return step

    def log_metrics(self, metrics: Mapping[str, float], *, step: int | None = None) -> int:
        checked = _checked(metrics)
        with self._lock:
            at = self._next(step)
            try:
                self._write(checked, at)
            except RewardsmithError:
                raise
            except Exception as exc:  # the libraries raise types of their own
                raise TrackingError(f"{self.name}: could not log step {at}: {exc}") from exc
            self._last_step = at
            return at

    def log_scores(self, results: Iterable[ScoredResult], *, step: int | None = None,
                   usage: Usage | None = None) -> dict[str, float]:
        metrics = score_stats(results, usage)
        self.log_metrics(metrics, step=step)
        return metrics

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._finish()
            except RewardsmithError:
                raise
            except Exception as exc:  # the libraries raise types of their own
                raise TrackingError(f"{self.name}: could not finish the run: {exc}") from exc

    def __enter__(self) -> TrackerBase:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


class Trackers(TrackerBase):
    """Several trackers fed the same steps: the statistics are computed once."""

    name = "trackers"

    def __init__(self, trackers: Sequence[Tracker]):
        super().__init__()
        self.trackers = list(trackers)

    def _write(self, metrics: dict[str, float], step: int) -> None:
        for tracker in self.trackers:
            tracker.log_metrics(metrics, step=step)

    def _finish(self) -> None:
        # Close every tracker even when one fails, then report the first failure.
        failure: BaseException | None = None
        for tracker in self.trackers:
            try:
                tracker.close()
            except Exception as exc:  # noqa: BLE001 - re-raised below
                failure = failure or exc
        if failure is not None:
            raise failure
