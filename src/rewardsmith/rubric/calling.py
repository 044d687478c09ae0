"""How a reward function is called: arguments injected by name, results read into one type.

A reward is a plain function, sync or async. It asks for what it needs by parameter name:

=========================  ==========================================================
parameter                  value
=========================  ==========================================================
completion, response       the completion's text (the last assistant message)
answer, label, ground_truth the reference answer (any JSON value, may be None)
prompt                     the prompt's text (the last user message)
metadata                   the rollout's metadata dict (read-only)
truncated                  True when the completion was cut at the length limit
rollout, sample            the whole ``Rollout`` (a read-only ``RolloutView``)
id, group                  the rollout's id and group
**kwargs                   all of the above, by their first names
=========================  ==========================================================

A *group* reward (declared with ``@group_reward``) gets the plural names (``completions``,
``answers``/``labels``, ``prompts``, ``metadatas``, ``truncateds``, ``rollouts``/``samples``)
for the whole group and returns one value per rollout.

Nothing a reward is given can be changed by it (``frozen``): ``answer`` and ``metadata`` are
read-only dicts and lists, the rollout a read-only view, so no reward changes what another
reward, or a later rescore, sees.

It returns a number or bool, None (abstain: the rollout is masked), a dict (``reward_key`` names
the value; other numeric keys become metrics), a ``Score`` or a ``ComponentResult``.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from rewardsmith.errors import ConfigError
from rewardsmith.trajectory import turns
from rewardsmith.types import (
    ComponentResult,
    Rollout,
    Score,
    Status,
)

__all__ = [
    "group_reward",
    "is_group_reward",
    "is_async_reward",
    "make_binder",
    "make_group_binder",
    "make_row_binder",
    "row_positions",
    "row_fields",
    "ROW_FIELDS",
    "to_component_result",
]

F = TypeVar("F", bound=Callable[..., Any])

_GROUP_FLAG = "__rewardsmith_group__"

_SINGLE_FIELDS: dict[str, Callable[[Rollout], Any]] = {
    "completion": lambda r: r.text,
    "response": lambda r: r.text,
    "answer": lambda r: r.answer,
    "label": lambda r: r.answer,
    "ground_truth": lambda r: r.answer,
    "prompt": lambda r: r.prompt_text,
    "metadata": lambda r: r.metadata,
    "truncated": lambda r: r.truncated,
    # A view whose attributes cannot be set (its containers are read-only already).
    "rollout": lambda r: r.view(),
    "sample": lambda r: r.view(),
    "id": lambda r: r.id,
    "group": lambda r: r.group,
    # slime/Miles rewards are written as custom_rm(args, sample): they get no run arguments here.
    "args": lambda r: None,
    # A multi-turn trajectory's turns, tool calls with their replies (see ``trajectory``).
    "turns": lambda r: turns(r),
}
# What **kwargs receives: each field once, by its first name.
_KWARGS_FIELDS = ("completion", "answer", "prompt", "metadata", "truncated", "rollout", "id", "group")

_GROUP_FIELDS: dict[str, Callable[[Sequence[Rollout]], Any]] = {
    "completions": lambda rs: [r.text for r in rs],
    "responses": lambda rs: [r.text for r in rs],
    "answers": lambda rs: [r.answer for r in rs],
    "labels": lambda rs: [r.answer for r in rs],
    "ground_truths": lambda rs: [r.answer for r in rs],
    "prompts": lambda rs: [r.prompt_text for r in rs],
    "metadatas": lambda rs: [r.metadata for r in rs],
    "truncateds": lambda rs: [r.truncated for r in rs],
    "rollouts": lambda rs: [r.view() for r in rs],
    "samples": lambda rs: [r.view() for r in rs],
    "ids": lambda rs: [r.id for r in rs],
}
_GROUP_KWARGS_FIELDS = ("completions", "answers", "prompts", "metadatas", "truncateds", "rollouts")


def group_reward(func: F) -> F:
    """Declare ``func`` a group reward: it receives the whole group, returns one value each."""
    setattr(func, _GROUP_FLAG, True)
    return func


def is_group_reward(func: Callable[..., Any]) -> bool:
    return bool(getattr(func, _GROUP_FLAG, False))


def is_async_reward(func: Callable[..., Any]) -> bool:
    # A callable object's coroutine-ness is that of its __call__ method.
    target = func if inspect.isroutine(func) else type(func).__call__
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(target)


def _plan(
    func: Callable[..., Any],
    params: Mapping[str, Any],
    fields: Mapping[str, Callable[[Any], Any]],
    kwargs_fields: Sequence[str],
    what: str,
) -> tuple[list[tuple[str, Callable[[Any], Any]]], dict[str, Any]]:
    """Which fields to inject and which params to bind; rejects params the function can't take."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"cannot read the signature of {what}: {exc}") from exc
    injected: list[tuple[str, Callable[[Any], Any]]] = []
    accepts_var_kw = False
    names = set()
    for name, parameter in signature.parameters.items():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            accepts_var_kw = True
            continue
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        names.add(name)
        if name in params:
            continue
        if name in fields:
            injected.append((name, fields[name]))
        elif parameter.default is inspect.Parameter.empty:
            known = ", ".join(sorted(fields))
            raise ConfigError(
                f"{what} needs a value for parameter {name!r}, which is neither a rollout field "
                f"({known}) nor given in params"
            )
    unknown = [k for k in params if k not in names]
    if unknown and not accepts_var_kw:
        raise ConfigError(
            f"{what} takes no parameter(s) {', '.join(map(repr, unknown))}; "
            f"it accepts: {', '.join(sorted(names)) or 'nothing'}"
        )
    if accepts_var_kw:
        have = {name for name, _ in injected} | set(params) | names
        for name in kwargs_fields:
            if name not in have:
                injected.append((name, fields[name]))
    return injected, dict(params)


