"""Testing a slime or Miles reward the way the trainer calls it.

slime awaits ``custom_rm(args, sample)`` once per sample, or, with ``--group-rm``,
``custom_rm(args, samples)`` once per group, expecting one reward per sample back. The reward is a
number, or, with ``--reward-key K``, a dict whose ``K`` holds it. ``rewardsmith test`` wraps such a
function in a reward of its own (:class:`SlimeCall`) that builds a sample with the fields slime's
``Sample`` has (``prompt``, ``response``, ``label``, ``metadata``, ``status``, ``index``,
``group_index``, ``reward``), passes an ``args`` namespace with ``reward_key`` and ``group_rm``
set, and reads the reward back as slime does: a missing key, a dict without ``--reward-key``,
a group answer of the wrong length are errors that name what was wrong.

A function whose first two parameters are ``args`` and ``sample`` (or ``samples``) is tested in
this form without asking; ``--group-rm`` and ``--reward-key`` choose it for any function.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from types import SimpleNamespace
from typing import Any

from rewardsmith.rubric.loading import load_reward

from ..errors import ConfigError
from ..types import Rollout

__all__ = ["SlimeCall", "SlimeGroupCall", "TestSample", "slime_call", "slime_form_of"]


class SampleStatus(Enum):
    """slime's ``Sample.Status`` values."""

    PENDING = "pending"
    COMPLETED = "completed"
    TRUNCATED = "truncated"
    ABORTED = "aborted"
    FAILED = "failed"


@dataclass
class TestSample:
    """The fields of slime's ``Sample`` a reward reads (slime/utils/types.py)."""

    __test__ = False  # not a pytest test class, whatever its name says

    Status = SampleStatus

    group_index: int | None = None
    index: int | None = None
    prompt: Any = ""
    response: str = ""
    response_length: int = 0
    label: Any = None
    reward: Any = None
    status: SampleStatus = SampleStatus.COMPLETED
    metadata: dict[str, Any] = field(default_factory=dict)


def _sample(rollout: Rollout, index: int) -> TestSample:
    return TestSample(
        group_index=0,
        index=index,
        prompt=rollout.prompt,
        response=rollout.text,
        response_length=len(rollout.text),
        label=rollout.answer,
        status=SampleStatus.TRUNCATED if rollout.truncated else SampleStatus.COMPLETED,
        metadata=dict(rollout.metadata),
    )


def slime_form_of(func: Callable[..., Any]) -> str | None:
    """``"sample"`` or ``"samples"`` when ``func`` is written as slime's ``custom_rm(args, ...)``."""
    try:
        parameters = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = [p.name for p in parameters
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) >= 2 and positional[0] == "args" and positional[1] in ("sample", "samples"):
        return positional[1]
    return None


def _reward_of(value: Any, reward_key: str | None, where: str) -> float:
    """The number slime would read from ``value``."""
    if reward_key is not None:
        if not isinstance(value, dict):
            raise TypeError(f"{where} returned {type(value).__name__}, but with --reward-key "
                            f"{reward_key!r} slime reads reward[{reward_key!r}] from a dict")
        if reward_key not in value:
            raise KeyError(f"{where} returned a dict without the --reward-key {reward_key!r} "
                           f"(its keys: {', '.join(map(repr, value)) or 'none'})")
        value = value[reward_key]
    elif isinstance(value, dict):
        raise TypeError(f"{where} returned a dict; slime reads it only with --reward-key "
                        f"(its keys: {', '.join(map(repr, value)) or 'none'})")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where} returned {value!r}; slime needs a number for every sample")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{where} returned {number!r}; slime needs a finite number")
    return number


class _Call:
    """What both forms share: the target, loaded once per process, and slime's ``args``."""

    def __init__(self, spec: str, *, reward_key: str | None, group_rm: bool) -> None:
        self.spec = spec
        self.reward_key = reward_key
        self.group_rm = group_rm
        self.__name__ = spec.replace(":", ".").split(".")[-1] or "custom_rm"
        self._func: Callable[..., Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Worker processes import the target themselves: only the spec travels.
        return {**self.__dict__, "_func": None}

    def _target(self) -> Callable[..., Any]:
        if self._func is None:
            self._func = load_reward(self.spec).func
        return self._func

    def _args(self) -> SimpleNamespace:
        return SimpleNamespace(reward_key=self.reward_key, eval_reward_key=None,
                               group_rm=self.group_rm, custom_rm_path=self.spec)

    async def _call(self, argument: Any) -> Any:
        result = self._target()(self._args(), argument)
        if inspect.isawaitable(result):
            result = await result
        return result


class SlimeCall(_Call):
    """``custom_rm(args, sample)``: one sample in, one reward out."""

    async def __call__(self, rollout: Rollout) -> float:
        value = await self._call(_sample(rollout, 0))
        return _reward_of(value, self.reward_key, "custom_rm(args, sample)")


class SlimeGroupCall(_Call):
    """``custom_rm(args, samples)`` (``--group-rm``): a group in, one reward per sample out."""

    __rewardsmith_group__ = True

    async def __call__(self, rollouts: Sequence[Rollout]) -> list[float]:
        samples = [_sample(rollout, index) for index, rollout in enumerate(rollouts)]
        values = await self._call(samples)
        where = "custom_rm(args, samples) with --group-rm"
        if not isinstance(values, (list, tuple)):
            raise TypeError(f"{where} returned {type(values).__name__}; slime needs a list with "
                            f"one reward per sample ({len(samples)})")
        if len(values) != len(samples):
            raise ValueError(f"{where} returned {len(values)} rewards for {len(samples)} samples")
        return [_reward_of(v, self.reward_key, f"{where}, sample {i},")
                for i, v in enumerate(values)]


def slime_call(spec: str, *, group_rm: bool | None, reward_key: str | None
               ) -> SlimeCall | SlimeGroupCall | None:
    """The slime-form reward for ``spec``, or None when ``spec`` is an ordinary reward.

    ``group_rm`` None means: as the signature says (``samples`` is the group form)."""
    loaded = load_reward(spec)
    form = slime_form_of(loaded.func)
    spec = loaded.located or spec  # found from any working directory
    if form is None and not group_rm and reward_key is None:
        return None
    if form is None and group_rm is None:
        group_rm = False
    group = (form == "samples") if group_rm is None else group_rm
    if reward_key is not None and not reward_key.strip():
        raise ConfigError("--reward-key must not be empty")
    if group:
        return SlimeGroupCall(spec, reward_key=reward_key, group_rm=True)
    return SlimeCall(spec, reward_key=reward_key, group_rm=False)
