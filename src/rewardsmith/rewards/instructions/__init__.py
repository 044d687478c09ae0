"""Instruction-following rewards: IFEval's 25 constraint types (``reward: ifeval``)."""

from __future__ import annotations

from .checks import CHECKS
from .reward import follows, ifeval, loose_variants
from .spec import KWARGS, Instruction, parse_instructions

__all__ = ["CHECKS", "KWARGS", "Instruction", "follows", "ifeval", "loose_variants",
           "parse_instructions"]
