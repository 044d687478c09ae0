"""TRL ``GRPOTrainer``: reward functions for ``reward_funcs``.

TRL calls each entry of ``reward_funcs`` as::

    f(prompts=[...], completions=[...], completion_ids=[...], **dataset_columns, trainer_state=...)

with one list entry per completion (text, or a list of chat messages in conversational mode), and
the dataset's other columns as lists of the same length (TRL 1.16 also passes ``log_extra`` and
``log_metric`` callables, which are not columns and are ignored). A function returns one float
per completion, or None where it does not apply; TRL multiplies each function's output by its
entry in ``GRPOConfig.reward_weights`` and adds them up with ``nansum``. TRL passes no
truncation flag: a ``truncated`` column, when the dataset has one, is read as such.

Usage::

    from rewardsmith.integrations.trl import trl_reward_funcs

    funcs = trl_reward_funcs("rubric.yaml")            # one function per component
    config = GRPOConfig(..., reward_weights=funcs.reward_weights)
    trainer = GRPOTrainer(..., reward_funcs=funcs, args=config)

The reference answer is the first of the columns ``answer``, ``solution``, ``ground_truth`` and
``label``; every other column goes into the rollout's metadata (a ``rubric`` column picks the
rubric per row, with ``per_component=False``). ``environments`` (the environment objects TRL
passes with ``environment_factory``) is not a column and stays out of the metadata. Groups are the
runs of identical consecutive prompts in the batch: TRL puts the ``num_generations`` completions of
a prompt next to each other. With several processes a group can be split between them; a batch
whose first or last group is shorter than ``num_generations`` warns once (a group reward then sees
part of the group). End-of-turn texts are cut from the completions' ends
(``rewardsmith.integrations.endtext``; ``end_texts=``).

``GRPOConfig(multi_objective_aggregation="normalize_then_sum")`` normalizes each reward function
over its group before weighting: with one function per component that changes what is trained
(a component's weight no longer scales its share), so the first call warns once; use
``per_component=False`` there, or the default ``sum_then_normalize``.
"""

from __future__ import annotations

import inspect
import threading
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rewardsmith.errors import ConfigError, InputError
from rewardsmith.integrations.adapters import (
    RubricSpec,
    Scored,
    completion_of,
    consecutive_groups,
    counted_components,
    default_rubric,
    prompt_key,
    score_rollouts,
    text_or_messages,
)
from rewardsmith.integrations.endtext import EndTexts, resolve_end_texts
from rewardsmith.rubric import Rubric
from rewardsmith.tracking.base import Tracker
from rewardsmith.types import Rollout

__all__ = ["ANSWER_COLUMNS", "RewardFuncs", "trl_reward_funcs"]

ANSWER_COLUMNS = ("answer", "solution", "ground_truth", "label")
# Arguments TRL passes that are not dataset columns.
_NOT_COLUMNS = frozenset({"prompts", "completions", "completion_ids", "trainer_state",
                          "log_extra", "log_metric", "environments"})

RewardFunc = Callable[..., list[float | None]]


class RewardFuncs(list[RewardFunc]):
    """The functions to pass as ``reward_funcs``, with ``reward_weights`` for ``GRPOConfig``."""

    def __init__(self, funcs: Sequence[RewardFunc], weights: Sequence[float], rubric: Rubric | None):
        super().__init__(funcs)
        self.reward_weights = [float(w) for w in weights]
        self.rubric = rubric

    @property
    def names(self) -> list[str]:
        return [f.__name__ for f in self]


