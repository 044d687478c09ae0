"""Rubrics: named components with weights, params, timeouts and gates, combined into one reward.

```yaml
name: gsm8k-v1
components:
  correct: {reward: gsm8k, weight: 1.0}
  format:  {reward: marker, params: {marker: "####"}, weight: 0.2, requires: correct}
formula: correct + 0.2 * format     # optional: replaces the weighted sum
on_error: mask                      # or a number: the reward of an errored/timed-out rollout
quantize: 0.0009765625              # optional: round totals to a float32-exact grid (2^-10)
```
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rewardsmith.errors import (
    ConfigError,
    LoadError,
    RubricError,
)
from rewardsmith.files.digests import FileDigests, FilesOf, files_of, keys_with_files
from rewardsmith.rubric.calling import (
    is_async_reward,
    is_group_reward,
    make_binder,
    make_group_binder,
)
from rewardsmith.rubric.code_identity import (
    CodeIdentity,
    code_identity,
)
from rewardsmith.rubric.formula import (
    Formula,
    formula_name_for,
    formula_name_problem,
)
from rewardsmith.rubric.loading import load_reward
from rewardsmith.rubric.quantize import (
    check_step,
    quantize,
)
from rewardsmith.types import (
    ComponentResult,
    Rollout,
    Status,
    content_hash,
)

__all__ = [
    "Component",
    "Evaluator",
    "Rubric",
    "register_component_kind",
    "DEFAULT_MEMORY_LIMIT_MB",
    "DEFAULT_TIMEOUT",
]

DEFAULT_TIMEOUT = 10.0  # seconds per reward call
# MB of resident memory a worker may hold while it runs one call (see ``memory_limit``).
DEFAULT_MEMORY_LIMIT_MB = 2048.0


class Evaluator(Protocol):
    """A component computed asynchronously for a whole group (an LLM judge criterion, say).

    Optional methods the engine uses when present:

    - ``async check() -> None``: raise ``JudgeError`` before scoring if it cannot work
      (endpoint down, model missing); called once per engine.
    - ``attach_store(path: str) -> None``: the run's store file, for durable call records.
    - ``usage_key() -> str`` and ``usage() -> dict[str, float]``: calls made, replayed,
      failed, tokens and cost; evaluators sharing one client share one key.
    - ``async close() -> None``: release connections when the engine closes.
    """

    def identity(self) -> str: ...

    async def evaluate(self, rollouts: Sequence[Rollout]) -> list[ComponentResult]: ...


@dataclass
class Component:
    """One named part of a rubric.

    Exactly one of ``reward`` (a built-in name, an import path or a callable) and ``evaluator``
    (an async group evaluator, such as a judge criterion) is set.

    A rubric never changes the component it is given: it works on a resolved private copy (see
    ``resolve``), so one component can serve in several rubrics with different defaults.
    """

    name: str
    reward: str | Callable[..., Any] | None = None
    weight: float = 1.0
    params: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = None
    requires: str | None = None
    reward_key: str = "reward"
    group: bool = False
    evaluator: Evaluator | None = None
    memory_limit: float | None = None  # MB; None: the rubric's
    # Any text: a new one forces a new identity (stored results are not reused).
    version: str | None = None
    # Filled by ``resolve``:
    func: Callable[..., Any] | None = field(default=None, repr=False)
    is_async: bool = False
    bounded: bool = False
    spec: str = ""
    _identity: str = field(default="", repr=False)
    _code: CodeIdentity | None = field(default=None, repr=False, compare=False)
    # The files the reward reads besides the rollout (``reads_files``): part of each stored
    # result's key, so a result is reused only while they are unchanged.
    reads: FilesOf | None = field(default=None, repr=False, compare=False)
    # On a resolved copy: the component as it was given, before anything was filled in.
    _declared: Component | None = field(default=None, repr=False, compare=False)

    def resolve(self, default_timeout: float, *, folder: str | Path | None = None) -> Component:
        """A resolved copy: the reward loaded, its params checked, its timeout filled in.

        Mistakes surface here, before scoring. ``self`` is left as it is; resolving a resolved
        copy again starts from what was declared (so a second rubric's defaults apply). A
        relative ``path/file.py:func`` is found in ``folder`` first, then the working directory.
        """
        declared = self._declared if self._declared is not None else self._declaration()
        out = declared._declaration()
        out._declared = declared
        out._fill(default_timeout, folder)
        return out

    def _declaration(self) -> Component:
        """A copy of what the user set, with nothing resolved (params copied, not shared)."""
        return dataclasses.replace(self, params=dict(self.params), func=None, is_async=False,
                                   bounded=False, spec="", _identity="", _code=None,
                                   _declared=None, reads=None)

    def _fill(self, default_timeout: float, folder: str | Path | None) -> None:
        if self.evaluator is not None:
            self.is_async = True
            self.spec = f"evaluator:{type(self.evaluator).__name__}"
            self._identity = self._evaluator_identity()
            return
        if self.reward is None:
            raise RubricError(f"component {self.name!r}: needs 'reward' (or 'judge')")
        loaded = load_reward(self.reward, folder=folder)
        if isinstance(self.reward, str):
            self.reward = loaded.located  # worker processes import it from anywhere
        self.func = loaded.func
        self.spec = loaded.spec
        self.bounded = loaded.bounded
        self.group = self.group or is_group_reward(loaded.func)
        self.is_async = is_async_reward(loaded.func)
        if self.timeout is None:
            self.timeout = loaded.default_timeout or default_timeout
        what = f"component {self.name!r} ({self.spec})"
        try:  # validate params against the signature once, here, not per rollout
            if self.group:
                make_group_binder(loaded.func, self.params, what=what)
            else:
                make_binder(loaded.func, self.params, what=what)
            if loaded.check_params is not None:
                loaded.check_params(self.params)
        except ConfigError as exc:
            raise RubricError(str(exc)) from exc
        except (ValueError, TypeError) as exc:
            raise RubricError(f"{what}: {exc}") from exc
        self._code = code_identity(loaded.func)
        self.reads = files_of(loaded.func)
        self._identity = content_hash(
            self._code.digest, self.params, self.timeout, self.reward_key, self.group,
            *self._version_part(), length=24,
        )

    def _version_part(self) -> list[Any]:
        # Only a version that is set takes part: identities without one stay as they were.
        return [] if self.version is None else [["version", self.version]]

    def _evaluator_identity(self) -> str:
        assert self.evaluator is not None
        return content_hash("evaluator", self.evaluator.identity(), *self._version_part(),
                            length=24)

    def refresh_identity(self) -> None:
        """Recompute an evaluator component's identity after its evaluator's changed (a judge
        told to ask again), so stored results of the old one are not reused."""
        if self.evaluator is not None and self._identity:
            self._identity = self._evaluator_identity()

    def identity(self) -> str:
        """What determines this component's value for a rollout: all the code its reward runs
        (see ``code_identity``), params, timeout, ``version``.

        Name, weight and gate are not part of it, so a stored result survives their change.
        """
        return self._identity

    def result_keys(self, rollouts: Sequence[Rollout], keys: Sequence[str],
                    digests: FileDigests | None = None) -> list[str]:
        """The keys this component's results go under in a store, from the rollouts' content
        keys: those keys themselves, or for a reward that reads files besides the rollout
        (``reads_files``), each with a digest of what those files hold now."""
        return keys_with_files(self.reads, self.params, rollouts, keys, digests)

    def code(self) -> CodeIdentity | None:
        """The code behind a resolved reward component (None for an evaluator)."""
        return self._code


ComponentFactory = Callable[[str, Mapping[str, Any], str], list[Component]]
_COMPONENT_KINDS: dict[str, ComponentFactory] = {}
# Kinds that live in higher layers, by where their factory is: imported when a rubric first
# uses the key, so that reading a rubric of plain rewards never imports the judge (and this
# layer does not depend on it).
_LAZY_KINDS: dict[str, str] = {
    "judge": "rewardsmith.judge:judge_components",
    "reward_model": "rewardsmith.judge.reward_model:reward_model_components",
}


def _kind_factory(key: str) -> ComponentFactory | None:
    factory = _COMPONENT_KINDS.get(key)
    if factory is None and key in _LAZY_KINDS:
        module, _, attribute = _LAZY_KINDS[key].partition(":")
        factory = _COMPONENT_KINDS[key] = getattr(importlib.import_module(module), attribute)
    return factory


def register_component_kind(key: str, factory: ComponentFactory) -> None:
    """Let rubric files use ``key:`` (e.g. ``judge:``) in place of ``reward:`` for a component.

    ``factory(name, component_config, where)`` returns the component(s) it stands for.
    """
    _COMPONENT_KINDS[key] = factory


class _ComponentModel(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)  # built on first use
    reward: str | None = None
    weight: float = 1.0
    params: dict[str, Any] = Field(default_factory=dict)
    timeout: float | None = Field(default=None, gt=0)
    memory_limit: float | None = Field(default=None, gt=0)
    requires: str | None = None
    reward_key: str = "reward"
    group: bool = False
    version: str | int | float | None = None

    @field_validator("weight")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


class _RubricModel(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)  # built on first use
    name: str = "rubric"
    components: dict[str, Any]
    formula: str | None = None
    on_error: float | str = "mask"
    quantize: float | None = Field(default=None, gt=0)
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0)
    memory_limit: float = Field(default=DEFAULT_MEMORY_LIMIT_MB, gt=0)

    @field_validator("on_error")
    @classmethod
    def _on_error(cls, value: float | str) -> float | str:
        if isinstance(value, str) and value != "mask":
            raise ValueError("must be 'mask' or a number")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("must be 'mask' or a finite number")
        return value


def _pydantic_message(exc: ValidationError, where: str, prefix: str = "") -> str:
    lines = []
    for error in exc.errors():
        key = ".".join(str(p) for p in (prefix, *error["loc"]) if p != "")
        if error["type"] == "extra_forbidden":
            lines.append(f"{where}: unknown key {key!r}")
        else:
            lines.append(f"{where}: {key or '(top level)'}: {error['msg']}")
    return "\n".join(lines)


@dataclass
class Rubric:
    """Components and how they make one reward. Build in Python or load with ``from_yaml``.

    ``components`` become resolved private copies of the ones given (which stay unchanged).
    ``folder`` is where a relative ``path/file.py:func`` is looked for first (``from_yaml``: the
    rubric file's folder), before the working directory.
    """

    components: list[Component]
    name: str = "rubric"
    formula: str | None = None
    on_error: float | str = "mask"
    quantize: float | None = None
    timeout: float = DEFAULT_TIMEOUT
    source: str = "<python>"
    memory_limit: float = DEFAULT_MEMORY_LIMIT_MB
    folder: str | Path | None = None
    _formula: Formula | None = field(default=None, repr=False)
    _resolved: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        where = self.source
        names = [c.name for c in self.components]
        if not names:
            raise RubricError(f"{where}: a rubric needs at least one component")
        duplicates = {n for n in names if names.count(n) > 1}
        if duplicates:
            raise RubricError(f"{where}: duplicate component name(s) {sorted(duplicates)}")
        for component in self.components:
            if component.requires is not None and component.requires not in names:
                raise RubricError(
                    f"{where}: components.{component.name}.requires: unknown component "
                    f"{component.requires!r}; components: {', '.join(names)}"
                )
            if component.requires == component.name:
                raise RubricError(f"{where}: components.{component.name} cannot require itself")
        _refuse_gate_cycles(self.components, where)
        if self.on_error != "mask" and not isinstance(self.on_error, (int, float)):
            raise RubricError(f"{where}: on_error must be 'mask' or a number")
        if self.quantize is not None:
            try:
                self.quantize = check_step(self.quantize)
            except ConfigError as exc:
                raise RubricError(f"{where}: quantize: {exc}") from exc
        if self.formula is not None:
            _refuse_formula_names(names, where)
            self._formula = Formula(self.formula, set(names), where=f"{where}: formula")
        self.resolve()

    # -- building

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "<dict>",
                  folder: str | Path | None = None) -> Rubric:
        if not isinstance(data, Mapping):
            raise RubricError(f"{source}: a rubric must be a mapping with 'components', "
                              f"not {type(data).__name__}")
        try:
            model = _RubricModel.model_validate(data)
        except ValidationError as exc:
            raise RubricError(_pydantic_message(exc, source)) from exc
        components: list[Component] = []
        for name, config in model.components.items():
            components.extend(_component_from_config(str(name), config, source))
        return cls(
            components=components,
            name=model.name,
            formula=model.formula,
            on_error=model.on_error,
            quantize=model.quantize,
            timeout=model.timeout,
            memory_limit=model.memory_limit,
            source=source,
            folder=folder,
        )

    @classmethod
    def from_yaml(cls, path: str | Path) -> Rubric:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise RubricError(f"rubric file {str(path)!r} does not exist") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise RubricError(f"rubric file {str(path)!r} cannot be read: {exc}") from exc
        import yaml  # only rubric files need it

        from rewardsmith.rubric._strict_yaml import (
            DuplicateKeyError,
            read_yaml,
        )

        try:
            data = read_yaml(text)
        except DuplicateKeyError as exc:
            raise RubricError(f"{path}:{exc.line}: {exc.reason}") from exc
        except yaml.YAMLError as exc:
            raise RubricError(f"{path}: not valid YAML: {exc}") from exc
        return cls.from_dict(data, source=str(path), folder=path.parent)

    @classmethod
    def single(cls, reward: str | Callable[..., Any], *, params: Mapping[str, Any] | None = None,
               timeout: float | None = None, name: str | None = None) -> Rubric:
        """A rubric of one component (what ``rewardsmith test REWARD`` scores)."""
        label = str(name or (reward if isinstance(reward, str)
                             else getattr(reward, "__name__", None) or "reward"))
        component_name = label.replace(":", ".").split(".")[-1] or "reward"
        return cls([Component(component_name, reward, params=dict(params or {}), timeout=timeout)],
                   name=str(label))

    def resolve(self) -> None:
        """Replace ``components`` with resolved private copies (once; the originals stay)."""
        if self._resolved:
            return
        resolved = []
        for component in self.components:
            try:
                resolved.append(component.resolve(self.timeout, folder=self.folder))
            except LoadError as exc:
                raise LoadError(f"{self.source}: components.{component.name}: {exc}") from exc
            except RubricError as exc:
                raise RubricError(f"{self.source}: components.{component.name}.params: {exc}") \
                    from exc
        self.components = resolved
        self._resolved = True

    # -- identity

    @property
    def id(self) -> str:
        """A hash of the whole configuration and every reward's code: equal ids, equal scoring."""
        return content_hash(
            self.name, self.formula, self.on_error, self.quantize,
            [(c.name, c.identity(), c.weight, c.requires) for c in self.components],
            length=12,
        )

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.components]

    # -- combining

    def combine(
        self, results: Mapping[str, ComponentResult]
    ) -> tuple[float | None, Status, dict[str, float | None], dict[str, str], dict[str, float]]:
        """Turn component results into (reward, status, components, errors, metrics)."""
        values: dict[str, float | None] = {}
        errors: dict[str, str] = {}
        metrics: dict[str, float] = {}
        for name, result in results.items():
            values[name] = result.value if result.status is Status.OK else None
            if result.error is not None:
                errors[name] = result.error
            for key, value in result.metrics.items():
                metrics[f"{name}.{key}"] = value
        counted: dict[str, float] = {}
        status = Status.OK
        for component in self.components:
            name = component.name
            if component.requires is not None:
                gate = values.get(component.requires)
                if gate is None or gate <= 0:
                    counted[name] = 0.0  # gate closed: this component does not count
                    continue
            result = results[name]
            if result.status is Status.OK and result.value is not None:
                counted[name] = result.value
            else:
                status = _worse(status, result.status)
                counted[name] = 0.0
        if status is not Status.OK:
            if status is Status.MASKED or self.on_error == "mask":
                return None, status, values, errors, metrics
            return float(self.on_error), status, values, errors, metrics
        try:
            if self._formula is not None:
                total = self._formula(counted)
            else:
                total = math.fsum(c.weight * counted[c.name] for c in self.components)
        except ArithmeticError as exc:
            errors["formula"] = str(exc)
            reward = None if self.on_error == "mask" else float(self.on_error)
            return reward, Status.ERROR, values, errors, metrics
        if self.quantize is not None:
            try:
                total = quantize(total, self.quantize)
            except ConfigError as exc:  # a total too large for the grid: that rollout's error
                errors["quantize"] = str(exc)
                reward = None if self.on_error == "mask" else float(self.on_error)
                return reward, Status.ERROR, values, errors, metrics
        return total, status, values, errors, metrics


def _refuse_gate_cycles(components: Sequence[Component], where: str) -> None:
    """A chain of ``requires`` that comes back to where it started has no meaning: refuse it."""
    gate = {c.name: c.requires for c in components if c.requires is not None}
    cleared: set[str] = set()
    for start in gate:
        path: list[str] = []
        name: str | None = start
        while name is not None and name not in cleared:
            if name in path:
                loop = path[path.index(name):] + [name]
                raise RubricError(
                    f"{where}: components {' -> '.join(loop)}: these 'requires' gates form a "
                    f"cycle, so none of them has a gate that can be decided first; remove the "
                    f"'requires' of one of them (for example components.{loop[0]}.requires)")
            path.append(name)
            name = gate.get(name)
        cleared.update(path)


def _refuse_formula_names(names: Sequence[str], where: str) -> None:
    """With a formula, every component must be nameable in it (``my-comp`` reads as my - comp)."""
    for name in names:
        problem = formula_name_problem(name)
        if problem is not None:
            suggestion = formula_name_for(name, names)
            raise RubricError(
                f"{where}: components.{name}: a formula cannot refer to the name {name!r}: "
                f"{problem}; rename the component, for example to {suggestion!r}, and write "
                f"{suggestion} in the formula")


_SEVERITY = {Status.OK: 0, Status.MASKED: 1, Status.TIMEOUT: 2, Status.ERROR: 3}


def _worse(a: Status, b: Status) -> Status:
    return a if _SEVERITY[a] >= _SEVERITY[b] else b


def _component_from_config(name: str, config: Any, source: str) -> list[Component]:
    where = f"{source}: components.{name}"
    if isinstance(config, str):
        config = {"reward": config}
    if not isinstance(config, Mapping):
        raise RubricError(f"{where}: expected a mapping such as {{reward: gsm8k, weight: 1.0}}, "
                          f"got {type(config).__name__}")
    for key in [*_COMPONENT_KINDS, *(k for k in _LAZY_KINDS if k not in _COMPONENT_KINDS)]:
        if key in config:
            factory = _kind_factory(key)
            assert factory is not None
            if "reward" in config:
                raise RubricError(f"{where}: give either 'reward' or {key!r}, not both")
            version = config.get("version")
            if version is not None and not isinstance(version, (str, int, float)) \
                    or isinstance(version, bool):
                raise RubricError(f"{where}.version: must be a string or a number, "
                                  f"got {version!r}")
            made = factory(name, {k: v for k, v in config.items() if k != "version"}, where)
            for component in made:
                component.version = None if version is None else str(version)
            return made
    if "judge" in config:
        raise RubricError(f"{where}: judge components need the judge support of rewardsmith.judge")
    try:
        model = _ComponentModel.model_validate(config)
    except ValidationError as exc:
        raise RubricError(_pydantic_message(exc, source, prefix=f"components.{name}")) from exc
    if model.reward is None:
        raise RubricError(f"{where}: missing key 'reward' (a built-in name such as 'gsm8k', "
                          f"'module:func' or 'path/to/file.py:func')")
    return [Component(name, model.reward, weight=model.weight, params=model.params,
                      timeout=model.timeout, memory_limit=model.memory_limit,
                      requires=model.requires,
                      reward_key=model.reward_key, group=model.group,
                      version=None if model.version is None else str(model.version))]
