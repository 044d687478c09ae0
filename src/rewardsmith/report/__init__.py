"""The HTML report of a scored run: one self-contained page with the reward and component
distributions, statuses, groups, each trainer's advantages, latency, judge cost, the rubric,
and, against a baseline file, what moved. ``build_report`` makes it; ``rewardsmith report``
is the command line."""

from __future__ import annotations

from .build import build_report, collect, render
from .scored import ScoredColumns, read_scored

__all__ = ["ScoredColumns", "build_report", "collect", "read_scored", "render"]
