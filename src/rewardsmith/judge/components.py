"""The ``Evaluator`` of one judge criterion: the rubric component's face of a ``Judge``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import JudgeError
from ..types import ComponentResult, Rollout

if TYPE_CHECKING:
    from .evaluator import Judge

__all__ = ["CriterionEvaluator"]


class CriterionEvaluator:
    """The ``Evaluator`` for one criterion of a ``Judge`` (see ``rewardsmith.rubric``)."""

    def __init__(self, judge: Judge, criterion: str):
        if criterion not in judge.criteria:
            raise JudgeError(f"judge {judge.name!r} has no criterion {criterion!r}")
        self.judge = judge
        self.criterion = criterion

    def __repr__(self) -> str:
        return f"CriterionEvaluator({self.judge.name!r}, {self.criterion!r})"

    def identity(self) -> str:
        identity = self.judge.criterion_identity(self.criterion)
        # A refreshing judge gives new values: results stored for the old ones are not reused.
        before = self.judge.refresh_before
        return identity if before is None else f"{identity}@refresh:{before!r}"

    @property
    def per_rollout(self) -> bool:
        """Whether a rollout's grade leaves the others out (pointwise): then a closed gate
        can spare its call. Group and pairwise grades depend on the rollouts judged together."""
        return self.judge.config.mode == "pointwise"

    async def evaluate(self, rollouts: Sequence[Rollout]) -> list[ComponentResult]:
        return await self.judge.grade(rollouts, self.criterion)

    async def check(self) -> None:
        await self.judge.check()

    def attach_store(self, path: str) -> None:
        self.judge.attach_store(path)

    def usage_key(self) -> str:
        return f"judge:{self.judge.name}"

    def usage(self) -> dict[str, float]:
        return self.judge.usage()

    async def close(self) -> None:
        await self.judge.close()
