"""rewardsmith inside Flyte 2: a CPU task environment and a ``score_group`` task per rubric.

::

    from rewardsmith.integrations.flyte import reward_task

    reward = reward_task("rubric.yaml", retries=2, timeout=600,
                         resources=flyte.Resources(cpu=1, memory="2Gi"))

    @driver_env.task
    async def train_step(groups: list[list[Rollout]]) -> ...:
        results = await asyncio.gather(*(reward.score_group(g) for g in groups))

``reward.env`` is the ``flyte.TaskEnvironment`` (add it to the driver's ``depends_on``) and
``reward.score_group`` the task: one group of ``Rollout`` in, one ``RewardResult`` per rollout
out (reward, status, every component, errors), so each component shows in the UI. Both are
named after the rubric and its id (``rewardsmith-<name>-<id>``): two rubrics never share a task.

What each Flyte feature does here:

- **Cache** (``cache=True``, the default): ``Cache("auto", salt=rubric.id)``. The rubric's id
  covers every reward's code, params and the judge's prompt, so a changed rubric or reward
  function is never served a stale cached result; an unchanged one is served from the cache.
- **Retries and timeout**: Flyte's own, per task; each reward call also keeps the engine's hard
  timeout (``workers`` worker processes; ``workers=0`` scores in the task's process).
- **Judges paid once**: every grade is written to the judge's ledger (``store``, default
  ``./rewardsmith.db``) before it is used, so a retry on the same machine replays it (this is
  what happens in local mode, where ``flyte.trace`` does not replay). On a cluster a retry may
  land on another machine without that file, so the group's scoring also runs as a
  ``flyte.trace`` step: a retried task replays its recorded result instead of scoring (and
  paying the judge) again. A ``store`` on a volume every pod mounts gives the same guarantee
  without the trace, and across runs too.
- **after_scoring**: an async hook run in the task after scoring (upload, logging). If it
  raises, Flyte retries the task, and the retry pays no judge call.
"""

from __future__ import annotations

import atexit
import importlib
import inspect
import json
import os
import re
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

try:
    import flyte
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("rewardsmith.integrations.flyte needs Flyte 2: "
                      "pip install 'rewardsmith[flyte]'") from exc

from rewardsmith.engine import Engine
from rewardsmith.errors import ConfigError
from rewardsmith.files.digests import FileDigests
from rewardsmith.jobs.recording import start_recording
from rewardsmith.rubric import Rubric
from rewardsmith.store import Store
from rewardsmith.types import ComponentResult, Rollout, Score, Status

from .adapters import RubricSpec, rubric_for

__all__ = ["AfterScoring", "RewardResult", "RewardTask", "RewardTaskResolver", "record_run",
           "reward_task", "task_name_for"]

AfterScoring = Callable[[list["RewardResult"]], Awaitable[None]]
_NAME_PART = re.compile(r"[^a-z0-9]+")


@dataclass
class RewardResult:
    """One rollout's reward, as a Flyte task returns it (every field visible in the UI).

    ``reward`` is None when the rollout is masked; ``status`` is ``ok``, ``error``,
    ``timeout`` or ``masked``; ``components`` maps each component to its value (None when it
    failed or abstained) and ``errors`` each failed component to its message.
    """

    id: str
    group: str
    reward: float | None
    status: str
    components: dict[str, float | None] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    rubric: str = ""
    rubric_id: str = ""

    @classmethod
    def of(cls, score: Score, rubric: Rubric) -> RewardResult:
        return cls(id=score.id, group=score.group, reward=score.reward, status=score.status.value,
                   components=dict(score.components), errors=dict(score.errors),
                   rubric=rubric.name, rubric_id=rubric.id)

    def to_score(self) -> Score:
        return Score(self.id, self.group, self.reward, Status(self.status),
                     dict(self.components), dict(self.errors))


def task_name_for(rubric: Rubric) -> str:
    """The environment name for ``rubric``: ``rewardsmith-<name>-<first 8 of its id>``."""
    slug = _NAME_PART.sub("-", rubric.name.lower()).strip("-")[:40].strip("-")
    return f"rewardsmith-{slug}-{rubric.id[:8]}" if slug else f"rewardsmith-{rubric.id[:8]}"


# ------------------------------------------------------------------ engines, one per process

_ENGINES: dict[tuple[int, str], Engine] = {}
_RUBRICS: dict[str, tuple[Rubric, int | None, str | None]] = {}
_LOCK = threading.Lock()


