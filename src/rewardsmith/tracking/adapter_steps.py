"""Trackers fed by the trainer adapters: each scoring call an adapter makes is one step.

Two ways to switch it on:

- in Python, ``track_scoring(tracker)`` (every adapter in this process logs to it), or the
  TRL adapter's ``trl_reward_funcs(..., tracker=...)`` (that adapter only);
- for trainers that load the adapter by path in their own worker processes (verl, slime/Miles,
  OpenRLHF), the environment: ``REWARDSMITH_LOG_TO=wandb,tensorboard`` with
  ``REWARDSMITH_LOG_PROJECT``, ``REWARDSMITH_LOG_RUN`` and ``REWARDSMITH_LOG_DIR``. Each process
  opens its own trackers on its first scoring call and closes them at exit.

A tracker that fails to log warns once and scoring goes on: a full disk must not stop training.
Judge cost per step is what the engines' usage counters grew by since the previous step, so the
steps add up to the run's total even when calls overlap.

The same steps can feed a drift watch (``rewardsmith.analysis.DriftWatch``): ``watch_drift()``
in Python, or ``REWARDSMITH_DRIFT=on`` (or component pairs to follow, ``correct~judge``) in the
environment. Its warnings go to the ``rewardsmith.drift`` logger, and its figures of the step
(``drift/...``) to the trackers that listen.
"""

from __future__ import annotations

import atexit
import math
import os
import threading
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from ..errors import ConfigError
from ..types import Rollout, Score
from .base import Tracker
from .stats import key_part, score_stats

if TYPE_CHECKING:
    from ..analysis.drift import DriftWatch, StepStats

__all__ = ["ENV_DRIFT", "ENV_LOG_DIR", "ENV_LOG_PROJECT", "ENV_LOG_RUN", "ENV_LOG_TO",
           "close_scoring_trackers", "drift_metrics", "record_scoring_step", "scoring_drift",
           "scoring_trackers", "stop_tracking", "stop_watching_drift", "track_scoring",
           "watch_drift"]

ENV_LOG_TO = "REWARDSMITH_LOG_TO"
ENV_LOG_PROJECT = "REWARDSMITH_LOG_PROJECT"
ENV_LOG_RUN = "REWARDSMITH_LOG_RUN"
ENV_LOG_DIR = "REWARDSMITH_LOG_DIR"
ENV_DRIFT = "REWARDSMITH_DRIFT"
_DRIFT_ON = {"1", "on", "true", "yes"}
_DRIFT_OFF = {"", "0", "off", "false", "no"}


class Metered(Protocol):
    """What the step needs of an engine: its cumulative judge usage."""

    def usage(self) -> dict[str, dict[str, float]]: ...


class _Steps:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.trackers: list[Tracker] = []
        self.env_pid: int | None = None  # the process whose environment trackers are open
        self.env_trackers: list[Tracker] = []
        self.seen: dict[tuple[int, int, str], dict[str, float]] = {}
        self.failed: set[int] = set()
        self.drift: DriftWatch | None = None  # set in Python (watch_drift)
        self.env_drift: tuple[int, DriftWatch | None] | None = None  # (pid, from the env)
        self.drift_lock = threading.Lock()  # a watch takes one step at a time
        self.drift_failed = False

    def drift_from_env(self) -> DriftWatch | None:
        """This process's watch from ``REWARDSMITH_DRIFT`` (made once per process)."""
        pid = os.getpid()
        if self.env_drift is not None and self.env_drift[0] == pid:
            return self.env_drift[1]
        raw = os.environ.get(ENV_DRIFT, "").strip()
        watch = None
        if raw.lower() not in _DRIFT_OFF:
            from ..analysis.drift import DriftWatch

            watch = DriftWatch(pairs=_drift_pairs(raw))
        self.env_drift = (pid, watch)
        return watch

    def from_env(self) -> list[Tracker]:
        """This process's trackers from ``REWARDSMITH_LOG_TO`` (opened once per process)."""
        pid = os.getpid()
        if self.env_pid == pid:
            return self.env_trackers
        # A forked child opens its own. A tracker that fails to open raises here, on every
        # call until it opens: a misspelt name must not pass silently.
        names = [n.strip() for n in os.environ.get(ENV_LOG_TO, "").split(",") if n.strip()]
        opened: list[Tracker] = []
        if names:
            from .registry import open_trackers

            opened = [open_trackers(
                names, project=os.environ.get(ENV_LOG_PROJECT) or None,
                run=os.environ.get(ENV_LOG_RUN) or None,
                directory=os.environ.get(ENV_LOG_DIR) or None)]
        self.env_pid, self.env_trackers = pid, opened
        return opened

    def usage_delta(self, engines: Iterable[Metered]) -> dict[str, dict[str, float]]:
        pid = os.getpid()
        out: dict[str, dict[str, float]] = {}
        for engine in {id(e): e for e in engines}.values():
            for client, counters in engine.usage().items():
                last = self.seen.get((pid, id(engine), client), {})
                if any(float(v) < last.get(k, 0.0) for k, v in counters.items()):
                    last = {}  # counters went down: a new engine where a closed one was
                grown = {k: float(v) - last.get(k, 0.0) for k, v in counters.items()}
                self.seen[(pid, id(engine), client)] = {k: float(v) for k, v in counters.items()}
                total = out.setdefault(client, {})
                for key, value in grown.items():
                    total[key] = total.get(key, 0.0) + value
        return out

    def close_env(self) -> None:
        with self.lock:
            mine = self.env_trackers if self.env_pid == os.getpid() else []
            self.env_pid, self.env_trackers = None, []
        for tracker in mine:
            tracker.close()