def _rollouts(prompts: Sequence[Any] | None, completions: Sequence[Any],
              columns: dict[str, Any], texts: EndTexts) -> tuple[list[Rollout], list[Any] | None]:
    size = len(completions)
    if prompts is not None and len(prompts) != size:
        raise InputError(f"TRL passed {len(prompts)} prompts for {size} completions")
    per_row = {}
    for name, value in columns.items():
        if name in _NOT_COLUMNS:
            continue
        if isinstance(value, (list, tuple)) and len(value) == size:
            per_row[name] = value
    answer_column = next((c for c in ANSWER_COLUMNS if c in per_row), None)
    rows = list(prompts) if prompts is not None else [""] * size
    groups = consecutive_groups([prompt_key(p) for p in rows])
    rollouts = []
    for index in range(size):
        metadata = {k: v[index] for k, v in per_row.items() if k != answer_column}
        truncated = bool(metadata.get("truncated", False))
        rollouts.append(Rollout(
            id=str(index), group=groups[index], prompt=text_or_messages(rows[index]),
            completion=completion_of(completions[index], texts),
            answer=per_row[answer_column][index] if answer_column is not None else None,
            metadata=metadata, truncated=truncated,
        ))
    rubrics = list(per_row["rubric"]) if "rubric" in per_row else None
    return rollouts, rubrics


class _BatchScores:
    """Scores the batch once for all the per-component functions TRL calls one after another."""

    def __init__(self, rubric: RubricSpec | None, texts: EndTexts, functions: int,
                 trackers: Sequence[Tracker] = ()):
        self.rubric = rubric
        self.texts = texts
        self.functions = functions
        self.trackers = tuple(trackers)
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        self._key: tuple[Any, ...] | None = None
        self._scored: list[Scored] = []

    def get(self, prompts: Sequence[Any] | None, completions: Sequence[Any],
            columns: dict[str, Any]) -> list[Scored]:
        # TRL hands every reward function the same list objects; equal content also matches, so
        # a copy does not rescore. The key holds references, so an id is never reused under it.
        key = (prompts, completions, {k: v for k, v in columns.items() if k not in _NOT_COLUMNS})
        with self._lock:
            if self._key is not None and _same(self._key, key):
                return self._scored
            rollouts, rubrics = _rollouts(prompts, completions, columns, self.texts)
            self._check_trainer([r.group for r in rollouts])
            scored = score_rollouts(rollouts, explicit=self.rubric, sample_rubrics=rubrics,
                                    trackers=self.trackers)
            self._key, self._scored = key, scored
            return scored

    def _check_trainer(self, groups: Sequence[str]) -> None:
        """Warn once each about a split group and about per-component normalization."""
        trainer = _calling_trainer()
        if trainer is None:
            return
        # TRL groups evaluation batches by num_generations_eval.
        training = getattr(getattr(trainer, "model", None), "training", True)
        expected = getattr(trainer, "num_generations" if training else "num_generations_eval",
                           None)
        sizes = [len(run) for run in _runs(groups)]
        edges = {sizes[0], sizes[-1]} if sizes else set()
        if (isinstance(expected, int) and "split" not in self._warned
                and any(size < expected for size in edges)):
            self._warned.add("split")
            warnings.warn(
                f"a batch starts or ends with a group of {min(edges)} completions where "
                f"{expected} were expected: with several processes TRL can split one prompt's "
                "group between them, and a group reward then sees only part of the group",
                UserWarning, stacklevel=4)
        aggregation = getattr(trainer, "multi_objective_aggregation", None)
        if (aggregation == "normalize_then_sum" and self.functions > 1
                and "normalize" not in self._warned):
            self._warned.add("normalize")
            warnings.warn(
                "multi_objective_aggregation='normalize_then_sum' normalizes each reward function "
                "over its group before the weights apply, so with one function per rubric "
                "component the trained reward is no longer the rubric's; use "
                "trl_reward_funcs(..., per_component=False) or 'sum_then_normalize'",
                UserWarning, stacklevel=4)


def _runs(groups: Sequence[str]) -> list[list[str]]:
    runs: list[list[str]] = []
    for label in groups:
        if runs and runs[-1][0] == label:
            runs[-1].append(label)
        else:
            runs.append([label])
    return runs


def _calling_trainer() -> Any:
    """The ``GRPOTrainer`` whose ``_calculate_rewards`` called the reward function, if any.

    TRL hands reward functions no config, so its settings are read from the caller's ``self``;
    only plain attributes are read (``num_generations``, ``multi_objective_aggregation``,
    ``model.training``), and anything else yields None.
    """
    frame = inspect.currentframe()
    try:
        for _ in range(8):
            if frame is None:
                return None
            if frame.f_code.co_name == "_calculate_rewards":
                return frame.f_locals.get("self")
            frame = frame.f_back
        return None
    finally:
        del frame


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    for x, y in zip(a, b):
        if x is y:
            continue
        try:
            if x != y:
                return False
        except Exception:  # noqa: BLE001 - arrays and odd objects: treat as different
            return False
    return True


