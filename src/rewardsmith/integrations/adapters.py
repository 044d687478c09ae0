"""What every trainer adapter shares: choosing the rubric, one engine per rubric, batch scoring.

The rubric for a sample is, in this order:

1. the sample's own ``rubric`` (``metadata["rubric"]``, a dataset column, ``extra_info``),
2. the rubric the adapter was given in code (a ``Rubric``, or a path or name),
3. the environment variable ``REWARDSMITH_RUBRIC``.

A path or name is a rubric YAML file (``.yaml``/``.yml`` or an existing file), or else one reward:
a built-in name such as ``gsm8k``, ``module:func`` or ``path/to/file.py:func``.

Each process keeps one engine per rubric, started on first use and closed at exit. The number of
worker processes per engine is ``REWARDSMITH_WORKERS`` (default: one per core, at most 8).

Log keys: every adapter logs ``masked``, ``acc`` and one key per component next to the trainer's
own keys. A component whose name is one of :data:`RESERVED_LOG_KEYS` is logged as
``component_<name>`` in every trainer (the same key everywhere), and loading such a rubric warns.
"""

from __future__ import annotations

import asyncio
import atexit
import multiprocessing
import os
import threading
import warnings
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from rewardsmith.engine import Engine
from rewardsmith.errors import ConfigError, RubricError
from rewardsmith.integrations.endtext import EndTexts
from rewardsmith.rubric import Rubric
from rewardsmith.tracking.adapter_steps import record_scoring_step
from rewardsmith.tracking.base import Tracker
from rewardsmith.types import Rollout, Score, Status, content_hash

__all__ = [
    "ENV_RUBRIC",
    "ENV_WORKERS",
    "RESERVED_LOG_KEYS",
    "RubricSpec",
    "Scored",
    "accuracy_component",
    "ascore_rollouts",
    "close_engines",
    "consecutive_groups",
    "engine_for",
    "log_key",
    "masked_score",
    "record_step",
    "rubric_for",
    "score_rollouts",
]

ENV_RUBRIC = "REWARDSMITH_RUBRIC"
ENV_WORKERS = "REWARDSMITH_WORKERS"

RubricSpec = Union[Rubric, str, "os.PathLike[str]"]

# Keys the adapters or the trainers themselves log beside the components: OpenRLHF's reward and
# score, verl's score, slime's reward key, our masked/acc/failed and the server's status.
RESERVED_LOG_KEYS = frozenset({"reward", "rewards", "score", "scores", "acc", "masked", "failed",
                               "status"})
_COMPONENT_PREFIX = "component_"


def log_key(name: str, taken: frozenset[str] | set[str] = frozenset()) -> str:
    """The key a component is logged under: its name, or ``component_<name>`` when the name is
    reserved (or in ``taken``, such as slime's ``--reward-key``)."""
    if name in RESERVED_LOG_KEYS or name in taken:
        return f"{_COMPONENT_PREFIX}{name}"
    return name


_warned_rubrics: set[str] = set()


def warn_reserved_names(rubric: Rubric) -> None:
    """Say once per rubric which components are logged under another key, and why."""
    clashes = [name for name in rubric.names if name in RESERVED_LOG_KEYS]
    if not clashes or rubric.id in _warned_rubrics:
        return
    _warned_rubrics.add(rubric.id)
    renamed = ", ".join(f"{name!r} as {log_key(name)!r}" for name in clashes)
    warnings.warn(
        f"rubric {rubric.name!r}: component names {sorted(clashes)} are keys the trainers log "
        f"themselves ({', '.join(sorted(RESERVED_LOG_KEYS))}); every trainer adapter logs "
        f"{renamed}. Rename the components to log them under their own names.",
        UserWarning, stacklevel=3)
_YAML_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Scored:
    """One sample's score and the rubric that made it."""

    score: Score
    rubric: Rubric


