"""LLM judges: criteria graded by a model over an OpenAI-compatible API, each call paid once.

In a rubric file, a component with ``judge:`` in place of ``reward:`` stands for one component
per criterion, named after the criterion (or ``{component}_{criterion}`` with
``prefix: true``)::

    components:
      correct: {reward: gsm8k}
      quality:
        judge:
          base_url: http://127.0.0.1:8000/v1
          model: gpt-4o-mini-2024-07-18
          api_key_env: OPENAI_API_KEY
          template: "Question: {prompt}\\nAnswer: {completion}"
          criteria:
            helpful: Does the answer help the user?
            tidy: {description: Is it concise?, range: [0, 1]}
        weights: {helpful: 1.0, tidy: 0.5}

In Python: ``Judge(name, JudgeConfig(...)).components(weights=...)``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rewardsmith.rubric import (
    Component,
    Rubric,
    register_component_kind,
)

from ..errors import ConfigError, RubricError
from .components import CriterionEvaluator
from .config import DEFAULT_STORE, Budget, Criterion, JudgeConfig, config_error_message
from .evaluator import Judge
from .reward_model import RewardModel, RewardModelConfig
from .usage import Usage

__all__ = [
    "DEFAULT_STORE",
    "Budget",
    "Criterion",
    "CriterionEvaluator",
    "Judge",
    "JudgeConfig",
    "RewardModel",
    "RewardModelConfig",
    "Usage",
    "judge_components",
    "refresh_judges",
]


class _JudgeComponentModel(BaseModel):
    """The keys beside ``judge:`` in a rubric component."""

    model_config = ConfigDict(extra="forbid")
    judge: dict[str, Any]
    weight: float = 1.0
    weights: dict[str, float] = Field(default_factory=dict)
    requires: str | None = None
    prefix: bool = False


def judge_components(name: str, config: Mapping[str, Any], where: str) -> list[Component]:
    """The rubric factory for ``judge:`` components (registered as the ``judge`` kind)."""
    try:
        model = _JudgeComponentModel.model_validate(dict(config))
    except ValidationError as exc:
        raise RubricError(config_error_message(exc, where)) from None
    try:
        judge = Judge(name, model.judge, where=f"{where}.judge")
        return judge.components(weight=model.weight, weights=model.weights,
                                requires=model.requires, prefix=model.prefix)
    except RubricError:
        raise
    except ConfigError as exc:
        raise RubricError(str(exc)) from None


def refresh_judges(rubric: Rubric, before: float | None = None) -> int:
    """Make every judge of ``rubric`` ask again for grades recorded before ``before`` (default:
    now) instead of replaying them (see ``Judge.refresh``); the number of judges."""
    judges = {id(c.evaluator.judge): c.evaluator.judge for c in rubric.components
              if isinstance(c.evaluator, CriterionEvaluator)}
    cutoff = time.time() if before is None else before
    for judge in judges.values():
        judge.refresh(cutoff)
    for component in rubric.components:
        if isinstance(component.evaluator, CriterionEvaluator):
            component.refresh_identity()
    return len(judges)


register_component_kind("judge", judge_components)
