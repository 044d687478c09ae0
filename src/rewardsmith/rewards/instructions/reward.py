"""``reward: ifeval``: the share (or all) of a rollout's IFEval constraints its completion meets.

Strict mode checks the response as written. Loose mode, as IFEval defines it, also accepts the
response without its first line, without its last line, without both, and each of those with
markdown asterisks removed: a constraint passes when any of the eight passes.

Two rules hold for every constraint, in both modes: a response with no letter or digit at all
(empty, ``{}``, a row of asterisks) meets nothing but "JSON format", and a response that is only
the prompt repeated back meets nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...types import ComponentResult
from .._registry import builtin
from .checks import CHECKS
from .spec import Instruction, Unchecked, read_instructions
from .text import has_content

__all__ = ["ifeval", "loose_variants", "follows"]

_MODES = ("fraction", "all")


def loose_variants(text: str) -> list[str]:
    """IFEval's loose readings of ``text``, the text itself first, without repeats."""
    lines = text.split("\n")
    cut = ["\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(),
           "\n".join(lines[1:-1]).strip()]
    variants = [text, text.replace("*", "")]
    for variant in cut:
        variants.extend((variant, variant.replace("*", "")))
    seen: set[str] = set()
    unique = []
    for variant in variants:
        if variant not in seen:
            seen.add(variant)
            unique.append(variant)
    return unique


def _squash(text: str) -> str:
    return " ".join(text.split()).casefold()


_JSON = "detectable_format:json_format"


def _standing(reading: str) -> int:
    """2: the reading has a letter or digit; 1: only other characters; 0: it is blank."""
    if has_content(reading):
        return 2
    return 1 if reading.strip() else 0


def _earns(reading: str, standing: int, instruction: Instruction) -> bool:
    # No content, no credit, but for "JSON format" ("{}" is JSON); a blank reading earns nothing.
    if standing != 2 and (standing == 0 or instruction.id != _JSON):
        return False
    return CHECKS[instruction.id](reading, instruction.kwargs)


def follows(text: str, instructions: tuple[Instruction, ...], *, loose: bool = False,
            prompt: str = "") -> list[bool]:
    """For each instruction, whether ``text`` follows it (strict, or loose)."""
    if prompt.strip() and _squash(text) == _squash(prompt):
        return [False] * len(instructions)  # the prompt echoed back earns nothing
    standing = _standing(text)
    others: list[tuple[str, int]] | None = None  # the loose variants, made when first needed
    verdicts = []
    for instruction in instructions:
        verdict = _earns(text, standing, instruction)
        if not verdict and loose:
            if others is None:
                others = [(variant, _standing(variant)) for variant in loose_variants(text)[1:]]
            verdict = any(_earns(variant, rank, instruction) for variant, rank in others)
        verdicts.append(verdict)
    return verdicts


def _check_params(params: Mapping[str, Any]) -> None:
    if params["mode"] not in _MODES:
        raise ValueError(f"ifeval: mode must be 'fraction' or 'all', not {params['mode']!r}")
    if not isinstance(params["loose"], bool):
        raise ValueError(f"ifeval: loose must be true or false, not {params['loose']!r}")


@builtin("ifeval", kind="verifier", check=_check_params)
def ifeval(completion: str, answer: Any, prompt: str = "", loose: bool = False,
           mode: str = "fraction") -> ComponentResult:
    """IFEval constraints from the answer (instruction_id_list + kwargs): share met, or all.

    The metrics hold each checked instruction's verdict (1.0 or 0.0) and ``unchecked``, how
    many could not be checked; those are named in the error and left out of the reward.
    """
    if mode not in _MODES or not isinstance(loose, bool):
        _check_params({"mode": mode, "loose": loose})
    read = read_instructions(answer)
    instructions = tuple([item for item in read if type(item) is Instruction])
    if not instructions:
        # Nothing left to grade: the whole response is an error.
        raise ValueError("; ".join(item.reason for item in read if isinstance(item, Unchecked)))
    verdicts = follows(completion, instructions, loose=loose, prompt=prompt or "")
    met = sum(verdicts)
    reward = met / len(verdicts) if mode == "fraction" else float(met == len(verdicts))
    metrics: dict[str, float] = {}
    verdict_of = iter(verdicts)
    problems = []
    for position, item in enumerate(read):
        if isinstance(item, Unchecked):
            problems.append(item.reason)
            continue
        name = item.id
        if name in metrics:  # the same id twice: the second is named by its position
            name = f"{name}#{position}"
        metrics[name] = 1.0 if next(verdict_of) else 0.0
    metrics["unchecked"] = float(len(problems))
    if not problems:
        return ComponentResult(reward, metrics=metrics)
    error = (f"ifeval: {len(problems)} of {len(read)} instructions could not be checked and "
             "are left out of the reward: "
             + "; ".join(problem.removeprefix("ifeval: ") for problem in problems))
    return ComponentResult(reward, error=error, metrics=metrics)
