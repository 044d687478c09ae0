"""Why a component's stored results are, or are not, reused: what changed since a run.

A run records, per component, what its identity was made of (``recording.component_records``:
the reward, each code file's hash, installed packages' versions, each param's hash, timeout,
version). Comparing those with the component now names the change: ``params changed: marker``,
``code changed: rewardsmith/rewards/extract.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rewardsmith.rubric._model import Component
from rewardsmith.rubric.code_identity import changed_code
from rewardsmith.types import content_hash

__all__ = ["reuse_reason"]

_SHOWN = 4  # names listed before "and N more"


def reuse_reason(component: Component, recorded: Sequence[Mapping[str, Any]], *,
                 compute: int, run_id: str) -> str:
    """One line for a person: why ``component`` computes ``compute`` results against the
    components ``recorded`` by run ``run_id``."""
    if compute == 0:
        return "all results stored"
    identity = component.identity()
    same_name = next((r for r in recorded if r.get("name") == component.name), None)
    if same_name is None:
        twin = next((r for r in recorded if r.get("identity") == identity), None)
        if twin is not None:
            return (f"{compute:,} results missing (run {run_id} has it as "
                    f"{twin.get('name')!r}: they failed or were not stored)")
        return f"new component (not in run {run_id})"
    if same_name.get("identity") == identity:
        if component.reads is not None:
            return (f"unchanged; {compute:,} results missing (the files it reads changed, "
                    f"or they failed or were not stored)")
        return f"unchanged; {compute:,} results missing (they failed or were not stored)"
    changes = _changes(component, same_name)
    if not changes:
        return f"identity changed since run {run_id}"
    return "; ".join(changes)


def _changes(component: Component, before: Mapping[str, Any]) -> list[str]:
    out = []
    if before.get("spec") not in (None, component.spec):
        out.append(f"reward changed: {before.get('spec')} -> {component.spec}")
    code = component.code()
    if code is None:
        if component.evaluator is not None:
            out.append("judge changed (model, prompt, sampling or criterion)")
        return out
    if "code" not in before:
        out.append("code not recorded by that run (scored before code files were kept), "
                   "so not known to be the same")
        return out
    files = changed_code(dict(before["code"]), code.record())
    if files:
        out.append(f"code changed: {_some(files)}")
    params_now = {str(k): content_hash(v, length=12) for k, v in component.params.items()}
    params_before = dict(before.get("params") or {})
    names = sorted(k for k in set(params_now) | set(params_before)
                   if params_now.get(k) != params_before.get(k))
    if names:
        out.append(f"params changed: {_some(names)}")
    for key, now in (("timeout", component.timeout), ("reward_key", component.reward_key),
                     ("group", component.group), ("version", component.version)):
        if key in before and before[key] != now:
            out.append(f"{key} changed: {before[key]!r} -> {now!r}")
    return out


def _some(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown if len(names) <= _SHOWN else f"{shown} and {len(names) - _SHOWN} more"
