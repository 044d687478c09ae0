"""What the harness knows about each built-in reward: its kinds, its range, and the params it is
tested with when it needs some.

========================  =================  ========  ==========================================
built-in                  kinds              range     params used by ``rewardsmith test``
========================  =================  ========  ==========================================
gsm8k                     number-marker      [0, 1]
number, math              number             [0, 1]
exact, normalized, f1     text               [0, 1]
choice                    choice             [0, 1]
boxed_<name>              <kind>-boxed       [0, 1]
marker                    marker             [0, 1]    (marker '####', max_count 1 by default)
think_format              think              [0, 1]
regex                     pattern            [0, 1]    pattern '####\\s*-?[\\d,.]+\\s*$' (an
                                                       answer line at the end), unless given
length                    length             [-1, 0]   (max_length 4096, buffer 512 by default)
ifeval                    ifeval             [0, 1]
json_schema, json_match   json-schema, ...   [0, 1]
tool_call                 tool-call          [0, 1]
code                      code               [0, 1]    (language python by default)
tool_calls                tool-use           [0, 1]    tools: a get_weather function
turn_budget               turn-budget        [0, 1]    max_turns 2, zero_at 6
workspace_files           workspace-files    [0, 1]    allowed and required: answer.txt
verifier_script           harbor-task        [0, 1]    task: the shipped word-count task
repo_tests                repo-task          [0, 1]    (the tests' Python: this one, or
                                                       ``-p environment=...``)
========================  =================  ========  ==========================================

A built-in not listed here is a verifier in [0, 1] or a rule of unknown range, and its kinds are
detected like a user's function.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rewardsmith.rubric import (
    Component,
    Rubric,
)

from ..rewards import get_builtin
from .agent_kinds import AGENT_TOOLS
from .harbor_kinds import harbor_task_params

__all__ = ["Profile", "builtin_profile", "default_params", "rubric_profile", "signature_defaults"]

Range = tuple[float, float]
UNIT: Range = (0.0, 1.0)


@dataclass(frozen=True)
class Profile:
    """``kinds`` None means: detect them by calibration."""

    kinds: tuple[str, ...] | None
    value_range: Range | None
    params: Mapping[str, Any] = field(default_factory=dict)


_PROFILES: dict[str, Profile] = {
    "gsm8k": Profile(("number-marker",), UNIT),
    "number": Profile(("number",), UNIT),
    "math": Profile(("number",), UNIT),
    "boxed_math": Profile(("number-boxed",), UNIT),
    "exact": Profile(("text",), UNIT),
    "normalized": Profile(("text",), UNIT),
    "f1": Profile(("text",), UNIT),
    "choice": Profile(("choice",), UNIT),
    "marker": Profile(("marker",), UNIT),
    "think_format": Profile(("think",), UNIT),
    "regex": Profile(("pattern",), UNIT, {"pattern": r"####\s*-?[\d,.]+\s*$"}),
    "length": Profile(("length",), (-1.0, 0.0)),
    "ifeval": Profile(("ifeval",), UNIT),
    "json_schema": Profile(("json-schema",), UNIT),
    "json_match": Profile(("json-match",), UNIT),
    "tool_call": Profile(("tool-call",), UNIT),
    "code": Profile(("code",), UNIT),
    "tool_calls": Profile(("tool-use",), UNIT, {"tools": AGENT_TOOLS}),
    "turn_budget": Profile(("turn-budget",), UNIT, {"max_turns": 2, "zero_at": 6}),
    "workspace_files": Profile(("workspace-files",), UNIT,
                               {"allowed": ["answer.txt"], "required": ["answer.txt"]}),
    "verifier_script": Profile(("harbor-task",), UNIT, harbor_task_params()),
    "repo_tests": Profile(("repo-task",), UNIT),
}

_BOXED_KIND = {"number": "number-boxed", "number-marker": "number-boxed", "text": "text-boxed",
               "choice": "choice-boxed"}


def builtin_profile(name: str) -> Profile | None:
    """The profile of the built-in ``name``; None when there is no such built-in."""
    found = get_builtin(name)
    if found is None:
        return None
    if name in _PROFILES:
        return _PROFILES[name]
    if name.startswith("boxed_") and name[len("boxed_"):] in _PROFILES:
        inner = _PROFILES[name[len("boxed_"):]]
        if inner.kinds is not None and all(k in _BOXED_KIND for k in inner.kinds):
            kinds = tuple(dict.fromkeys(_BOXED_KIND[k] for k in inner.kinds))
            return Profile(kinds, inner.value_range, inner.params)
    return Profile(None, UNIT if found.kind == "verifier" else None)


def default_params(name: str) -> dict[str, Any]:
    """Params a built-in is tested with when the user gives none (see the table above)."""
    profile = _PROFILES.get(name)
    return dict(profile.params) if profile is not None else {}


def signature_defaults(func: Callable[..., Any] | None) -> dict[str, Any]:
    """A function's keyword defaults (so a length limit left at its default is still known)."""
    if func is None:
        return {}
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


@dataclass(frozen=True)
class RubricProfile:
    declared: tuple[tuple[str, Mapping[str, Any]], ...]  # (kind, the component's params)
    detect: bool  # some component's kinds are unknown
    value_range: Range | None


def _component_profile(component: Component) -> Profile:
    if isinstance(component.reward, str):
        profile = builtin_profile(component.spec)
        if profile is not None:
            return profile
    return Profile(None, None)


def rubric_profile(rubric: Rubric) -> RubricProfile:
    """The kinds a rubric's built-ins declare, and the range of its total when it is known."""
    declared: list[tuple[str, Mapping[str, Any]]] = []
    detect = False
    low = high = 0.0
    bounded = rubric.formula is None
    for component in rubric.components:
        profile = _component_profile(component)
        params = {**signature_defaults(component.func), **component.params}
        if profile.kinds is None:
            detect = True
        else:
            declared.extend((kind, params) for kind in profile.kinds)
        if profile.value_range is None:
            bounded = False
            continue
        ends = [component.weight * profile.value_range[0],
                component.weight * profile.value_range[1]]
        if component.requires is not None:
            ends.append(0.0)  # a closed gate counts the component as 0
        low += min(ends)
        high += max(ends)
    if not bounded:
        return RubricProfile(tuple(declared), detect, None)
    slack = (rubric.quantize or 0.0) / 2
    return RubricProfile(tuple(declared), detect, (low - slack, high + slack))


def finite_range(value_range: Range | None) -> bool:
    return value_range is not None and all(math.isfinite(v) for v in value_range)
