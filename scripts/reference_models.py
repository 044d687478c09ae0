"""The rubric-keys page: every key a rubric file may hold, read from the pydantic models that
validate rubric files (``extra="forbid"``, so a key not in a model is refused at load)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from reference_text import RUBRIC_KEYS

# (section id, title, "module:Model", what the section is). Every component kind a rubric
# may use (``rewardsmith.rubric.register_component_kind``) must have its section here.
RUBRIC_SECTIONS: list[tuple[str, str, str, str]] = [
    ("rubric", "Top level", "rewardsmith.rubric._model:_RubricModel",
     "The keys of the rubric file itself."),
    ("component", "A component with `reward:`", "rewardsmith.rubric._model:_ComponentModel",
     "`components.<name>` for a reward function (a built-in or your own)."),
    ("judge_component", "A component with `judge:`", "rewardsmith.judge:_JudgeComponentModel",
     "`components.<name>` for an LLM judge; each criterion becomes its own component "
     "(see [LLM judges](../judge.md))."),
    ("judge", "`judge:`", "rewardsmith.judge.config:JudgeConfig",
     "The judge's endpoint, prompt, limits and mode ([LLM judges](../judge.md), "
     "[judge modes](../judges.md))."),
    ("criterion", "`judge.criteria.<name>` as a mapping", "rewardsmith.judge.config:_CriterionBody",
     "A criterion given as `{description, range, binary}` instead of a description alone."),
    ("budget", "`judge.budget` and `reward_model.budget`", "rewardsmith.judge.config:Budget",
     "What one run may spend."),
    ("reward_model_component", "A component with `reward_model:`",
     "rewardsmith.judge.reward_model:_ComponentModel",
     "`components.<name>` for a trained reward model served over HTTP "
     "(see [judge modes](../judges.md))."),
    ("reward_model", "`reward_model:`", "rewardsmith.judge.reward_model:RewardModelConfig",
     "Where the reward model is served and how to call it."),
]
# The component kinds (besides `reward:`) and the section of the model that validates each.
KIND_SECTIONS = {"judge": "judge_component", "reward_model": "reward_model_component"}


def _model(spec: str) -> Any:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    text = text or str(annotation)
    for noise in ("typing.", "rewardsmith.judge.config.", "NoneType"):
        text = text.replace(noise, "None" if noise == "NoneType" else "")
    return text


def _default(field: Any) -> str:
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        value = field.default_factory()
        if hasattr(value, "model_dump"):
            value = {k: v for k, v in value.model_dump().items() if v is not None} or "none"
        return "`{}`" if value == {} else f"`{value}`" if value != "none" else "none"
    if field.default is PydanticUndefined:
        return "required"
    if field.default is None:
        return "none"
    return f"`{field.default!r}`" if isinstance(field.default, str) else f"`{field.default}`"


def _bounds(field: Any) -> str:
    names = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "min_length": "length >="}
    found = []
    for item in field.metadata:
        for attr, symbol in names.items():
            value = getattr(item, attr, None)
            if value is not None:
                found.append(f"{symbol} {value}")
    return ", ".join(found)


def _check_kinds() -> None:
    import rewardsmith.judge  # noqa: F401  (registers the judge and reward_model kinds)
    from rewardsmith.rubric._model import _COMPONENT_KINDS, _LAZY_KINDS

    missing = sorted((set(_COMPONENT_KINDS) | set(_LAZY_KINDS)) - set(KIND_SECTIONS))
    if missing:
        raise ValueError(f"component kind(s) {missing} have no section in "
                         "scripts/reference_models.py RUBRIC_SECTIONS / KIND_SECTIONS")


def rubric_page(header: str, cell: Callable[[str], str]) -> str:
    _check_kinds()
    out = [header, "# Rubric keys reference\n\n",
           "Every key a rubric file may hold, read from the models that validate rubric files. "
           "Any other key is refused when the rubric loads (`rubric.yaml: unknown key "
           "'components.correct.wieght'`). How rubrics work: [Rubrics](../rubrics.md).\n\n"]
    seen: set[tuple[str, str]] = set()
    missing: list[str] = []
    for section, title, spec, what in RUBRIC_SECTIONS:
        model = _model(spec)
        out += [f"## {title}\n\n", what, "\n\n",
                "| key | type | default | limits | meaning |\n|---|---|---|---|---|\n"]
        for key, field in model.model_fields.items():
            seen.add((section, key))
            description = field.description or RUBRIC_KEYS.get((section, key))
            if description is None:
                missing.append(f"{section}.{key} ({spec})")
                continue
            out.append(f"| `{key}` | {cell(_type_name(field.annotation))} | {cell(_default(field))}"
                       f" | {cell(_bounds(field))} | {cell(description)} |\n")
        out.append("\n")
    if missing:
        raise ValueError("rubric keys without a description (add them to RUBRIC_KEYS in "
                         "scripts/reference_text.py, or give the field a description): "
                         + ", ".join(missing))
    gone = sorted(f"{s}.{k}" for s, k in set(RUBRIC_KEYS) - seen)
    if gone:  # harmless in the page (never printed), so a warning, not a failure
        print("gen_reference: warning: descriptions for rubric keys that do not exist (remove "
              "them from scripts/reference_text.py): " + ", ".join(gone), file=sys.stderr)
    return "".join(out).rstrip() + "\n"
