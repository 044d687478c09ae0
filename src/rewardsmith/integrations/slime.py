"""slime and Miles: ``--custom-rm-path rewardsmith.integrations.slime.custom_rm``.

slime awaits ``custom_rm(args, sample)`` for each sample, or, with ``--group-rm``,
``custom_rm(args, samples)`` once per group, expecting one reward per sample back. When a custom
generate function returns several samples for one prompt, the group slime hands over with
``--group-rm`` is a list of lists; each inner sample is scored (the whole list is one group) and
the rewards come back in the same nested shape.

A sample has ``prompt`` (text or chat messages), ``response``, ``label``, ``metadata`` (a dict or
None) and ``status``: ``TRUNCATED`` marks the rollout truncated; ``ABORTED`` and ``FAILED`` (a
tool call or an external API failed during generation: the response may be partial) mask it
without scoring. End-of-turn texts are cut from the response's end (slime keeps the stop text
there; see ``rewardsmith.integrations.endtext`` and ``REWARDSMITH_END_TEXTS``).

The return value is a float, or, when ``args.reward_key`` is set (``--reward-key``), a dict with
that key (and ``args.eval_reward_key``, if set) holding the reward, plus ``masked``, ``acc`` and one
key per component (``component_<name>`` for a name that is a reserved log key or a reward key).
slime has no masked reward: a masked sample gets ``masked_reward``
(``REWARDSMITH_MASKED_REWARD``, default 0.0).

The rubric is ``sample.metadata["rubric"]``, else ``REWARDSMITH_RUBRIC``. Each call is one
tracker step when tracking is on (``REWARDSMITH_LOG_TO``; docs/tracking.md), its aborted and
failed samples counted as masked.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from rewardsmith.errors import ConfigError, InputError
from rewardsmith.integrations.adapters import (
    Scored,
    accuracy,
    accuracy_component,
    ascore_rollouts,
    completion_of,
    log_key,
    masked_score,
    record_step,
    rubric_for,
    text_or_messages,
)
from rewardsmith.integrations.endtext import EndTexts, resolve_end_texts
from rewardsmith.types import Rollout

__all__ = ["ENV_MASKED_REWARD", "MASKED_STATES", "custom_rm", "masked_reward", "sample_state"]

ENV_MASKED_REWARD = "REWARDSMITH_MASKED_REWARD"


def masked_reward() -> float:
    """The number a masked sample gets (slime needs a number for every sample)."""
    raw = os.environ.get(ENV_MASKED_REWARD, "").strip()
    if not raw:
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{ENV_MASKED_REWARD}={raw!r}: expected a number") from None
    if not math.isfinite(value):
        raise ConfigError(f"{ENV_MASKED_REWARD}={raw!r}: expected a finite number")
    return value


# Statuses whose sample is masked without scoring, and the reason recorded.
MASKED_STATES = {"aborted": "generation aborted", "failed": "generation failed"}


def sample_state(status: Any) -> str:
    """``truncated``, ``aborted``, ``failed`` or ``ok`` for slime's ``Sample.Status`` (an enum or
    a string)."""
    if status is None:
        return "ok"
    names = {str(getattr(status, "name", "")).lower(), str(getattr(status, "value", "")).lower(),
             str(status).lower().rsplit(".", 1)[-1]}
    for state in ("truncated", "aborted", "failed"):
        if state in names:
            return state
    return "ok"


def _metadata(sample: Any, where: str) -> dict[str, Any]:
    metadata = getattr(sample, "metadata", None)
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InputError(f"{where}: sample.metadata must be a dict or None, not "
                         f"{type(metadata).__name__}")
    return dict(metadata)


def _rollout(sample: Any, index: int, where: str, texts: EndTexts) -> tuple[Rollout, str]:
    if not hasattr(sample, "response"):
        raise InputError(f"{where}: expected a slime Sample with .response, got "
                         f"{type(sample).__name__}")
    state = sample_state(getattr(sample, "status", None))
    group = getattr(sample, "group_index", None)
    rollout = Rollout(
        id=str(getattr(sample, "index", None) if getattr(sample, "index", None) is not None
               else index),
        group=str(group) if group is not None else "0",
        prompt=text_or_messages(getattr(sample, "prompt", "")),
        completion=completion_of(sample.response, texts),
        answer=getattr(sample, "label", None),
        metadata=_metadata(sample, where),
        truncated=state == "truncated",
    )
    return rollout, state


def _reward_keys(args: Any) -> list[str]:
    keys = []
    for attribute in ("reward_key", "eval_reward_key"):
        value = getattr(args, attribute, None)
        if isinstance(value, str) and value and value not in keys:
            keys.append(value)
    return keys


def _result(scored: Scored, keys: Sequence[str], fallback: float) -> float | dict[str, float]:
    score = scored.score
    reward = fallback if score.reward is None else score.reward
    if not keys:
        return reward
    out = {key: reward for key in keys}
    out.setdefault("masked", 1.0 if score.reward is None else 0.0)
    out.setdefault("acc", accuracy(score, accuracy_component(scored.rubric)))
    taken = set(keys)
    for name in scored.rubric.names:
        value = score.components.get(name)
        out[log_key(name, taken)] = 0.0 if value is None else value
    return out


def _flatten(sample: Any) -> tuple[list[Any], list[int] | None]:
    """The samples of one call, and the inner lists' lengths when it is a list of lists."""
    if not isinstance(sample, (list, tuple)):
        return [sample], None
    if not any(isinstance(item, (list, tuple)) for item in sample):
        return list(sample), None
    flat: list[Any] = []
    sizes: list[int] = []
    for position, item in enumerate(sample):
        members = list(item) if isinstance(item, (list, tuple)) else [item]
        if any(isinstance(m, (list, tuple)) for m in members):
            raise InputError(f"custom_rm sample {position}: lists nest at most two deep "
                             "(a group of samples, or a group of lists of samples)")
        flat.extend(members)
        sizes.append(len(members) if isinstance(item, (list, tuple)) else -1)
    return flat, sizes