def _engine(rubric_id: str) -> Engine:
    key = (os.getpid(), rubric_id)
    with _LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            rubric, workers, store = _RUBRICS[rubric_id]
            engine = _ENGINES[key] = Engine(rubric, workers=workers, store_path=store)
        return engine


@atexit.register
def _close_engines() -> None:
    with _LOCK:
        mine = [k for k in _ENGINES if k[0] == os.getpid()]
        engines = [_ENGINES.pop(k) for k in mine]
    for engine in engines:
        engine.close()


def _rollout_from(data: Mapping[str, Any]) -> Rollout:
    return Rollout(id=str(data["id"]), group=str(data["group"]), prompt=data["prompt"],
                   completion=data["completion"], answer=data["answer"],
                   metadata=dict(data["metadata"]), truncated=bool(data["truncated"]))


@flyte.trace
async def rewardsmith_score(rubric_id: str, rollouts_json: str) -> str:
    """Score one group with the rubric ``rubric_id`` (a traced step: replayed on a retry)."""
    rollouts = [_rollout_from(item) for item in json.loads(rollouts_json)]
    scores = await _engine(rubric_id).ascore_group(rollouts)
    return json.dumps([score.to_dict() for score in scores])


# ------------------------------------------------------------------ the task factory


@dataclass(frozen=True)
class RewardTask:
    """A rubric's Flyte environment and its ``score_group`` task (see ``reward_task``)."""

    rubric: Rubric
    env: flyte.TaskEnvironment
    score_group: Any  # flyte.AsyncFunctionTaskTemplate[[list[Rollout]], list[RewardResult]]
    store: str | None = None

    @property
    def name(self) -> str:
        return self.env.name

    def engine(self) -> Engine:
        """This process's engine for the rubric (the one the task uses when run locally)."""
        return _engine(self.rubric.id)

    def usage(self) -> dict[str, dict[str, float]]:
        """Judge calls, replays, tokens and cost of this process's engine (local mode)."""
        usage: dict[str, dict[str, float]] = self.engine().usage()
        return usage


def reward_task(
    rubric: RubricSpec,
    *,
    retries: int = 2,
    timeout: int | timedelta = 600,
    resources: flyte.Resources | None = None,
    image: Any = "auto",
    cache: bool = True,
    workers: int | None = None,
    store: str | os.PathLike[str] | None = None,
    trace: bool = True,
    after_scoring: AfterScoring | None = None,
    env_vars: Mapping[str, str] | None = None,
    secrets: Any = None,
    name: str | None = None,
) -> RewardTask:
    """A task environment and a ``score_group`` task for ``rubric`` (a ``Rubric``, a rubric
    YAML path, or one reward's name).

    ``retries`` and ``timeout`` (seconds or a timedelta) are the task's; ``resources``
    default to 1 CPU and 2 GiB. ``workers`` is the engine's worker processes (None: one per
    core). ``store`` is the judge ledger's file (default ``./rewardsmith.db``): put it on a
    volume the pods share for a cluster. ``trace=False`` runs scoring outside ``flyte.trace``.
    ``name`` replaces the environment name (it must stay unique per rubric).
    """
    built = rubric_for(rubric)
    built.resolve()
    if retries < 0:
        raise ConfigError(f"reward_task: retries must be >= 0, not {retries}")
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    if seconds < 0:
        raise ConfigError(f"reward_task: timeout must be >= 0 seconds, not {seconds}")
    if workers is not None and workers < 0:
        raise ConfigError(f"reward_task: workers must be >= 0, not {workers}")
    if after_scoring is not None and not inspect.iscoroutinefunction(after_scoring):
        raise ConfigError("reward_task: after_scoring must be an async function "
                          "(async def hook(results): ...)")
    env_name = name or task_name_for(built)
    store_path = None if store is None else os.fspath(store)
    rubric_id = built.id
    with _LOCK:
        known = _RUBRICS.get(rubric_id)
        if known is not None and (known[1], known[2]) != (workers, store_path):
            raise ConfigError(f"reward_task: rubric {built.name!r} ({rubric_id}) already has a "
                              f"task with workers={known[1]}, store={known[2]!r}; one process "
                              f"keeps one engine per rubric")
        _RUBRICS[rubric_id] = (built, workers, store_path)
    env = flyte.TaskEnvironment(
        name=env_name,
        image=image,
        resources=resources or flyte.Resources(cpu=1, memory="2Gi"),
        env_vars=dict(env_vars or {}),
        secrets=secrets,
        description=f"rewardsmith rubric {built.name} ({rubric_id})"[:255],
    )
    use_trace = trace

    async def score_group(rollouts: list[Rollout]) -> list[RewardResult]:
        """Score one prompt group: one typed result per rollout, in the group's order."""
        _RUBRICS.setdefault(rubric_id, (built, workers, store_path))  # a fresh pod
        if use_trace:
            # default=str as in ``stable_json``: the text a reward or judge sees is the same.
            payload = json.dumps([r.to_dict() for r in rollouts], default=str)
            scores = [Score.from_dict(d)
                      for d in json.loads(await rewardsmith_score(rubric_id, payload))]
        else:
            scores = await _engine(rubric_id).ascore_group(list(rollouts))
        results = [RewardResult.of(score, built) for score in scores]
        if after_scoring is not None:
            await after_scoring(results)
        return results

    # Where the task is found again on a cluster: the module that called this factory.
    caller = sys._getframe(1).f_globals.get("__name__", "__main__")
    score_group.__module__ = str(caller)
    score_group.__qualname__ = "score_group"
    task = env.task(
        retries=retries,
        timeout=timeout,
        # Flyte's "auto" version hashes this function's body only, the same for every
        # rubric: the rubric's id as salt makes a changed reward a cache miss.
        cache=flyte.Cache("auto", salt=rubric_id) if cache else "disable",
        task_resolver=RewardTaskResolver(),
    )(score_group)
    return RewardTask(built, env, task, store_path)


