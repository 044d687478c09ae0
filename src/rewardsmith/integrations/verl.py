"""verl: a ``custom_reward_function`` for the naive, DAPO, batch and reward-loop managers.

verl calls, per sample::

    compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=..., **reward_kwargs)

and, with the ``batch`` reward manager (verl before 0.9; its reward loop has none), once per
batch, each argument a numpy array::

    compute_score(data_sources=[...], solution_strs=[...], ground_truths=[...], extra_infos=[...], **reward_kwargs)

Both forms go to ``compute_score`` (``compute_score_batch`` is the batch form by name, and
``compute_score_async`` the per-sample form for reward loops that await it). Config (verl 0.9;
before 0.9 the same keys without the ``reward.`` prefix)::

    reward.custom_reward_function.path=pkg://rewardsmith.integrations.verl
    reward.custom_reward_function.name=compute_score

Every sample's dict has the same keys (verl takes the key list from the first sample):
``score`` (the reward; 0.0 when masked, since verl cannot mask), ``acc`` (1.0 when the rubric's
accuracy component, its first built-in verifier, scored above 0: for DAPO's
``filter_groups.metric=acc``), ``masked`` and ``failed`` (1.0 or 0.0), and one key per component of
the default rubric (its value; 0.0 when it has none, or when the sample used another rubric).

The rubric is ``reward_kwargs.rubric``
(``+reward.custom_reward_function.reward_kwargs.rubric=...``), else ``REWARDSMITH_RUBRIC``;
``extra_info["rubric"]`` overrides both for one sample. The prompt is
``extra_info["question"]`` or ``extra_info["prompt"]`` when present. ``reward_kwargs.end_texts``
(a list) sets the end-of-turn texts cut from the response's end (``rewardsmith.integrations.endtext``).

Groups: in the batch form, a run of consecutive samples of the same prompt is one group, the
prompt being known by ``extra_info["index"]``, else by ``extra_info["question"]`` or
``["prompt"]``, else by the whole ``extra_info`` and ground truth (a warning says once that two
prompts with equal ones then merge). In the per-sample form, which verl's ``main_ppo`` uses in
0.7 to 0.9, each sample is its own group, so a group reward sees groups of one.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from rewardsmith.errors import ConfigError, InputError
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

# Absolute imports: verl may load this file by path, outside its package.
from rewardsmith.integrations.endtext import EndTexts, resolve_end_texts
from rewardsmith.rubric import Rubric
from rewardsmith.types import Rollout, Status, content_hash

__all__ = ["FIXED_KEYS", "compute_score", "compute_score_async", "compute_score_batch"]

FIXED_KEYS = ("score", "acc", "masked", "failed")
_BATCH_ARGUMENTS = ("data_sources", "solution_strs", "ground_truths", "extra_infos")


def _info(extra_info: Any) -> dict[str, Any]:
    if extra_info is None:
        return {}
    if isinstance(extra_info, Mapping):
        return dict(extra_info)
    return {"extra_info": extra_info}


def _rollout(index: int, group: str, data_source: Any, solution_str: Any, ground_truth: Any,
             info: dict[str, Any], texts: EndTexts) -> Rollout:
    if solution_str is not None and not isinstance(solution_str, str):
        raise InputError(f"verl sample {index}: solution_str must be text, not "
                         f"{type(solution_str).__name__}")
    prompt = info.get("question", info.get("prompt", ""))
    metadata = {**info, "data_source": data_source}
    return Rollout(id=str(index), group=group, prompt=prompt if isinstance(prompt, (str, list))
                   else str(prompt), completion=texts.cut(solution_str or ""),
                   answer=ground_truth, metadata=metadata,
                   truncated=bool(info.get("truncated", False)))


# verl's batch manager adds the rollout's own scores to every extra_info; they say nothing about
# which prompt a sample answers.
_NOT_PROMPT = frozenset({"rollout_reward_scores"})
_warned_guess = False


def _prompt_key(data_source: Any, ground_truth: Any, info: Mapping[str, Any]) -> Hashable:
    """What tells this sample's prompt apart from its neighbours' in a batch."""
    global _warned_guess
    if info.get("index") is not None:
        return ("index", str(data_source), str(info["index"]))
    for field in ("question", "prompt"):
        if info.get(field) is not None:
            return (field, str(data_source), content_hash(info[field]))
    if not _warned_guess:
        _warned_guess = True
        warnings.warn(
            "verl batch: extra_info has no 'index', 'question' or 'prompt', so samples are grouped "
            "by equal data source, ground truth and extra_info; two consecutive prompts with equal "
            "ones merge into one group. Add extra_info['index'] to the dataset.",
            UserWarning, stacklevel=4)
    rest = {k: v for k, v in info.items() if k not in _NOT_PROMPT}
    return ("guess", str(data_source), content_hash(ground_truth), content_hash(rest))


def _end_texts(kwargs: Mapping[str, Any]) -> EndTexts:
    value = kwargs.get("end_texts")
    if value is None:
        return resolve_end_texts(None)
    try:
        if isinstance(value, (str, bytes)):
            raise TypeError
        items = list(value)  # OmegaConf hands a list over as a ListConfig
    except TypeError:
        raise ConfigError("verl reward_kwargs.end_texts must be a list of strings, not "
                          f"{type(value).__name__}") from None
    return resolve_end_texts(items)


def _result(scored: Scored, default: Rubric | None) -> dict[str, float]:
    score, rubric = scored.score, scored.rubric
    masked = score.reward is None
    reward = 0.0 if score.reward is None or not math.isfinite(score.reward) else score.reward
    out = {
        "score": reward,
        "acc": accuracy(score, accuracy_component(rubric)),
        "masked": 1.0 if masked else 0.0,
        "failed": 1.0 if score.status in (Status.ERROR, Status.TIMEOUT) else 0.0,
    }
    if default is not None:
        own = score.components if rubric is default else {}
        for name in default.names:
            value = own.get(name)
            out[log_key(name)] = 0.0 if value is None else float(value)
    return out


def _explicit(kwargs: Mapping[str, Any]) -> RubricSpec | None:
    value = kwargs.get("rubric")
    return value if isinstance(value, (str, Rubric)) and value != "" else None


def compute_score_batch(data_sources: Sequence[Any], solution_strs: Sequence[Any],
                        ground_truths: Sequence[Any], extra_infos: Sequence[Any] | None = None,
                        **kwargs: Any) -> list[dict[str, float]]:
    """verl's batch form: lists in, one dict per sample out (same keys for all)."""
    size = len(solution_strs)
    infos = [_info(e) for e in extra_infos] if extra_infos is not None else [{}] * size
    for name, values in (("data_sources", data_sources), ("ground_truths", ground_truths),
                         ("extra_infos", infos)):
        if len(values) != size:
            raise InputError(f"verl passed {len(values)} {name} for {size} solution_strs")
    groups = consecutive_groups([_prompt_key(d, g, i) for d, g, i in
                                 zip(data_sources, ground_truths, infos)])
    texts = _end_texts(kwargs)
    rollouts = [_rollout(n, groups[n], data_sources[n], solution_strs[n], ground_truths[n],
                         infos[n], texts) for n in range(size)]
    explicit = _explicit(kwargs)
    scored = score_rollouts(rollouts, explicit=explicit,
                            sample_rubrics=[i.get("rubric") for i in infos])
    default = default_rubric(explicit)
    return [_result(s, default) for s in scored]


