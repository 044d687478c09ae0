"""OpenRLHF: a reward function file for ``--reward.remote_url`` (``--remote_rm_url`` before
0.10.2), and the remote reward contract.

Given a ``.py`` file, OpenRLHF loads it in each rollout actor and calls (since 0.9.10: once per
sample, lists of length 1; older versions: once per batch)::

    reward_func(queries, prompts, labels)

where each query is the prompt followed by the response, decoded with special tokens kept (so it
ends with the end-of-sequence text, which is cut off before grading: ``rewardsmith.integrations.endtext``,
``end_texts=`` or ``REWARDSMITH_END_TEXTS``). Given an URL, it posts
``{"query": [...], "prompts": [...], "labels": [...]}`` there (``rewardsmith serve`` answers on
``/get_reward``). Both answer ``{"rewards": ..., "scores": ..., "extra_logs": {...}}``:
``rewards`` is what OpenRLHF trains on (0.0 for a masked sample: it cannot mask), ``scores`` is
the same number (used by ``--dynamic_filtering``), and ``extra_logs`` holds per-sample lists
``masked``, ``acc`` and one per component. The file form returns torch tensors when torch can be
imported, lists otherwise.

The response is the query with its prompt cut off the front (or after the first place the prompt
appears); a query that does not contain its prompt is graded whole. Groups are the runs of
identical consecutive prompts within one call (since 0.9.10, groups of one). A component named
like a key OpenRLHF logs itself (``reward``, ``score``, ``acc``, ...) is logged as
``component_<name>``. The rubric is
``REWARDSMITH_RUBRIC`` (or ``rubric=`` in Python); it must reach OpenRLHF's ray workers.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterable, Sequence
from typing import Any

from rewardsmith.errors import InputError
from rewardsmith.integrations.adapters import (
    RubricSpec,
    Scored,
    accuracy,
    accuracy_component,
    ascore_rollouts,
    consecutive_groups,
    default_rubric,
    log_key,
    score_rollouts,
)

# Absolute imports: OpenRLHF loads this file by path, outside its package.
from rewardsmith.integrations.endtext import EndTexts, resolve_end_texts
from rewardsmith.rubric import Rubric
from rewardsmith.types import Rollout

__all__ = ["areward_func", "build_rollouts", "reward_func", "split_query", "to_reply"]


def split_query(query: str, prompt: str | None) -> str:
    """The response inside an OpenRLHF query (prompt + response)."""
    if not prompt:
        return query
    if query.startswith(prompt):
        return query[len(prompt):]
    at = query.find(prompt)
    if at >= 0:
        return query[at + len(prompt):]
    return query


def _as_list(value: Any, name: str, size: int) -> list[Any]:
    if value is None:
        return [None] * size
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InputError(f"OpenRLHF {name!r} must be a list, not {type(value).__name__}")
    if len(value) != size:
        raise InputError(f"OpenRLHF sent {len(value)} {name} for {size} queries")
    return list(value)


def build_rollouts(queries: Sequence[Any], prompts: Sequence[Any] | None,
                   labels: Sequence[Any] | None,
                   end_texts: Iterable[str] | EndTexts | None = None) -> list[Rollout]:
    """Rollouts from OpenRLHF's three lists; ``InputError`` names what does not fit."""
    texts = resolve_end_texts(end_texts)
    if isinstance(queries, (str, bytes)) or not isinstance(queries, Sequence):
        raise InputError(f"OpenRLHF 'query' must be a list, not {type(queries).__name__}")
    size = len(queries)
    prompt_list = _as_list(prompts, "prompts", size)
    label_list = _as_list(labels, "labels", size)
    groups = consecutive_groups([p if isinstance(p, str) else str(p) for p in prompt_list])
    rollouts = []
    for index, (query, prompt) in enumerate(zip(queries, prompt_list)):
        if not isinstance(query, str):
            raise InputError(f"OpenRLHF query {index} must be text, not {type(query).__name__}")
        if prompt is not None and not isinstance(prompt, str):
            raise InputError(f"OpenRLHF prompt {index} must be text, not {type(prompt).__name__}")
        rollouts.append(Rollout(id=str(index), group=groups[index], prompt=prompt or "",
                                completion=texts.cut(split_query(query, prompt)),
                                answer=label_list[index]))
    return rollouts


def to_reply(scored: Sequence[Scored], default: Rubric | None) -> dict[str, Any]:
    """OpenRLHF's reply: ``rewards``, ``scores`` and ``extra_logs``, as plain lists."""
    rewards = []
    logs: dict[str, list[float]] = {"masked": [], "acc": []}
    names = default.names if default is not None else []
    keys = {name: log_key(name) for name in names}
    for name in names:
        logs[keys[name]] = []
    for item in scored:
        score = item.score
        reward = score.reward
        rewards.append(0.0 if reward is None or not math.isfinite(reward) else reward)
        logs["masked"].append(1.0 if reward is None else 0.0)
        logs["acc"].append(accuracy(score, accuracy_component(item.rubric)))
        for name in names:
            value = score.components.get(name) if item.rubric is default else None
            logs[keys[name]].append(0.0 if value is None else value)
    return {"rewards": rewards, "scores": list(rewards), "extra_logs": logs}


def _tensors(reply: dict[str, Any]) -> dict[str, Any]:
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return reply
    as_tensor = torch.tensor
    return {
        "rewards": as_tensor(reply["rewards"], dtype=torch.float32),
        "scores": as_tensor(reply["scores"], dtype=torch.float32),
        "extra_logs": {k: as_tensor(v, dtype=torch.float32)
                       for k, v in reply["extra_logs"].items()},
    }


def reward_func(queries: Sequence[str], prompts: Sequence[str] | None = None,
                labels: Sequence[Any] | None = None, *, rubric: RubricSpec | None = None,
                end_texts: Iterable[str] | None = None, **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's python-file reward function (synchronous)."""
    rollouts = build_rollouts(queries, prompts, labels, end_texts)
    scored = score_rollouts(rollouts, explicit=rubric)
    return _tensors(to_reply(scored, default_rubric(rubric)))


async def areward_func(queries: Sequence[str], prompts: Sequence[str] | None = None,
                       labels: Sequence[Any] | None = None, *, rubric: RubricSpec | None = None,
                       end_texts: Iterable[str] | None = None) -> dict[str, Any]:
    """The same, awaitable and with plain lists (what the HTTP route sends)."""
    rollouts = build_rollouts(queries, prompts, labels, end_texts)
    scored = await ascore_rollouts(rollouts, explicit=rubric)
    return to_reply(scored, default_rubric(rubric))