def make_binder(
    func: Callable[..., Any], params: Mapping[str, Any] | None = None, *, what: str = "reward"
) -> Callable[[Rollout], Any]:
    """A function ``call(rollout)`` that calls ``func`` with injected fields and bound params."""
    injected, constants = _plan(func, params or {}, _SINGLE_FIELDS, _KWARGS_FIELDS, what)
    if not constants and _leading_positional(func, [name for name, _ in injected]):
        # The common shape, f(completion, answer): a positional call skips building a dict.
        if len(injected) == 1:
            ((_, g1),) = injected
            return lambda r: func(g1(r))
        if len(injected) == 2:
            (_, g1), (_, g2) = injected
            return lambda r: func(g1(r), g2(r))
    if len(injected) == 2 and not constants:
        (n1, g1), (n2, g2) = injected
        return lambda r: func(**{n1: g1(r), n2: g2(r)})

    def call(rollout: Rollout) -> Any:
        kwargs = dict(constants)
        for name, getter in injected:
            kwargs[name] = getter(rollout)
        return func(**kwargs)

    return call


def _leading_positional(func: Callable[..., Any], names: list[str]) -> bool:
    """True when ``names`` are ``func``'s first parameters, in order, and may be positional."""
    if hasattr(func, "__wrapped__") or hasattr(func, "__signature__"):
        return False  # a wrapper's declared signature may not be the one it really accepts
    try:
        parameters = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return False
    if len(parameters) < len(names):
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return all(p.name == n and p.kind in positional for p, n in zip(parameters, names))


# Row layouts: the fields a batch of single-rollout rewards reads, sent to worker processes as
# plain tuples instead of whole rollouts (less to pickle, nothing to rebuild).
ROW_FIELDS: dict[str, Callable[[Rollout], Any]] = {
    "text": lambda r: r.text,
    "answer": lambda r: r.answer,
    "prompt": lambda r: r.prompt_text,
    "metadata": lambda r: r.metadata,
    "truncated": lambda r: r.truncated,
    "id": lambda r: r.id,
    "group": lambda r: r.group,
}
_ROW_FIELD_OF = {
    "completion": "text", "response": "text", "answer": "answer", "label": "answer",
    "ground_truth": "answer", "prompt": "prompt", "metadata": "metadata",
    "truncated": "truncated", "id": "id", "group": "group",
}


def row_fields(func: Callable[..., Any], params: Mapping[str, Any] | None = None) -> set[str] | None:
    """The row fields ``func`` reads, or None when it needs the whole ``Rollout``."""
    injected, _ = _plan(func, params or {}, _SINGLE_FIELDS, _KWARGS_FIELDS, "reward")
    fields = set()
    for name, _getter in injected:
        if name not in _ROW_FIELD_OF:
            return None
        fields.add(_ROW_FIELD_OF[name])
    return fields


