"""What a run spent on its judge, and the budget that bounds it."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .config import Budget, JudgeConfig

__all__ = ["Usage"]


@dataclass
class Usage:
    """Per-run counters of one judge (all criteria together).

    ``calls``: calls made (each asks one rollout's missing criteria), failed ones included;
    ``failed``: calls that gave no usable grade for at least one criterion; ``retries``: extra
    HTTP attempts; ``replayed``: grades read from the store instead of calling; ``shared``:
    grades another process's call produced while this run waited for it; ``unscored``: grades
    not asked for because the budget was spent; ``budget_exhausted``: 1 when that happened;
    ``failed_replayed``: grades whose calls had failed more than ``retry_failed`` times, given
    their recorded error instead of a new call.
    """

    calls: int = 0
    failed: int = 0
    retries: int = 0
    replayed: int = 0
    shared: int = 0
    unscored: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    budget_exhausted: int = 0
    failed_replayed: int = 0

    def charge(self, config: JudgeConfig, tokens_in: int, tokens_out: int) -> float:
        cost = (tokens_in * config.price_per_million_input
                + tokens_out * config.price_per_million_output) / 1e6
        self.tokens_in += tokens_in
        self.tokens_out += tokens_out
        self.cost += cost
        return cost

    def spent(self, budget: Budget) -> str | None:
        """The first budget limit reached (as ``max_calls=100``), or None while calls may go on."""
        if budget.max_calls is not None and self.calls >= budget.max_calls:
            return f"max_calls={budget.max_calls}"
        if budget.max_tokens is not None and self.tokens_in + self.tokens_out >= budget.max_tokens:
            return f"max_tokens={budget.max_tokens}"
        if budget.max_cost is not None and self.cost >= budget.max_cost:
            return f"max_cost={budget.max_cost:g}"
        return None

    def as_dict(self) -> dict[str, float]:
        out = {k: float(v) for k, v in asdict(self).items()}
        out["cost"] = float(f"{self.cost:.6g}")  # six significant digits, however small
        return out
