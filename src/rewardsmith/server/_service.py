"""Scoring for the server: admission (backpressure), per-request timeouts, request -> rollouts.

Scoring itself runs on the engine: sync rewards in its worker processes, async ones on its own
event loop. The server's event loop only parses, awaits and answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any, TypeVar, cast

from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError

from ..advantages import compute_advantages
from ..engine import Engine
from ..errors import AdvantageError, ConfigError
from ..files.rollouts import rollout_from_dict
from ..types import Rollout, Score, content_hash
from ._batching import GroupBatcher
from ._config import ServerConfig
from ._metrics import ServerMetrics
from ._models import RolloutIn, ScoreRequest
from ._watch import StallWatch, call_budget

__all__ = ["AdvantageSettings", "ScoringService", "advantage_settings", "fill_advantages",
           "invalid", "request_groups"]

T = TypeVar("T")


def invalid(location: Sequence[str | int], message: str) -> RequestValidationError:
    """A 422 in FastAPI's own format, pointing at ``location`` in the body."""
    return RequestValidationError([{"type": "value_error", "loc": ("body", *location),
                                    "msg": message, "input": None}])


_GROUP_KEYS = ("group", "group_id", "prompt_id", "group_index")
_GROUP_ALIASES = frozenset(_GROUP_KEYS[1:])


def _rollout(model: RolloutIn, default_id: str, where: list[str | int],
             group: str | None = None) -> Rollout:
    if not model.__pydantic_extra__ and not _GROUP_ALIASES & model.model_fields_set:
        plain = _plain_rollout(model, default_id, group)
        if plain is not None:
            return plain
    data = model.model_dump(exclude_unset=True)
    if group is not None and not any(data.get(k) is not None for k in _GROUP_KEYS):
        data["group"] = group  # saves hashing the prompt for a label that is given
    try:
        return rollout_from_dict(data, default_id=default_id)
    except (ValueError, RecursionError) as exc:
        raise invalid(where, str(exc)) from None


def _plain_rollout(model: RolloutIn, default_id: str, group: str | None) -> Rollout | None:
    """The rollout ``rollout_from_dict`` makes of a model with no extra keys and text (not
    chat messages) for prompt and completion, made from its fields directly; None otherwise.

    Without extra keys and group aliases no alias is in play (label, group_id, status...):
    each field is read from the one place it can be, and unset fields hold their defaults.
    """
    completion = model.completion if "completion" in model.model_fields_set else model.response
    prompt = model.prompt
    if completion is None:
        completion = ""
    elif type(completion) is not str:
        return None
    if prompt is None:
        prompt = ""
    elif type(prompt) is not str:
        return None
    label = model.group if model.group is not None else group
    truncated = model.truncated is True or model.finish_reason == "length"
    return Rollout(id=default_id if model.id is None else str(model.id),
                   group=content_hash(prompt, length=12) if label is None else str(label),
                   prompt=prompt, completion=completion, answer=model.answer,
                   metadata={} if model.metadata is None else model.metadata,
                   truncated=truncated)


def request_groups(body: ScoreRequest, max_batch: int) -> list[list[Rollout]]:
    """The request's rollouts as groups; 422 when there are too many or one cannot be read.

    In the ``groups`` form each inner list is one group; members without a group label are
    labelled by the group's position.
    """
    if body.groups is not None:
        count = sum(len(g) for g in body.groups)
        _check_count(count, max_batch, "groups")
        groups: list[list[Rollout]] = []
        position = 0
        for g, members in enumerate(body.groups):
            if not members:
                raise invalid(["groups", g], "a group needs at least one rollout")
            group: list[Rollout] = []
            for i, model in enumerate(members):
                group.append(_rollout(model, str(position), ["groups", g, i], str(g)))
                position += 1
            groups.append(group)
        return groups
    rollouts_in = body.rollouts or []
    _check_count(len(rollouts_in), max_batch, "rollouts")
    if not rollouts_in:
        raise invalid(["rollouts"], "no rollouts to score")
    by_label: dict[str, list[Rollout]] = {}
    for i, model in enumerate(rollouts_in):
        rollout = _rollout(model, str(i), ["rollouts", i])
        by_label.setdefault(rollout.group, []).append(rollout)
    return list(by_label.values())


def _check_count(count: int, max_batch: int, field: str) -> None:
    if count > max_batch:
        raise invalid([field], f"too many rollouts in one request: {count} > {max_batch} "
                               "(--max-batch); split the batch")


