"""rewardsmith: rewards for RL post-training of language models.

Everything users need is importable from here::

    from rewardsmith import Rubric, Component, Engine, Rollout, group_reward

Names load on first use, so that ``import rewardsmith`` (and the CLI's start-up) costs only what
a run needs: judges, HTTP and numpy are imported when something asks for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_getattr

if TYPE_CHECKING:
    from .advantages import (
        AdvantageReport,
        apply_advantages,
        check_advantages,
        compute_advantages,
        emulate_advantages,
    )
    from .analysis import DriftWatch, gate
    from .calling import group_reward
    from .engine import Engine, score_rollouts
    from .errors import (
        AdvantageError,
        BudgetExhausted,
        ConfigError,
        InputError,
        JudgeError,
        LoadError,
        RewardsmithError,
        RewardValueError,
        RubricError,
        StoreError,
    )
    from .io import read_rollouts, read_scores, rollout_from_dict, write_scores
    from .judge import Judge, JudgeConfig
    from .loading import load_reward
    from .mathcheck import MathVerdict, math_equal, math_equal_async
    from .quantize import quantize
    from .report import build_report
    from .rubric import Component, Rubric
    from .score_columns import ScoreColumns
    from .scoring import ScoreJob
    from .summary import RunSummary
    from .types import ComponentResult, Rollout, Score, Status

_LAZY: dict[str, str] = {
    "AdvantageError": ".errors",
    "AdvantageReport": ".advantages",
    "BudgetExhausted": ".errors",
    "Component": ".rubric",
    "ComponentResult": ".types",
    "ConfigError": ".errors",
    "DriftWatch": ".analysis",
    "Engine": ".engine",
    "InputError": ".errors",
    "Judge": ".judge",
    "JudgeConfig": ".judge",
    "JudgeError": ".errors",
    "LoadError": ".errors",
    "MathVerdict": ".mathcheck",
    "RewardValueError": ".errors",
    "RewardsmithError": ".errors",
    "Rollout": ".types",
    "Rubric": ".rubric",
    "RubricError": ".errors",
    "RunSummary": ".summary",
    "Score": ".types",
    "ScoreColumns": ".score_columns",
    "ScoreJob": ".scoring",
    "Status": ".types",
    "StoreError": ".errors",
    "apply_advantages": ".advantages",
    "build_report": ".report",
    "check_advantages": ".advantages",
    "compute_advantages": ".advantages",
    "emulate_advantages": ".advantages",
    "gate": ".analysis",
    "group_reward": ".calling",
    "load_reward": ".loading",
    "math_equal": ".mathcheck",
    "math_equal_async": ".mathcheck",
    "read_rollouts": ".io",
    "read_scores": ".io",
    "rollout_from_dict": ".io",
    "score_rollouts": ".engine",
    "write_scores": ".io",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())

# Imported now: the function shares its module's name, and a later import of the module
# ``rewardsmith.quantize`` would otherwise leave the module where the function belongs.
from .quantize import quantize  # noqa: E402


def __dir__() -> list[str]:
    return sorted(__all__)


__version__ = "0.1.0"

__all__ = [
    "AdvantageError",
    "AdvantageReport",
    "BudgetExhausted",
    "Component",
    "ComponentResult",
    "ConfigError",
    "DriftWatch",
    "Engine",
    "InputError",
    "Judge",
    "JudgeConfig",
    "JudgeError",
    "LoadError",
    "MathVerdict",
    "Rollout",
    "Rubric",
    "RewardValueError",
    "RewardsmithError",
    "RubricError",
    "RunSummary",
    "Score",
    "ScoreColumns",
    "ScoreJob",
    "Status",
    "StoreError",
    "__version__",
    "apply_advantages",
    "build_report",
    "check_advantages",
    "compute_advantages",
    "emulate_advantages",
    "gate",
    "group_reward",
    "load_reward",
    "math_equal",
    "math_equal_async",
    "quantize",
    "read_rollouts",
    "read_scores",
    "rollout_from_dict",
    "score_rollouts",
    "write_scores",
]