def make_row_binder(
    func: Callable[..., Any], params: Mapping[str, Any] | None, layout: Sequence[str],
    *, what: str = "reward",
) -> Callable[[Sequence[Any]], Any]:
    """Like ``make_binder``, for a row tuple whose fields are named by ``layout``."""
    injected, constants = _plan(func, params or {}, _SINGLE_FIELDS, _KWARGS_FIELDS, what)
    positions = [(name, layout.index(_ROW_FIELD_OF[name])) for name, _ in injected]
    if not constants and _leading_positional(func, [name for name, _ in positions]):
        if len(positions) == 1:
            ((_, q1),) = positions
            return lambda row: func(row[q1])
        if len(positions) == 2:
            (_, q1), (_, q2) = positions
            return lambda row: func(row[q1], row[q2])
    if len(positions) == 1 and not constants:
        ((n1, p1),) = positions
        return lambda row: func(**{n1: row[p1]})
    if len(positions) == 2 and not constants:
        (n1, p1), (n2, p2) = positions
        return lambda row: func(**{n1: row[p1], n2: row[p2]})

    def call(row: Sequence[Any]) -> Any:
        kwargs = dict(constants)
        for name, position in positions:
            kwargs[name] = row[position]
        return func(**kwargs)

    return call


def row_positions(func: Callable[..., Any], params: Mapping[str, Any] | None,
                  layout: Sequence[str], *, what: str = "reward") -> list[int] | None:
    """Where ``func``'s arguments lie in a row of ``layout`` when it takes them positionally,
    in order, and no params are bound: then it is called straight on the columns (no binder in
    between). None otherwise."""
    injected, constants = _plan(func, params or {}, _SINGLE_FIELDS, _KWARGS_FIELDS, what)
    names = [name for name, _ in injected]
    if constants or not names or not _leading_positional(func, names):
        return None
    return [layout.index(_ROW_FIELD_OF[name]) for name in names]


def make_group_binder(
    func: Callable[..., Any], params: Mapping[str, Any] | None = None, *, what: str = "reward"
) -> Callable[[Sequence[Rollout]], Any]:
    """Like ``make_binder`` for a group reward: ``call(rollouts)``."""
    injected, constants = _plan(func, params or {}, _GROUP_FIELDS, _GROUP_KWARGS_FIELDS, what)

    def call(rollouts: Sequence[Rollout]) -> Any:
        kwargs = dict(constants)
        for name, getter in injected:
            kwargs[name] = getter(rollouts)
        return func(**kwargs)

    return call


def to_component_result(value: Any, reward_key: str = "reward") -> ComponentResult:
    """Read whatever a reward returned as one ``ComponentResult`` (never raises)."""
    if isinstance(value, bool):
        return ComponentResult(1.0 if value else 0.0)
    if isinstance(value, numbers.Real):
        number = float(value)
        if math.isfinite(number):
            return ComponentResult(number)
        return ComponentResult.failed(Status.ERROR, f"reward returned a non-finite value ({number})")
    if value is None:
        return ComponentResult(None, Status.MASKED, None)
    if isinstance(value, ComponentResult):
        return value
    if isinstance(value, Score):
        if value.reward is None:
            return ComponentResult(
                None, value.status if value.status is not Status.OK else Status.MASKED,
                "; ".join(value.errors.values()) or None, dict(value.metrics),
            )
        inner = to_component_result(value.reward)
        inner.metrics.update(value.metrics)
        return inner
    if isinstance(value, Mapping):
        key = reward_key if reward_key in value else ("score" if "score" in value else None)
        if key is None:
            keys = ", ".join(map(repr, list(value)[:8]))
            return ComponentResult.failed(
                Status.ERROR, f"reward returned a dict without {reward_key!r} (keys: {keys})"
            )
        result = to_component_result(value[key])
        for name, extra in value.items():
            if name != key and isinstance(extra, (int, float)) and not isinstance(extra, bool):
                if math.isfinite(float(extra)):
                    result.metrics[str(name)] = float(extra)
            elif name != key and isinstance(extra, bool):
                result.metrics[str(name)] = 1.0 if extra else 0.0
        return result
    # numpy scalars that are not numbers.Real (e.g. numpy.bool_) and 0-d arrays
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return to_component_result(item(), reward_key)
        except Exception:  # noqa: BLE001 - reported below as a bad return type
            pass
    return ComponentResult.failed(
        Status.ERROR,
        f"reward returned {type(value).__name__}, expected a number, bool, None, dict or Score",
    )