def _nest(results: list[Any], sizes: list[int]) -> list[Any]:
    out: list[Any] = []
    at = 0
    for size in sizes:
        if size < 0:  # a bare sample beside the lists
            out.append(results[at])
            at += 1
        else:
            out.append(results[at:at + size])
            at += size
    return out


async def custom_rm(args: Any, sample: Any, **kwargs: Any) -> Any:
    """slime's custom reward: one sample -> a reward; a list of samples -> a list of rewards; a
    list of lists of samples -> a list of lists of rewards."""
    samples, sizes = _flatten(sample)
    keys = _reward_keys(args)
    fallback = masked_reward()
    texts = resolve_end_texts(None)
    rollouts: list[Rollout] = []
    states: list[str] = []
    for index, item in enumerate(samples):
        rollout, state = _rollout(item, index, f"custom_rm sample {index}", texts)
        rollouts.append(rollout)
        states.append(state)
    wanted = [r.metadata.get("rubric") for r in rollouts]
    live = [i for i, state in enumerate(states) if state not in MASKED_STATES]
    scored: list[Scored | None] = [None] * len(samples)
    if live:
        done = await ascore_rollouts([rollouts[i] for i in live],
                                     sample_rubrics=[wanted[i] for i in live], record=False)
        for index, result in zip(live, done):
            scored[index] = result
    for index, state in enumerate(states):
        if state in MASKED_STATES:
            rubric = rubric_for(None, wanted[index])
            scored[index] = Scored(masked_score(rollouts[index], rubric, MASKED_STATES[state]),
                                   rubric)
    complete = [s for s in scored if s is not None]
    record_step(complete, rollouts=rollouts)  # one step, masked samples included
    results = [_result(s, keys, fallback) for s in complete]
    if sizes is not None:
        return _nest(results, sizes)
    if isinstance(sample, (list, tuple)):
        return results
    return results[0]
