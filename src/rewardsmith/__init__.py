"""rewardsmith: rewards for RL post-training of language models.

Everything users need is importable from here::

    from rewardsmith import Rubric, Component, Engine, Rollout, group_reward
"""

from .advantages import (
    AdvantageReport,
    apply_advantages,
    check_advantages,
    compute_advantages,
    emulate_advantages,
)
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
from .rubric import Component, Rubric
from .scoring import ScoreJob
from .summary import RunSummary
from .types import ComponentResult, Rollout, Score, Status

__version__ = "0.1.0"

__all__ = [
    "AdvantageError",
    "AdvantageReport",
    "BudgetExhausted",
    "Component",
    "ComponentResult",
    "ConfigError",
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
    "ScoreJob",
    "Status",
    "StoreError",
    "__version__",
    "apply_advantages",
    "check_advantages",
    "compute_advantages",
    "emulate_advantages",
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
