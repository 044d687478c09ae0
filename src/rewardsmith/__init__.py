"""rewardsmith: rewards for RL post-training of language models.

Everything users need is importable from here::

    from rewardsmith import Rubric, Component, Engine, Rollout, group_reward

Names load on first use, so that ``import rewardsmith`` (and the CLI's start-up) costs only what
a run needs: judges, HTTP and numpy are imported when something asks for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import install_moved_modules, lazy_getattr

install_moved_modules()

if TYPE_CHECKING:
    from rewardsmith.engine.columns import ScoreColumns
    from rewardsmith.files.digests import reads_files
    from rewardsmith.files.rollouts import read_rollouts, rollout_from_dict
    from rewardsmith.files.scored import read_scores, write_scores
    from rewardsmith.jobs.score import ScoreJob
    from rewardsmith.jobs.summary import RunSummary
    from rewardsmith.rubric import (
        Component,
        Rubric,
    )
    from rewardsmith.rubric.calling import group_reward
    from rewardsmith.rubric.loading import load_reward
    from rewardsmith.rubric.quantize import quantize

    from .advantages import (
        AdvantageReport,
        apply_advantages,
        check_advantages,
        compute_advantages,
        emulate_advantages,
    )
    from .analysis import DriftWatch, gate
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
    from .judge import Judge, JudgeConfig
    from .mathcheck import MathVerdict, math_equal, math_equal_async
    from .report import build_report
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
    "RunSummary": ".jobs.summary",
    "Score": ".types",
    "ScoreColumns": ".engine.columns",
    "ScoreJob": ".jobs.score",
    "Status": ".types",
    "StoreError": ".errors",
    "apply_advantages": ".advantages",
    "build_report": ".report",
    "check_advantages": ".advantages",
    "compute_advantages": ".advantages",
    "emulate_advantages": ".advantages",
    "gate": ".analysis",
    "group_reward": ".rubric.calling",
    "load_reward": ".rubric.loading",
    "math_equal": ".mathcheck",
    "math_equal_async": ".mathcheck",
    "quantize": ".rubric.quantize",
    "read_rollouts": ".files.rollouts",
    "reads_files": ".files.digests",
    "read_scores": ".files.scored",
    "rollout_from_dict": ".files.rollouts",
    "score_rollouts": ".engine",
    "write_scores": ".files.scored",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())

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
    "reads_files",
    "rollout_from_dict",
    "score_rollouts",
    "write_scores",
]