def compute_score(data_source: Any = None, solution_str: Any = None, ground_truth: Any = None,
                  extra_info: Any = None, **kwargs: Any) -> Any:
    """verl's per-sample form (a dict with ``score``); the batch form when given lists."""
    if "solution_strs" in kwargs:
        # verl passes its batch columns as numpy arrays, whose truth value is an error: only
        # a missing column (None) becomes an empty list.
        batch = {name: kwargs.pop(name, None) for name in _BATCH_ARGUMENTS}
        missing: list[Any] = []
        return compute_score_batch(
            missing if batch["data_sources"] is None else batch["data_sources"],
            batch["solution_strs"],
            missing if batch["ground_truths"] is None else batch["ground_truths"],
            batch["extra_infos"], **kwargs)
    info = _info(extra_info)
    rollout = _rollout(0, "0", data_source, solution_str, ground_truth, info, _end_texts(kwargs))
    explicit = _explicit(kwargs)
    [scored] = score_rollouts([rollout], explicit=explicit, sample_rubrics=[info.get("rubric")])
    return _result(scored, default_rubric(explicit))


async def compute_score_async(data_source: Any = None, solution_str: Any = None,
                              ground_truth: Any = None, extra_info: Any = None,
                              **kwargs: Any) -> dict[str, float]:
    """The per-sample form for callers that await it; never blocks their event loop."""
    info = _info(extra_info)
    rollout = _rollout(0, "0", data_source, solution_str, ground_truth, info, _end_texts(kwargs))
    explicit = _explicit(kwargs)
    [scored] = await ascore_rollouts([rollout], explicit=explicit,
                                     sample_rubrics=[info.get("rubric")])
    return _result(scored, default_rubric(explicit))
