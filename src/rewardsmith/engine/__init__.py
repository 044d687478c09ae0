"""The scoring engine: one call per group, hard limits, crash isolation, async rewards.

Rewards run in worker processes (``rewardsmith.workers``) so a call past its timeout, or past
its memory limit, is killed for real. A user's async rewards run there too, concurrently on
each worker's own event loop: an async reward that blocks its loop is killed like a sync one.
Judges (network I/O only, with limits of their own) run on the engine's own event loop.
Results always come back in input order.

The parts, in the order a batch goes through them:

- ``plan``: rollouts into batches of whole groups; a batch into calls with their limits.
- ``caching``: cells already known, from a result cache (the store).
- ``executors``: where calls run: in this process, the local worker pool, or Ray
  (``ray_backend``), all behind one protocol; ``onloop`` for judges.
- ``programs``: what runs in a worker: the rubric's rewards over a batch's rows.
- ``cells`` and ``assemble``: results into cells (one place for every executor), cells into
  scores, and the watch for a reward that fails the same way every time.
- ``core``: the ``Engine`` itself, its lifecycle and public API; ``evaluators``: what it asks of
  a judge or reward model beyond scoring, and the thread of its own event loop.
- ``columns``: scores as columns (``ScoreColumns``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

if TYPE_CHECKING:
    from .caching import ResultCache
    from .core import Engine, score_rollouts

__all__ = ["Engine", "ResultCache", "score_rollouts"]

# Loaded on first use, so that reading a constant from ``executors`` (the CLI's help does)
# does not import the whole engine.
_LAZY = {"Engine": ".core", "score_rollouts": ".core", "ResultCache": ".caching"}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
