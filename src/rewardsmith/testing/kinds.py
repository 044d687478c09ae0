"""The kinds of reward the harness can probe, each with a question, a reference answer and
completions written in its format: a correct one, a wrong one, one cut mid-answer, and its
marker with nothing after it.

Verifier kinds pair an answer type (a number, a short text, a multiple-choice letter) with the
place the answer goes: ``plain`` (the answer stated), ``marker`` (after ``####``) or ``boxed``
(inside ``\\boxed{}``). Format kinds (``marker``, ``think``, ``length``, ``pattern``) grade the
shape of the completion, not its answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardsmith.testing.kind_base import (
    CHOICE as CHOICE,
)
from rewardsmith.testing.kind_base import (  # re-exported: kinds is where callers look
    DEFAULT_PAD_LIMIT as DEFAULT_PAD_LIMIT,
)
from rewardsmith.testing.kind_base import (
    NUMBER as NUMBER,
)
from rewardsmith.testing.kind_base import (
    TEXT as TEXT,
)
from rewardsmith.testing.kind_base import (
    Answers as Answers,
)
from rewardsmith.testing.kind_base import (
    Kind as Kind,
)

from ..errors import ConfigError
from .kind_names import (
    AGENT_KINDS,
    CODE_KINDS,
    FORMAT_KINDS,
    HARBOR_KINDS,
    KIND_NAMES,
    REPO_KINDS,
    STRUCTURED_KINDS,
    VERIFIER_KINDS,
)

__all__ = [
    "DETECTABLE_KINDS",
    "KIND_NAMES",
    "Kind",
    "Answers",
    "NUMBER",
    "filler",
    "make_kind",
]

_FILLER = "Let us think about this step by step. "


def filler(size: int, unit: str = "chars") -> str:
    """Answer-free text of exactly ``size`` characters (or words): no digits, letters or tags."""
    if size <= 0:
        return ""
    if unit == "words":
        words = _FILLER.split()
        return " ".join(words[i % len(words)] for i in range(size))
    return (_FILLER * (size // len(_FILLER) + 1))[:size]


_VERIFIERS: dict[str, tuple[Answers, str]] = {
    "number": (NUMBER, "plain"),
    "number-marker": (NUMBER, "marker"),
    "number-boxed": (NUMBER, "boxed"),
    "text": (TEXT, "plain"),
    "text-boxed": (TEXT, "boxed"),
    "choice": (CHOICE, "plain"),
    "choice-boxed": (CHOICE, "boxed"),
}
if tuple(_VERIFIERS) != VERIFIER_KINDS:
    raise RuntimeError("kind_names.VERIFIER_KINDS must list the verifier kinds in order")
_FORMATS = FORMAT_KINDS
_STRUCTURED = STRUCTURED_KINDS
_CODE = CODE_KINDS
# What the harness tries on a reward it knows nothing about (a user's function).
DETECTABLE_KINDS: tuple[str, ...] = (*_VERIFIERS, "think")

_DESCRIPTIONS = {
    "number": "a number stated in the text",
    "number-marker": "a number after '####'",
    "number-boxed": "a number inside \\boxed{}",
    "text": "a short text answer",
    "text-boxed": "a short text answer inside \\boxed{}",
    "choice": "a multiple-choice letter",
    "choice-boxed": "a multiple-choice letter inside \\boxed{}",
    "marker": "a format rule: the answer marker once, with an answer after it",
    "think": "a format rule: one <think>...</think> block, then an answer",
    "length": "a length penalty",
    "pattern": "a pattern the completion must match",
}


def _verifier(name: str, answers: Answers, slot: str, pad: tuple[int, str]) -> Kind:
    base = Kind(name, _DESCRIPTIONS[name], answers.question, answers.label, "", "", "", "",
                answers=answers, slot=slot, pad_limit=pad[0], pad_unit=pad[1])
    label = base.shown(answers.label)
    correct = base.render(label, answers.work(answers.label))
    wrong = base.render(base.shown(answers.miss), answers.work(answers.miss))
    unmarked = None
    if slot != "plain":
        unmarked = f"{answers.work(answers.label)}\nThe answer is {answers.label}."
    at = correct.rfind(label)
    truncated = correct[: at + max(1, len(label) // 2)]
    bare = {"marker": "####", "boxed": "\\boxed{}"}.get(slot, "The answer is")
    return Kind(name, base.description, answers.question, answers.label, correct, wrong,
                truncated, bare, unmarked=unmarked, answers=answers, slot=slot,
                pad_limit=pad[0], pad_unit=pad[1])


def make_kind(name: str, params: Mapping[str, Any] | None = None,
              pad: tuple[int, str] = (DEFAULT_PAD_LIMIT, "chars")) -> Kind:
    """The kind ``name``; ``params`` are the reward's (marker, max_count, tag are honoured)."""
    params = params or {}
    if name in _VERIFIERS:
        answers, slot = _VERIFIERS[name]
        return _verifier(name, answers, slot, pad)
    if name in _STRUCTURED:
        from .structured_kinds import structured_kind

        return structured_kind(name)
    if name in _CODE:
        from .code_kinds import code_kind

        return code_kind(dict(params))
    if name in AGENT_KINDS:
        from .agent_kinds import agent_kind

        return agent_kind(name)
    if name in HARBOR_KINDS:
        from .harbor_kinds import harbor_kind

        return harbor_kind(name)
    if name in REPO_KINDS:
        from .repo_kinds import repo_kind

        return repo_kind(name)
    work = NUMBER.work(NUMBER.label)
    stated = "The answer is 42."
    common: dict[str, Any] = {"description": _DESCRIPTIONS.get(name, name),
                              "question": NUMBER.question, "label": NUMBER.label,
                              "uses_label": False, "pad_limit": pad[0], "pad_unit": pad[1]}
    if name == "marker":
        marker = str(params.get("marker") or "####")
        max_count = _positive_int(params.get("max_count"), 1)
        return Kind(name, correct=f"{work}\n{marker} 42", wrong=work,
                    truncated=f"{work}\n{marker[: len(marker) // 2]}", bare_marker=marker,
                    marker=marker, marker_max=max_count, **common)
    if name == "think":
        tag = str(params.get("tag") or "think")
        return Kind(name, correct=f"<{tag}>{work}</{tag}>\n{stated}", wrong=stated,
                    truncated=f"<{tag}>{work[:-2]}", bare_marker=f"<{tag}></{tag}>", tag=tag,
                    **common)
    if name == "length":
        return Kind(name, correct=stated, wrong=stated, truncated=f"{work}\nThe answer is 4",
                    bare_marker="The answer is", wrong_truncated=True, grades_answers=False,
                    **common)
    if name == "pattern":
        return Kind(name, correct=f"{work}\n{stated}", wrong="",
                    truncated=f"{work}\nThe answer is 4", bare_marker="The answer is",
                    calibrated=False, **common)
    raise ConfigError(f"unknown reward kind {name!r}; known kinds: {', '.join(KIND_NAMES)}")


def _positive_int(value: Any, default: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return default


def pad_settings(params: Mapping[str, Any]) -> tuple[int, str] | None:
    """The length limit a reward's params name (``max_length`` and ``unit``), if any."""
    limit = params.get("max_length")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
        return None
    unit = params.get("unit", "chars")
    return limit, unit if unit in ("chars", "words") else "chars"