def _component_func(batch: _BatchScores, rubric: Rubric, name: str) -> RewardFunc:
    def reward(prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
               completion_ids: Sequence[Any] | None = None, **columns: Any) -> list[float | None]:
        if completions is None:
            raise InputError("TRL reward function called without 'completions'")
        out: list[float | None] = []
        for scored in batch.get(prompts, completions, columns):
            if scored.rubric is not rubric:
                raise ConfigError(
                    f"per-component reward functions score with rubric {rubric.name!r}, but a "
                    f"row's 'rubric' column chose {scored.rubric.name!r}; use "
                    "trl_reward_funcs(..., per_component=False) for a rubric per row"
                )
            out.append(counted_components(scored.score, rubric)[name])
        return out

    reward.__name__ = reward.__qualname__ = name
    return reward


def _total_func(batch: _BatchScores, name: str) -> RewardFunc:
    def reward(prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
               completion_ids: Sequence[Any] | None = None, **columns: Any) -> list[float | None]:
        if completions is None:
            raise InputError("TRL reward function called without 'completions'")
        return [s.score.reward for s in batch.get(prompts, completions, columns)]

    reward.__name__ = reward.__qualname__ = name
    return reward


def trl_reward_funcs(rubric: RubricSpec | None = None, *, per_component: bool = True,
                     end_texts: Iterable[str] | None = None,
                     tracker: Tracker | None = None) -> RewardFuncs:
    """Reward functions for ``GRPOTrainer(reward_funcs=...)`` and their ``reward_weights``.

    ``per_component=True``: one function per rubric component, named after it (TRL logs
    ``rewards/<name>/mean``), each returning what that component adds to the total, with the
    component weights as ``reward_weights``; TRL's weighted sum then equals the rubric's reward
    exactly. This needs a rubric that is a weighted sum (no ``formula``, no ``quantize``).
    ``per_component=False``: one function returning the rubric's total, weight 1.0.

    A masked sample gets None from every function. The batch is scored once, by the first
    function TRL calls; the others reuse the scores. ``end_texts``: the end-of-turn texts cut from
    completions (default: ``REWARDSMITH_END_TEXTS`` or ``rewardsmith.integrations.endtext.DEFAULT_END_TEXTS``).
    ``tracker``: a ``rewardsmith.tracking`` tracker that gets each scored batch as one step
    (per-component statistics, statuses, zero-variance groups, judge cost); it is not closed
    here.
    """
    chosen = default_rubric(rubric)
    texts = resolve_end_texts(end_texts)
    functions = len(chosen.components) if per_component and chosen is not None else 1
    # The spec, not the rubric, so the engine is the one engine_for(spec) gives.
    batch = _BatchScores(rubric, texts, functions, () if tracker is None else (tracker,))
    if not per_component:
        name = _safe_name(chosen.name if chosen is not None else "rewardsmith")
        return RewardFuncs([_total_func(batch, name)], [1.0], chosen)
    if chosen is None:
        raise ConfigError(
            "per-component reward functions need the rubric now: pass it to trl_reward_funcs() "
            "or set REWARDSMITH_RUBRIC before calling it"
        )
    if chosen.formula is not None or chosen.quantize is not None:
        what = "a formula" if chosen.formula is not None else "quantize"
        raise ConfigError(
            f"rubric {chosen.name!r} uses {what}, so TRL's weighted sum of components cannot "
            "reproduce its reward; use trl_reward_funcs(..., per_component=False)"
        )
    funcs = [_component_func(batch, chosen, c.name) for c in chosen.components]
    return RewardFuncs(funcs, [c.weight for c in chosen.components], chosen)


def _safe_name(text: str) -> str:
    cleaned = "".join(ch if ch.isalnum() or ch in "_-." else "_" for ch in text)
    return cleaned or "rewardsmith"