def _spec_key(spec: RubricSpec) -> str:
    if isinstance(spec, Rubric):
        return f"object:{id(spec)}"
    text = os.fspath(spec).strip()
    if _is_rubric_file(text):
        return f"file:{Path(text).expanduser().resolve()}"
    return f"reward:{text}"


def _is_rubric_file(text: str) -> bool:
    return text.lower().endswith(_YAML_SUFFIXES) or Path(text).expanduser().is_file()


def _build(spec: RubricSpec, where: str) -> Rubric:
    if isinstance(spec, Rubric):
        return spec
    text = os.fspath(spec).strip()
    if not text:
        raise ConfigError(f"{where}: the rubric is empty; give a rubric YAML path or a reward name")
    try:
        if _is_rubric_file(text):
            return Rubric.from_yaml(Path(text).expanduser())
        return Rubric.single(text)
    except (RubricError, ImportError) as exc:
        # Say where the choice came from: a wrong environment variable is hard to spot otherwise.
        raise type(exc)(f"{where}: {exc}") from exc


class _EngineCache:
    """One engine per (process, rubric); a forked child never reuses its parent's engine."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engines: dict[tuple[int, str], Engine] = {}
        self._rubrics: dict[tuple[int, str], Rubric] = {}

    def rubric(self, spec: RubricSpec, where: str) -> Rubric:
        key = (os.getpid(), _spec_key(spec))
        with self._lock:
            found = self._rubrics.get(key)
        if found is not None:
            return found
        built = _build(spec, where)
        warn_reserved_names(built)
        with self._lock:
            return self._rubrics.setdefault(key, built)

    def engine(self, spec: RubricSpec, where: str) -> Engine:
        key = (os.getpid(), _spec_key(spec))
        with self._lock:
            found = self._engines.get(key)
        if found is not None:
            return found
        rubric = self.rubric(spec, where)
        with self._lock:
            found = self._engines.get(key)
            if found is None:
                found = Engine(rubric, workers=_workers_here())
                self._engines[key] = found
            return found

    def engines(self) -> list[Engine]:
        """This process's engines."""
        with self._lock:
            return [e for k, e in self._engines.items() if k[0] == os.getpid()]

    def close(self) -> None:
        with self._lock:
            mine = [k for k in self._engines if k[0] == os.getpid()]
            engines = [self._engines.pop(k) for k in mine]
        for engine in engines:
            engine.close()


def _workers_here() -> int | None:
    """Worker processes for an engine started in this process.

    Inside a daemon process (another engine's worker: ``rewardsmith test`` or ``score`` calling
    an adapter as a reward) no process can be started, and the outer worker already holds the
    call to its hard timeout, so the adapter scores in-process there.
    """
    if multiprocessing.current_process().daemon:
        return 0
    return _workers_from_env()