# ------------------------------------------------------------------ cluster: finding the task


class RewardTaskResolver:
    """Finds a ``reward_task`` again in a pod: the module that built it, and the module-level
    name it is bound to (the ``RewardTask`` or its ``score_group``)."""

    @property
    def import_path(self) -> str:
        return "rewardsmith.integrations.flyte.RewardTaskResolver"

    def loader_args(self, task: Any, root_dir: Path | None) -> list[str]:
        from flyte._module import extract_obj_module

        module_name, module = extract_obj_module(task.func, root_dir or Path.cwd())
        for attr, value in vars(module).items():
            if value is task or (isinstance(value, RewardTask) and value.score_group is task):
                return ["mod", module_name, "attr", attr]
        raise ConfigError(f"task {task.name!r}: bind the reward_task(...) result to a "
                          f"module-level name in {module_name!r} so a pod can import it")

    def load_task(self, loader_args: list[str]) -> Any:
        _, module_name, _, attr, *_ = loader_args
        value = getattr(importlib.import_module(module_name), attr)
        return value.score_group if isinstance(value, RewardTask) else value

    def load_app_env(self, loader_args: str) -> Any:
        # Part of Flyte's resolver protocol; only ``flyte serve`` calls it, for apps.
        raise ConfigError("a rewardsmith resolver loads reward tasks, not app environments")


# ------------------------------------------------------------------ rescoring outside Flyte


def record_run(store: str | os.PathLike[str], rubric: Rubric,
               groups: Sequence[Sequence[Rollout]],
               results: Sequence[Sequence[RewardResult]], *, source: str = "flyte") -> str:
    """Keep the rollouts and results of a Flyte run in a store, as ``rewardsmith score --store``
    does, so ``rewardsmith rescore --store FILE --rubric NEW.yaml`` rescores it and computes
    only the components that changed. Returns the run id."""
    if len(groups) != len(results):
        raise ConfigError(f"record_run: {len(groups)} groups but {len(results)} result lists")
    rollouts = [r for group in groups for r in group]
    scores: list[Score] = []
    for index, (group, found) in enumerate(zip(groups, results)):
        if len(group) != len(found):
            raise ConfigError(f"record_run: group {index} has {len(group)} rollouts but "
                              f"{len(found)} results")
        scores.extend(result.to_score() for result in found)
    with Store(os.fspath(store)) as opened:
        recorder = start_recording(opened, rubric, rollouts, kind="score", source=source)
        keys = [recorder.content_key(r) for r in rollouts]
        digests = FileDigests()
        for component in rubric.components:
            fresh: dict[str, ComponentResult] = {}
            if component.group:
                continue
            for key, score in zip(component.result_keys(rollouts, keys, digests), scores):
                value = score.components.get(component.name)
                if value is not None:
                    fresh[key] = ComponentResult(value)
            if fresh:
                opened.record(component.identity(), fresh)
        start = 0
        for group in groups:
            recorder.add_group(group, scores[start:start + len(group)])
            start += len(group)
        recorder.finish()
        return recorder.run_id

