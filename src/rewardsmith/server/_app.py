"""The FastAPI application: routes for rewardsmith, OpenRLHF and slime clients."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Query
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from .. import __version__
from ..engine import Engine
from ..errors import InputError
from ..integrations.adapters import (
    Scored,
    accuracy,
    accuracy_component,
    completion_of,
    log_key,
    masked_score,
    text_or_messages,
    warn_reserved_names,
)
from ..integrations.endtext import resolve_end_texts
from ..integrations.openrlhf import build_rollouts, to_reply
from ..integrations.slime import MASKED_STATES, masked_reward, sample_state
from ..types import Rollout, Status
from ._config import ServerConfig
from ._fast import fast_score_route
from ._guard import Guard
from ._metrics import CONTENT_TYPE, ServerMetrics
from ._models import (
    HealthReply,
    OpenRLHFReply,
    OpenRLHFRequest,
    ScoreReply,
    ScoreRequest,
    SlimeDetail,
    SlimeRequest,
)
from ._openapi import error_responses, state_limits, validation_reply
from ._service import ScoringService, advantage_settings, invalid, request_groups

__all__ = ["build_app"]

ROUTES = frozenset({"/score", "/get_reward", "/openrlhf", "/slime", "/health", "/metrics"})


_errors = error_responses
_POST_ERRORS = _errors(400, 401, 408, 413, 422, 429, 503, 504)


def build_app(config: ServerConfig, engine: Engine) -> tuple[Guard, FastAPI]:
    """The ASGI app to serve (routes behind the guard: token, body size, metrics) and its
    FastAPI app (for the OpenAPI schema)."""
    rubric = config.rubric
    fallback = masked_reward()  # read now: a bad REWARDSMITH_MASKED_REWARD fails at startup
    end_texts = resolve_end_texts(None)  # likewise a bad REWARDSMITH_END_TEXTS
    warn_reserved_names(rubric)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        # Runs after uvicorn has let the requests in flight finish (or answered them 503).
        await service.abandon()
        await asyncio.to_thread(engine.close)

    app = FastAPI(
        title="rewardsmith reward server",
        version=__version__,
        description=f"Scores rollouts with the rubric {rubric.name!r} "
                    f"(components: {', '.join(rubric.names)}).",
        lifespan=lifespan,
        exception_handlers={RequestValidationError: validation_reply},
    )
    generated = app.openapi

    def openapi() -> dict[str, Any]:
        fresh = app.openapi_schema is None
        schema = generated()
        return state_limits(schema, config.max_batch) if fresh else schema

    app.openapi = openapi  # type: ignore[method-assign]
    # ``service`` is bound below; the gauge reads it only when Prometheus scrapes.
    metrics = ServerMetrics(engine.usage, lambda: service.in_flight)
    service = ScoringService(engine, config, metrics)

    async def answer_score(body: ScoreRequest) -> dict[str, Any]:
        groups = request_groups(body, config.max_batch)
        size = sum(len(g) for g in groups)
        settings = advantage_settings(body)
        scored = await service.admit(size, lambda: service.score_groups(groups, settings))
        flat = [item for group in scored for item in group]
        counts = {s.value: 0 for s in Status}
        rows = []
        for item in flat:
            counts[item.status.value] += 1
            rows.append(item.to_dict())
        return {"rubric": rubric.name, "rubric_id": rubric.id, "groups": len(scored),
                "counts": counts, "scores": rows}

    # Valid JSON bodies take the fast route (see _fast); the rest come here.
    @app.post("/score", response_model=ScoreReply, responses=_POST_ERRORS,
              summary="Score rollouts (flat or as whole groups), with GRPO advantages")
    async def score(body: ScoreRequest) -> Response:
        return JSONResponse(await answer_score(body))

    async def openrlhf(body: OpenRLHFRequest) -> Response:
        try:
            rollouts = build_rollouts(body.query, body.prompts, body.labels, end_texts)
        except InputError as exc:
            raise invalid(["query"], str(exc)) from None
        if len(rollouts) > config.max_batch:
            raise invalid(["query"], f"too many queries in one request: {len(rollouts)} > "
                                     f"{config.max_batch} (--max-batch)")
        groups = _by_label(rollouts)
        scored = await service.admit(len(rollouts), lambda: service.score_groups(groups))
        order = {id(r): n for n, r in enumerate(rollouts)}
        flat: list[Scored | None] = [None] * len(rollouts)
        for group, scores in zip(groups, scored):
            for rollout, item in zip(group, scores):
                flat[order[id(rollout)]] = Scored(item, rubric)
        return JSONResponse(to_reply([s for s in flat if s is not None], rubric))

    app.post("/get_reward", response_model=OpenRLHFReply, responses=_POST_ERRORS,
             summary="OpenRLHF remote reward model (--reward.remote_url http://HOST:PORT/get_reward)"
             )(openrlhf)
    app.post("/openrlhf", response_model=OpenRLHFReply, responses=_POST_ERRORS,
             summary="The same as /get_reward")(openrlhf)

    @app.post("/slime", response_model=float | SlimeDetail, responses=_POST_ERRORS,
              summary="slime/Miles remote_rm (--rm-type remote_rm --rm-url http://HOST:PORT/slime)")
    async def slime(body: SlimeRequest,
                    detail: bool = Query(False, description="Reply with an object (for "
                                         "--reward-key reward) instead of a bare number.")
                    ) -> Response:
        data = body.model_dump()
        state = sample_state(body.status)
        truncated = body.truncated is True or state == "truncated"
        rollout = Rollout("0", "0", text_or_messages(data["prompt"]),
                          completion_of(data["response"], end_texts), body.label,
                          dict(body.metadata or {}), truncated)
        if state in MASKED_STATES:
            item = masked_score(rollout, rubric, MASKED_STATES[state])
        else:
            [[item]] = await service.admit(1, lambda: service.score_groups([[rollout]]))
        reward = fallback if item.reward is None else item.reward
        if not detail:
            return JSONResponse(reward)
        out: dict[str, Any] = {"reward": reward, "masked": 1.0 if item.reward is None else 0.0,
                               "acc": accuracy(item, accuracy_component(rubric)),
                               "status": item.status.value}
        for name, value in item.components.items():
            out[log_key(name)] = 0.0 if value is None else value
        return JSONResponse(out)

    @app.get("/health", response_model=HealthReply, responses={
        **_errors(401, 408), 503: {"model": HealthReply, "description": "Scoring cannot make "
                                   "progress (status 'stalled'; 'problem' says why)"}},
             summary="Liveness and the rubric served (no token needed)")
    async def health() -> Response:
        problem = service.watch.stalled()
        reply = {"status": "ok" if problem is None else "stalled", "problem": problem,
                 "rubric": rubric.name, "rubric_id": rubric.id, "components": rubric.names,
                 "in_flight": service.in_flight, "queue_limit": config.queue_limit,
                 "version": __version__}
        return JSONResponse(reply, status_code=200 if problem is None else 503)

    @app.get("/metrics", response_class=Response, responses={
        200: {"content": {"text/plain": {}}, "description": "Prometheus text format"},
        **_errors(401, 408)}, summary="Prometheus metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    return Guard(app, token=config.token, max_body_bytes=config.max_body_bytes, metrics=metrics,
                 routes=ROUTES, retry_after=config.retry_after,
                 fast={"/score": fast_score_route(answer_score)}), app


def _by_label(rollouts: list[Rollout]) -> list[list[Rollout]]:
    groups: dict[str, list[Rollout]] = {}
    for rollout in rollouts:
        groups.setdefault(rollout.group, []).append(rollout)
    return list(groups.values())
