"""Instruction-following rewards: IFEval's 25 constraint types (``reward: ifeval``)."""

from __future__ import annotations

from .checks import CHECKS
from .reward import follows, ifeval, loose_variants
from .spec import KWARGS, Instruction, Unchecked, parse_instructions, read_instructions

__all__ = ["CHECKS", "KWARGS", "Instruction", "Unchecked", "follows", "ifeval", "loose_variants",
           "parse_instructions", "read_instructions"]
