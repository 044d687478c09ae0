"""Group advantages that are exactly 0 for groups that teach nothing; trainer emulation; checks.

``compute_advantages`` gives GRPO, Dr. GRPO and RLOO advantages with exact zeros for groups of
equal rewards in any dtype; ``emulate_advantages`` shows what a trainer's own formula makes of
the same rewards; ``check_advantages`` reports broken groups (``rewardsmith advantages``);
``quantize`` rounds totals onto a grid float32 holds exactly.
"""

from __future__ import annotations

from rewardsmith.rubric.quantize import (
    DEFAULT_STEP,
    check_step,
    is_float32_exact_grid,
    quantize,
    suggest_step,
)

from .core import (
    CONVENTIONS,
    DTYPES,
    METHODS,
    SCALES,
    Convention,
    advantages_array,
    apply_advantages,
    compute_advantages,
    encode_groups,
    get_convention,
)
from .report import (
    AdvantageReport,
    BrokenGroup,
    HistogramBin,
    RewardDistribution,
    check_advantages,
    check_trainers,
)
from .trainers import (
    TRAINERS,
    TrainerFormula,
    emulate_advantages,
    emulate_array,
    get_trainer,
    trainer_names,
)

__all__ = [
    "CONVENTIONS",
    "DEFAULT_STEP",
    "DTYPES",
    "METHODS",
    "SCALES",
    "TRAINERS",
    "AdvantageReport",
    "BrokenGroup",
    "Convention",
    "HistogramBin",
    "RewardDistribution",
    "TrainerFormula",
    "advantages_array",
    "apply_advantages",
    "check_advantages",
    "check_trainers",
    "check_step",
    "compute_advantages",
    "emulate_advantages",
    "emulate_array",
    "encode_groups",
    "get_convention",
    "get_trainer",
    "is_float32_exact_grid",
    "quantize",
    "suggest_step",
    "trainer_names",
]
