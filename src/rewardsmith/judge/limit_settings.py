"""What every scope of a judge's limits shares: the settings read from the judge's config, the
answer a shared backend gives when every slot is taken, and the token-bucket arithmetic. Apart
from ``limits``, which picks a scope's backend, so that a backend never imports the module that
picks it (no import cycle)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Literal

from .config import Budget, LimitScope

FULL = "full"  # what a shared backend answers when every concurrency slot is taken


def bucket_reserve(level: float, updated: float, now: float, per_minute: float, cost: float,
                   debt: float) -> tuple[float, float]:
    """One reservation from a shared bucket (the ``RateLimiter`` rule, without holding a
    lock while waiting): charge ``debt`` (earlier estimates' errors) and ``cost`` now; the
    caller waits the seconds returned, until the level before its cost would be positive.
    Returns (new level, seconds to wait)."""
    rate = per_minute / 60.0
    capacity = max(1.0, rate)
    level = min(capacity, level + max(0.0, now - updated) * rate) - debt
    wait = 0.0 if level > 0 else (1e-3 - level) / rate
    return level - cost, wait


@dataclass(frozen=True)
class LimitSettings:
    """The limits of one judge (or reward model), under the key processes share them by."""

    key: str
    max_concurrency: int
    shared_concurrency: bool  # max_concurrency was set, so it holds across processes
    requests_per_minute: float | None
    tokens_per_minute: float | None
    budget: Budget
    scope: LimitScope = "auto"

    @classmethod
    def of(cls, key: str, config: Any) -> LimitSettings:
        """The settings of a ``JudgeConfig`` or ``RewardModelConfig``."""
        return cls(key=key, max_concurrency=config.max_concurrency,
                   shared_concurrency="max_concurrency" in config.model_fields_set,
                   requests_per_minute=config.requests_per_minute,
                   tokens_per_minute=getattr(config, "tokens_per_minute", None),
                   budget=config.budget, scope=config.limit_scope)

    @property
    def has_budget(self) -> bool:
        b = self.budget
        return b.max_calls is not None or b.max_tokens is not None or b.max_cost is not None

    @property
    def shares_anything(self) -> bool:
        return (self.shared_concurrency or self.requests_per_minute is not None
                or self.tokens_per_minute is not None or self.has_budget)

    def spent(self, calls: int, tokens: int, cost: float) -> str | None:
        """The first budget limit reached (as ``max_calls=100``), or None while calls may go on."""
        b = self.budget
        if b.max_calls is not None and calls >= b.max_calls:
            return f"max_calls={b.max_calls}"
        if b.max_tokens is not None and tokens >= b.max_tokens:
            return f"max_tokens={b.max_tokens}"
        if b.max_cost is not None and cost >= b.max_cost:
            return f"max_cost={b.max_cost:g}"
        return None

    def resolve(self) -> Literal["process", "store", "ray"]:
        """The scope these limits hold in, for this process now (see the module docstring)."""
        if self.scope == "process" or (self.scope == "auto" and not self.shares_anything):
            return "process"
        if self.scope == "auto":
            return "ray" if ray_connected() else "store"
        return self.scope


def ray_connected() -> bool:
    """Whether this process is connected to a Ray cluster (without importing Ray)."""
    ray = sys.modules.get("ray")
    is_initialized = getattr(ray, "is_initialized", None)
    return bool(is_initialized is not None and is_initialized())
