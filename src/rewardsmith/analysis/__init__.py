"""Reading scored runs side by side and over time: the promotion gate (a paired bootstrap
comparison of two runs of the same prompts) and the drift watch over training steps."""

from __future__ import annotations

from .bootstrap import Interval, cluster_bootstrap
from .drift import (
    DriftThresholds,
    DriftWarning,
    DriftWatch,
    StepStats,
    drift_files,
    drift_warnings,
)
from .gate import Check, Comparison, GateResult, gate, gate_files
from .pairing import Pairing, pair_scores
from .scored_input import ScoredLine, read_scored

__all__ = [
    "Check",
    "Comparison",
    "DriftThresholds",
    "DriftWarning",
    "DriftWatch",
    "GateResult",
    "Interval",
    "Pairing",
    "ScoredLine",
    "StepStats",
    "cluster_bootstrap",
    "drift_files",
    "drift_warnings",
    "gate",
    "gate_files",
    "pair_scores",
    "read_scored",
]
