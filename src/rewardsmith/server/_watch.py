"""Whether the server's engine still makes progress, for ``GET /health``.

Every reward call has a timeout, so an engine call of ``n`` rollouts has a longest time it can
take while its rewards keep to their limits: ``n`` times the sum of the components' timeouts,
plus what killing and replacing workers costs. An engine call running longer than that holds a
reward call that is stuck past its timeout with nothing to replace it (in this process, with
``--workers 0``, nothing can stop a sync call or an async one that blocks the event loop), and
every request after it waits behind it: the server cannot make progress and says so, so that a
load balancer or an orchestrator can take it out or restart it.

Only the oldest running engine call is timed, and from when it became the oldest: a younger
call may be waiting behind it, never the other way round. The bound is deliberately loose (it
never calls a slow but healthy server stalled); a judge's waits (rate limits, retries) have no
such bound, so a rubric with a judge is never said to be stalled.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

from ..rubric import Rubric

__all__ = ["StallWatch", "call_budget"]

# What a call costs beyond its reward's own time in a worker: killing a worker that ran past its
# limit (with what it started) and starting a fresh one.
_KILL_AND_REPLACE_SECONDS = 5.0
# Worker processes starting and loading the rubric before the first call.
_POOL_START_SECONDS = 30.0
# Bookkeeping per rollout outside the reward calls (building scores, collecting garbage).
_PER_ROLLOUT_SECONDS = 0.01
# A reward's ``warmup`` hook runs once per worker before the calls' clocks start.
_WARM_UP_SECONDS = 600.0


def call_budget(rubric: Rubric, workers: int) -> tuple[float, float] | None:
    """(seconds per rollout, fixed seconds) an engine call may take while every reward keeps to
    its timeout; None when the rubric has a judge (its waits have no fixed bound)."""
    per_rollout = _PER_ROLLOUT_SECONDS
    fixed = 1.0
    for component in rubric.components:
        if component.evaluator is not None:
            return None
        limit = float(component.timeout or rubric.timeout)
        if workers > 0:
            # A call that crosses the memory limit may run once more on a fresh worker.
            per_rollout += 2 * limit + _KILL_AND_REPLACE_SECONDS
        else:
            per_rollout += limit
        if getattr(component.func, "warmup", None) is not None:
            fixed = _WARM_UP_SECONDS
    if workers > 0:
        fixed += _POOL_START_SECONDS
    return per_rollout, fixed


class StallWatch:
    """Engine calls in flight, and whether the oldest has run past what its rewards allow."""

    def __init__(self, budget: tuple[float, float] | None,
                 clock: Callable[[], float] = time.monotonic):
        self.budget = budget
        self._clock = clock
        self._calls: dict[Hashable, int] = {}  # in the order they began: rollouts each
        self._head_since = 0.0  # when the oldest call in flight became the oldest

    def begin(self, call: Hashable, rollouts: int) -> None:
        if not self._calls:
            self._head_since = self._clock()
        self._calls[call] = rollouts

    def end(self, call: Hashable) -> None:
        head = next(iter(self._calls), None)
        if self._calls.pop(call, None) is not None and call == head:
            self._head_since = self._clock()

    def stalled(self) -> str | None:
        """Why scoring cannot make progress, or None while it can."""
        if self.budget is None or not self._calls:
            return None
        rollouts = next(iter(self._calls.values()))
        per_rollout, fixed = self.budget
        allowed = rollouts * per_rollout + fixed
        running = self._clock() - self._head_since
        if running <= allowed:
            return None
        return (f"scoring cannot make progress: an engine call of {rollouts} rollout(s) has run "
                f"for {running:.1f} s, longer than its rewards' timeouts allow ({allowed:.1f} s); "
                "a reward call is stuck past its timeout and nothing replaced it (with "
                "--workers 0 nothing can stop a sync reward), and every request waits behind "
                "it: restart the server, and run rewards in worker processes")
