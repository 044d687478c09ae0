"""Scoring steps logged to the trackers users have: Weights & Biases, MLflow, TensorBoard, and
a JSONL step log that ``rewardsmith report`` reads back as the run's reward curve.

Each is an extra (``pip install 'rewardsmith[wandb]'``, ``[mlflow]``, ``[tensorboard]``) and its
library is imported only by the tracker that needs it. Usage::

    from rewardsmith.tracking import open_trackers

    with open_trackers(["tensorboard", "mlflow"], project="gsm8k", directory="logs") as tracker:
        for step, scores in enumerate(batches):
            tracker.log_scores(scores, step=step)

The statistics of a step (``score_stats``) are computed in one place for all trackers; the keys
are listed in ``rewardsmith.tracking.stats`` and docs/tracking.md.
"""

from __future__ import annotations

from .adapter_steps import (
    ENV_DRIFT,
    ENV_LOG_DIR,
    ENV_LOG_PROJECT,
    ENV_LOG_RUN,
    ENV_LOG_TO,
    close_scoring_trackers,
    drift_metrics,
    scoring_drift,
    scoring_trackers,
    stop_tracking,
    stop_watching_drift,
    track_scoring,
    watch_drift,
)
from .base import Tracker, TrackerBase, Trackers, TrackingError
from .jsonl_tracker import JsonlTracker
from .mlflow_tracker import MlflowTracker
from .registry import TRACKER_NAMES, check_available, open_tracker, open_trackers
from .scored_files import LoggedStep, file_stats, log_scored_files
from .stats import ScoredResult, StepStats, key_part, score_stats, usage_metrics
from .tensorboard_tracker import TensorBoardTracker
from .wandb_tracker import WandbTracker

__all__ = [
    "ENV_DRIFT",
    "ENV_LOG_DIR",
    "ENV_LOG_PROJECT",
    "ENV_LOG_RUN",
    "ENV_LOG_TO",
    "TRACKER_NAMES",
    "JsonlTracker",
    "LoggedStep",
    "MlflowTracker",
    "ScoredResult",
    "StepStats",
    "TensorBoardTracker",
    "Tracker",
    "TrackerBase",
    "Trackers",
    "TrackingError",
    "WandbTracker",
    "check_available",
    "close_scoring_trackers",
    "file_stats",
    "key_part",
    "log_scored_files",
    "open_tracker",
    "open_trackers",
    "score_stats",
    "drift_metrics",
    "scoring_drift",
    "scoring_trackers",
    "stop_tracking",
    "stop_watching_drift",
    "track_scoring",
    "watch_drift",
    "usage_metrics",
]