def _workers_from_env() -> int | None:
    raw = os.environ.get(ENV_WORKERS, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{ENV_WORKERS}={raw!r}: expected a whole number >= 0") from None
    if value < 0:
        raise ConfigError(f"{ENV_WORKERS}={raw!r}: expected a whole number >= 0")
    return value


_CACHE = _EngineCache()
atexit.register(_CACHE.close)


def close_engines() -> None:
    """Close this process's engines now (they are also closed at exit)."""
    _CACHE.close()


def _choose(explicit: RubricSpec | None, sample_rubric: Any) -> tuple[RubricSpec, str]:
    if sample_rubric is not None and sample_rubric != "":
        if not isinstance(sample_rubric, (str, os.PathLike, Rubric)):
            raise ConfigError(
                f"a sample's 'rubric' must be a rubric YAML path or a reward name, "
                f"not {type(sample_rubric).__name__}"
            )
        return sample_rubric, f"the sample's rubric {str(sample_rubric)!r}"
    if explicit is not None:
        return explicit, "the rubric given to the adapter"
    env = os.environ.get(ENV_RUBRIC, "").strip()
    if env:
        return env, f"{ENV_RUBRIC}={env!r}"
    raise ConfigError(
        "no rubric chosen: pass one to the adapter, set the environment variable "
        f"{ENV_RUBRIC} (a rubric YAML path, or a built-in reward name such as 'gsm8k'), "
        "or give each sample metadata['rubric']"
    )


def rubric_for(explicit: RubricSpec | None = None, sample_rubric: Any = None) -> Rubric:
    """The rubric a sample is scored with (see the module docstring for the order)."""
    spec, where = _choose(explicit, sample_rubric)
    return _CACHE.rubric(spec, where)


def default_rubric(explicit: RubricSpec | None = None) -> Rubric | None:
    """The rubric for samples that name none, or None when neither code nor env chose one."""
    if explicit is None and not os.environ.get(ENV_RUBRIC, "").strip():
        return None
    return rubric_for(explicit)


def engine_for(explicit: RubricSpec | None = None, sample_rubric: Any = None) -> Engine:
    """This process's engine for the chosen rubric (started on first use)."""
    spec, where = _choose(explicit, sample_rubric)
    return _CACHE.engine(spec, where)


def consecutive_groups(keys: Sequence[Hashable]) -> list[str]:
    """Group labels for a batch where each group's samples sit next to each other.

    Trainers put the completions of one prompt side by side, so a run of equal keys is one
    group; the same prompt further on (a duplicate row) starts a new group.
    """
    labels: list[str] = []
    run = -1
    previous: object = object()
    for key in keys:
        if run < 0 or key != previous:
            run += 1
            previous = key
        labels.append(f"g{run}")
    return labels


def prompt_key(prompt: Any) -> Hashable:
    """A hashable stand-in for a prompt (text, or a list of chat messages)."""
    return prompt if isinstance(prompt, str) else content_hash(prompt)


def masked_score(rollout: Rollout, rubric: Rubric, reason: str) -> Score:
    """The score of a sample that must not count (aborted generation, say)."""
    return Score(rollout.id, rollout.group, None, Status.MASKED,
                 {name: None for name in rubric.names}, {"sample": reason})


def _partition(
    rollouts: Sequence[Rollout], sample_rubrics: Sequence[Any] | None, explicit: RubricSpec | None
) -> list[tuple[RubricSpec, str, list[int]]]:
    """Indices of the batch per chosen rubric, in order of first appearance."""
    parts: dict[str, tuple[RubricSpec, str, list[int]]] = {}
    for index in range(len(rollouts)):
        own = sample_rubrics[index] if sample_rubrics is not None else None
        spec, where = _choose(explicit, own)
        key = _spec_key(spec)
        if key not in parts:
            parts[key] = (spec, where, [])
        parts[key][2].append(index)
    return list(parts.values())


def _regroup(rollouts: Sequence[Rollout], indices: Sequence[int]) -> list[list[int]]:
    groups: dict[str, list[int]] = {}
    for index in indices:
        groups.setdefault(rollouts[index].group, []).append(index)
    return list(groups.values())


def score_rollouts(
    rollouts: Sequence[Rollout],
    *,
    explicit: RubricSpec | None = None,
    sample_rubrics: Sequence[Any] | None = None,
    trackers: Sequence[Tracker] = (),
) -> list[Scored]:
    """Score a batch from sync code: one engine call per rubric, scores in input order. The
    batch is one step of ``trackers`` and of those ``rewardsmith.tracking.track_scoring`` or
    ``REWARDSMITH_LOG_TO`` set up."""
    out: list[Scored | None] = [None] * len(rollouts)
    for spec, where, indices in _partition(rollouts, sample_rubrics, explicit):
        engine = _CACHE.engine(spec, where)
        # ``Engine.score`` groups by ``Rollout.group`` and sends many groups per worker call.
        scores = engine.score([rollouts[i] for i in indices])
        for index, score in zip(indices, scores):
            out[index] = Scored(score, engine.rubric)
    done = [s for s in out if s is not None]
    record_step(done, trackers, rollouts)
    return done


async def ascore_rollouts(
    rollouts: Sequence[Rollout],
    *,
    explicit: RubricSpec | None = None,
    sample_rubrics: Sequence[Any] | None = None,
    trackers: Sequence[Tracker] = (),
    record: bool = True,
) -> list[Scored]:
    """Score a batch from async code without blocking the caller's event loop (one tracker
    step, as ``score_rollouts``, unless ``record`` is false: the caller records it)."""
    out: list[Scored | None] = [None] * len(rollouts)
    jobs = []
    for spec, where, indices in _partition(rollouts, sample_rubrics, explicit):
        engine = _CACHE.engine(spec, where)
        for group in _regroup(rollouts, indices):
            jobs.append((engine, group))
    results = await asyncio.gather(
        *(engine.ascore_group([rollouts[i] for i in group]) for engine, group in jobs)
    )
    for (engine, group), scores in zip(jobs, results):
        for index, score in zip(group, scores):
            out[index] = Scored(score, engine.rubric)
    done = [s for s in out if s is not None]
    if record:
        record_step(done, trackers, rollouts)
    return done


def record_step(scored: Sequence[Scored], trackers: Sequence[Tracker] = (),
                rollouts: Sequence[Rollout] | None = None) -> None:
    """One adapter call's scores as one step of the trackers and of the drift watch (nothing
    when neither listens); the judge cost is what this process's engines spent since the
    previous step, and ``rollouts`` give the watch completion lengths."""
    record_scoring_step([s.score for s in scored], _CACHE.engines(), trackers, rollouts)


def accuracy_component(rubric: Rubric) -> str:
    """The component that says whether the answer is right: the first built-in verifier.

    When the rubric has no built-in verifier, its first component is used.
    """
    from rewardsmith.rewards import get_builtin

    for component in rubric.components:
        if isinstance(component.reward, str):
            found = get_builtin(component.reward)
            if found is not None and found.kind == "verifier":
                return component.name
    return rubric.components[0].name


def accuracy(score: Score, component: str) -> float:
    """1.0 when ``component`` scored above 0 for this sample; 0.0 otherwise and when masked
    (a trainer that cannot mask gets 0.0 as the reward then, and acc agrees with it)."""
    if score.reward is None:
        return 0.0
    value = score.components.get(component)
    return 1.0 if value is not None and value > 0 else 0.0


def counted_components(score: Score, rubric: Rubric) -> dict[str, float | None]:
    """What each component adds to a weighted-sum total, so ``sum(w * v) == reward``.

    A component behind a closed gate (``requires``) counts 0. A masked sample is all None. A
    sample that failed but got the rubric's ``on_error`` number carries it in the first
    component with a non-zero weight (the others count 0), so the total stays exact.
    """
    names = rubric.names
    if score.reward is None:
        return {name: None for name in names}
    if score.status is not Status.OK:
        out: dict[str, float | None] = {name: 0.0 for name in names}
        for component in rubric.components:
            if component.weight != 0:
                out[component.name] = score.reward / component.weight
                break
        return out
    values: dict[str, float | None] = {}
    for component in rubric.components:
        value = score.components.get(component.name)
        gate = component.requires
        if gate is not None:
            opened = score.components.get(gate)
            if opened is None or opened <= 0:
                value = 0.0
        values[component.name] = 0.0 if value is None else value
    return values


def text_or_messages(value: Any) -> str | list[dict[str, Any]]:
    """A prompt or completion as the engine takes it: text, or a list of chat messages."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return [dict(value)]
    if isinstance(value, (list, tuple)) and all(isinstance(m, Mapping) for m in value):
        return [dict(m) for m in value]
    return str(value)


def completion_of(value: Any, texts: EndTexts) -> str | list[dict[str, Any]]:
    """A completion as the engine takes it, without the end-of-turn texts at its end."""
    cleaned: str | list[dict[str, Any]] = texts.cut_completion(text_or_messages(value))
    return cleaned