class ScoringService:
    """Admits work while the queue has room, scores it on the engine, bounds its time."""

    def __init__(self, engine: Engine, config: ServerConfig, metrics: ServerMetrics):
        self.engine = engine
        self.config = config
        self.metrics = metrics
        self.in_flight = 0  # rollouts admitted and not yet scored (the loop is single-threaded)
        self._work: set[asyncio.Future[Any]] = set()
        # Concurrent requests share engine calls, a call per worker at a time (see _batching).
        # A Ray engine's calls wait for a cluster's workers: not timed (see _watch).
        self.watch = StallWatch(call_budget(engine.rubric, engine.workers)
                                if engine.backend == "local" else None)
        self.batcher = GroupBatcher(engine, parallel=max(1, engine.workers),
                                    max_rollouts=max(config.max_batch, 4096),
                                    finish=fill_advantages, on_call=metrics.engine_call,
                                    watch=self.watch)

    async def admit(self, size: int, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work`` for ``size`` rollouts: 429 when the queue is full, 504 past the timeout."""
        if self.in_flight > 0 and self.in_flight + size > self.config.queue_limit:
            self.metrics.rejected.labels("queue_full").inc()
            raise HTTPException(
                429, f"the server is busy: {self.in_flight} rollouts are queued and this request "
                f"adds {size} (--queue-limit {self.config.queue_limit}); retry later",
                headers={"Retry-After": str(self.config.retry_after)})
        self.in_flight += size
        task = asyncio.ensure_future(work())
        self._work.add(task)

        def release(done: asyncio.Future[Any]) -> None:
            # A timed-out request's rollouts still occupy the engine until they finish.
            self.in_flight -= size
            self._work.discard(done)
            if not done.cancelled():
                done.exception()  # retrieved, so an abandoned task logs no "never retrieved"

        task.add_done_callback(release)
        try:
            return await asyncio.wait_for(asyncio.shield(task), self.config.request_timeout)
        except asyncio.CancelledError:
            # Nobody waits for it any more (the client went away, or the server stops): its
            # place in the queue is freed now, and its scoring stops where it can.
            task.cancel()
            raise
        except asyncio.TimeoutError:
            self.metrics.rejected.labels("timeout").inc()
            raise HTTPException(
                504, f"scoring took longer than {self.config.request_timeout:g} s "
                "(--request-timeout)") from None

    async def abandon(self) -> None:
        """Cancel the scoring nobody waits for any more (at shutdown, before the engine closes),
        so no call is left to complete into a closed event loop."""
        pending = list(self._work)
        for task in pending:
            task.cancel()
        await self.batcher.abandon()
        await asyncio.gather(*pending, return_exceptions=True)

    async def score_groups(self, groups: Sequence[Sequence[Rollout]],
                           advantages: AdvantageSettings | None = None) -> list[list[Score]]:
        """Score ``groups``; with ``advantages`` (method, trainer), fill each score's advantage
        over its own group (422 when they cannot be computed)."""
        results, failure = await self.batcher.score(groups, advantages)
        self.metrics.scored([s for group in results for s in group])
        if failure is not None:
            raise failure
        return results


# A request's advantage method and trainer.
AdvantageSettings = tuple[str | None, str | None]


def advantage_settings(body: ScoreRequest) -> AdvantageSettings | None:
    return (body.method, body.trainer) if body.advantages else None


def fill_advantages(requests: Sequence[Sequence[Sequence[Score]]],
                    settings: Sequence[Hashable]) -> list[Exception | None]:
    """Fill the advantages of several requests' scores (each request's groups with its
    settings, or none when its settings are None); per request, the 422 that stopped them.

    Requests with the same settings are computed in one call: every method and trainer the
    server takes normalizes each group over that group alone, so the groups of other requests
    beside it change nothing (and one call costs about what one request's did).
    """
    failures: list[Exception | None] = [None] * len(requests)
    together: dict[Hashable, list[int]] = {}
    for index, setting in enumerate(settings):
        if setting is not None:
            together.setdefault(setting, []).append(index)
    for setting, members in together.items():
        method, trainer = cast(AdvantageSettings, setting)
        if len(members) > 1:
            groups = [group for index in members for group in requests[index]]
            try:
                _advantages(groups, method, trainer)
                continue
            except RequestValidationError:
                pass  # one of them cannot: each on its own, so only that one fails
        for index in members:
            try:
                _advantages(requests[index], method, trainer)
            except RequestValidationError as exc:
                failures[index] = exc
    return failures


def _advantages(groups: Sequence[Sequence[Score]], method: str | None,
                trainer: str | None) -> None:
    flat = [s for group in groups for s in group]
    codes = [g for g, group in enumerate(groups) for _ in group]
    try:
        values = compute_advantages([s.reward for s in flat], codes, method=method,
                                    trainer=trainer, ids=[s.id for s in flat])
    except (ConfigError, AdvantageError) as exc:
        raise invalid(["advantages"], f"{exc}; send advantages=false to get the scores alone"
                      ) from None
    for score, value in zip(flat, values):
        score.advantage = value