def _drift_pairs(raw: str) -> list[tuple[str, str]]:
    """``on`` (no pairs) or component pairs such as ``correct~judge,format~judge``."""
    if raw.lower() in _DRIFT_ON:
        return []
    pairs = []
    for part in (p.strip() for p in raw.split(",")):
        names = [n.strip() for n in part.split("~")]
        if len(names) != 2 or not all(names):
            raise ConfigError(f"{ENV_DRIFT}={raw!r}: expected 'on', or component pairs to "
                              f"follow such as 'correct~judge' (comma-separated), not {part!r}")
        pairs.append((names[0], names[1]))
    return pairs


_STEPS = _Steps()
atexit.register(_STEPS.close_env)


def watch_drift(watch: DriftWatch | None = None) -> DriftWatch:
    """Feed every adapter scoring call in this process to a drift watch (``watch``, or a new
    one with the default thresholds), one step per call; returns it (its ``warnings`` and
    ``history`` grow as training goes). Replaces the watch set before."""
    if watch is None:
        from ..analysis.drift import DriftWatch

        watch = DriftWatch()
    with _STEPS.lock:
        _STEPS.drift = watch
    return watch


def stop_watching_drift() -> None:
    """Stop feeding the watch ``watch_drift`` set (one from the environment stays)."""
    with _STEPS.lock:
        _STEPS.drift = None


def scoring_drift() -> DriftWatch | None:
    """The watch adapter calls feed now: ``watch_drift``'s, else the environment's."""
    with _STEPS.lock:
        return _STEPS.drift or _STEPS.drift_from_env()


def drift_metrics(stats: StepStats, warnings_now: int) -> dict[str, float]:
    """A drift step's figures as tracker metrics (``drift/...``); figures with no (finite)
    value are left out."""
    out: dict[str, float] = {"drift/warnings": float(warnings_now)}
    if stats.zero_variance_fraction is not None:
        out["drift/zero_variance_fraction"] = stats.zero_variance_fraction
    if stats.mean_length is not None:
        out["drift/mean_length"] = stats.mean_length
    for name, share in stats.shares.items():
        out[f"drift/share/{key_part(name)}"] = share
    for pair, found in stats.agreement.items():
        value = found.get("disagreement")
        if isinstance(value, (int, float)):
            out[f"drift/disagreement/{key_part(pair)}"] = float(value)
    # Trackers take finite numbers only: a figure that is not one is left out, not the step.
    return {key: value for key, value in out.items() if math.isfinite(value)}


def _observe(watch: DriftWatch, scores: Sequence[Score],
             rollouts: Sequence[Rollout] | None) -> dict[str, float]:
    """One step of ``watch``; a watch that fails warns once and scoring goes on."""
    try:
        with _STEPS.drift_lock:
            found = watch.observe(scores, rollouts=rollouts)
            return drift_metrics(watch.history[-1], len(found))
    except Exception as exc:  # noqa: BLE001 - the watch must not stop training
        with _STEPS.lock:
            first, _STEPS.drift_failed = not _STEPS.drift_failed, True
        if first:
            warnings.warn(f"rewardsmith's drift watch failed on a scoring step: {exc}; scoring "
                          f"goes on (further failures are silent)", RuntimeWarning, stacklevel=3)
        return {}


def close_scoring_trackers() -> None:
    """Close the trackers opened from the environment now (they are also closed at exit);
    the next scoring call reads the environment again."""
    _STEPS.close_env()


def track_scoring(tracker: Tracker) -> Tracker:
    """Log every adapter scoring call in this process to ``tracker`` (returned, for chaining).
    Closing the tracker stays the caller's job."""
    with _STEPS.lock:
        if tracker not in _STEPS.trackers:
            _STEPS.trackers.append(tracker)
    return tracker


def stop_tracking(tracker: Tracker) -> None:
    """Stop feeding ``tracker`` (it is not closed)."""
    with _STEPS.lock:
        if tracker in _STEPS.trackers:
            _STEPS.trackers.remove(tracker)


def scoring_trackers() -> list[Tracker]:
    """The trackers every adapter call feeds now (``track_scoring`` and the environment)."""
    with _STEPS.lock:
        return [*_STEPS.trackers, *_STEPS.from_env()]


def record_scoring_step(scores: Sequence[Score], engines: Iterable[Metered],
                        extra: Sequence[Tracker] = (),
                        rollouts: Sequence[Rollout] | None = None) -> None:
    """One adapter scoring call as one step of every tracker that listens and of the drift
    watch (no-op when neither is on). ``rollouts`` give the drift watch completion lengths."""
    watch = scoring_drift()
    drift = _observe(watch, scores, rollouts) if watch is not None else {}
    with _STEPS.lock:
        targets = [*_STEPS.trackers, *_STEPS.from_env()]
        targets.extend(t for t in extra if t not in targets)
        if not targets:
            return
        usage: Mapping[str, Mapping[str, float]] = _STEPS.usage_delta(engines)
    metrics = {**score_stats(scores, usage or None), **drift}
    for tracker in targets:
        try:
            tracker.log_metrics(metrics)
        except Exception as exc:  # noqa: BLE001 - logging must not stop training
            with _STEPS.lock:
                first = id(tracker) not in _STEPS.failed
                _STEPS.failed.add(id(tracker))
            if first:
                warnings.warn(f"rewardsmith could not log a scoring step to "
                              f"{getattr(tracker, 'name', type(tracker).__name__)}: {exc}; "
                              f"scoring goes on (further failures of this tracker are silent)",
                              RuntimeWarning, stacklevel=2)
