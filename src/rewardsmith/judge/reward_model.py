"""``reward_model:``: a trained reward model over HTTP, one request per group, each paid once.

Three server shapes, as the servers define them:

- ``api: vllm_score``: vLLM's ``POST /score`` (cross-encoder and reward models served with
  the score task): ``{"model", "text_1": [...], "text_2": [...]}`` where ``text_1`` renders
  ``query_template`` (default ``{prompt}``) and ``text_2`` renders ``template`` (default
  ``{completion}``); the reply's ``data[i].score`` is rollout i's reward.
- ``api: vllm_classify``: vLLM's ``POST /classify``: ``{"model", "input": [...]}`` (``template``,
  default ``{prompt}\\n{completion}``); the reward is ``data[i].probs[class_index]`` (a
  one-class model needs no ``class_index``).
- ``api: openrlhf``: OpenRLHF's ``serve_rm`` ``POST /get_reward``:
  ``{"query": [...], "prompts": [...]}``; the reward is ``rewards[i]``.

``base_url`` is the server's root (``http://host:8000``; a trailing ``/v1`` is dropped). The
record key of a reward is the api, model, templates and class index, and the rollout fields
the templates read: a rerun or a restart replays, as for judges (same store, same claims).
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rewardsmith.rubric import (
    Component,
    register_component_kind,
)

from ..errors import ConfigError, JudgeError, RewardsmithError, RubricError
from ..types import ComponentResult, Rollout, Status, content_hash
from .client import _error_text, _model_ids, _retry_after, _transport_reason
from .config import DEFAULT_STORE, Budget, LimitScope, config_error_message
from .ledger import CallRecord, Ledger, Owner
from .limits import Limits, LimitSettings
from .prompt import MissingField, Template
from .usage import Usage
from .waiting import Watcher

__all__ = ["RewardModel", "RewardModelConfig", "reward_model_components"]

RewardApi = Literal["vllm_score", "vllm_classify", "openrlhf"]
_ROUTES = {"vllm_score": "/score", "vllm_classify": "/classify", "openrlhf": "/get_reward"}
_RETRY_STATUSES = frozenset({408, 409, 429})


class RewardModelConfig(BaseModel):
    """Where the reward model is served, how to show it a rollout, and how hard to try."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    base_url: str
    api: RewardApi
    model: str | None = None
    template: str | None = None
    query_template: str = "{prompt}"
    class_index: int | None = Field(default=None, ge=0)
    api_key_env: str | None = None
    max_concurrency: int = Field(default=8, ge=1, le=1024)
    requests_per_minute: float | None = Field(default=None, gt=0)
    limit_scope: LimitScope = "auto"
    budget: Budget = Field(default_factory=Budget)
    timeout: float = Field(default=60.0, gt=0)
    retries: int = Field(default=4, ge=0, le=100)
    retry_backoff: float = Field(default=0.5, ge=0)
    max_retry_wait: float = Field(default=60.0, gt=0)
    store: str | None = None

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError(f"must be an http(s) URL such as http://127.0.0.1:8000, not {value!r}")
        return value.rstrip("/").removesuffix("/v1")

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError("must be the NAME of an environment variable, not the key itself")
        return value

    def text_template(self) -> str:
        if self.template is not None:
            return self.template
        return "{completion}" if self.api == "vllm_score" else "{prompt}\n{completion}"


class _ComponentModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reward_model: dict[str, Any]
    weight: float = 1.0
    requires: str | None = None


class RewardModel:
    """The ``Evaluator`` of a ``reward_model:`` component (see ``rewardsmith.rubric``)."""

    def __init__(self, name: str, config: RewardModelConfig | Mapping[str, Any], *,
                 where: str | None = None):
        where = where or f"reward_model {name!r}"
        if isinstance(config, RewardModelConfig):
            self.config = config
        else:
            try:
                self.config = RewardModelConfig.model_validate(dict(config))
            except ValidationError as exc:
                raise ConfigError(config_error_message(exc, where)) from None
        c = self.config
        if c.api != "openrlhf" and not c.model:
            raise ConfigError(f"{where}: api {c.api} needs model (the id vLLM serves)")
        self.name = name
        self.template = Template(c.text_template(), where=f"{where}.template")
        self.query = (Template(c.query_template, where=f"{where}.query_template",
                               needs_completion=False) if c.api != "vllm_classify" else None)
        for template in (self.template, self.query):
            if template is not None and template.has_criteria_slot:
                raise ConfigError(f"{where}: a reward model has no criteria: remove "
                                  f"{{criteria}} from its templates")
        self._identity = content_hash("rewardsmith-reward-model/1", c.api, c.model,
                                      c.text_template(),
                                      c.query_template if c.api != "vllm_classify" else None,
                                      c.class_index, length=32)
        self._attached: str | None = None
        self._state: _State | None = None

    def __repr__(self) -> str:
        return f"RewardModel({self.name!r}, api={self.config.api!r}, model={self.config.model!r})"

    # ---------------------------------------------------------------- Evaluator protocol

    def identity(self) -> str:
        return self._identity

    @property
    def per_rollout(self) -> bool:
        """Each text is scored alone: a closed gate can spare its call."""
        return True

    def attach_store(self, path: str) -> None:
        self._attached = path

    def usage_key(self) -> str:
        return f"reward_model:{self.name}"

    def usage(self) -> dict[str, float]:
        return (self._state.usage if self._state is not None else Usage()).as_dict()

    def _current(self) -> _State:
        loop = asyncio.get_running_loop()
        if self._state is None or self._state.loop is not loop:
            if self._state is not None:
                # Its loop ended without closing it: its share of the limits goes back.
                self._state.limits.abandon()
            path = self.config.store or self._attached or DEFAULT_STORE
            self._state = _State(self, loop, path)
        return self._state

    async def check(self) -> None:
        state = self._current()
        if state.http is not None:
            return
        env = self.config.api_key_env
        headers = {"Content-Type": "application/json"}
        if env is not None:
            key = os.environ.get(env)
            if not key:
                raise JudgeError(f"reward_model {self.name!r}: the environment variable {env} "
                                 f"(api_key_env) is not set")
            headers["Authorization"] = f"Bearer {key}"
        await state.ledger.run(state.ledger.open)
        await state.limits.open()
        state.http = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(self.config.timeout),
                                       limits=httpx.Limits(max_connections=self.config.max_concurrency))
        url = f"{self.config.base_url}/v1/models" if self.config.api != "openrlhf" else \
            self.config.base_url
        try:
            response = await state.http.get(url, timeout=min(10.0, self.config.timeout))
        except httpx.HTTPError as exc:
            raise JudgeError(f"reward_model {self.name!r}: cannot reach {self.config.base_url} "
                             f"({_transport_reason(exc)})") from None
        if self.config.api == "openrlhf":
            return  # serve_rm has no listing: any HTTP answer says it is up
        served = _model_ids(response)
        if served is not None and self.config.model not in served:
            raise JudgeError(f"reward_model {self.name!r}: model {self.config.model!r} is not "
                             f"served by {self.config.base_url}; it serves: "
                             f"{', '.join(sorted(served)[:20]) or '(none)'}")

    async def close(self) -> None:
        state = self._state
        if state is None or state.loop is not asyncio.get_running_loop():
            return
        self._state = None
        if state.http is not None:
            await state.http.aclose()
        await state.ledger.run(state.ledger.close, state.owner)
        state.ledger.shutdown()
        await state.limits.close()
        state.owner.retire()

    async def evaluate(self, rollouts: Sequence[Rollout]) -> list[ComponentResult]:
        """One request for the rollouts (a group) whose rewards are not recorded yet."""
        state = self._current()
        try:
            await self.check()
        except RewardsmithError as exc:
            return [ComponentResult.failed(Status.ERROR, str(exc)) for _ in rollouts]
        results: list[ComponentResult | None] = [None] * len(rollouts)
        keyed: dict[str, list[int]] = {}
        texts: dict[str, tuple[str, str]] = {}
        for index, rollout in enumerate(rollouts):
            try:
                values = self.template.values(rollout)
                query = self.query.values(rollout) if self.query is not None else {}
            except MissingField as exc:
                results[index] = ComponentResult.failed(Status.ERROR, str(exc))
                continue
            key = self._identity + Template.fingerprint({**values, **{f"q:{k}": v
                                                                      for k, v in query.items()}})
            keyed.setdefault(key, []).append(index)
            texts[key] = (self._render(self.query, query), self._render(self.template, values))
        try:
            found = await self._settle(state, list(keyed), texts)
        except RewardsmithError as exc:
            found = {k: str(exc) for k in keyed}
        for key, indices in keyed.items():
            value = found.get(key, "not scored")
            for index in indices:
                results[index] = (ComponentResult(value) if isinstance(value, float)
                                  else ComponentResult.failed(Status.ERROR, value))
        return [r if r is not None else ComponentResult.failed(Status.ERROR, "not scored")
                for r in results]

    @staticmethod
    def _render(template: Template | None, values: dict[str, str]) -> str:
        return "" if template is None else template.text.format(**values)

    # ---------------------------------------------------------------- paid once

    async def _settle(self, state: _State, keys: list[str],
                      texts: dict[str, tuple[str, str]]) -> dict[str, float | str]:
        found: dict[str, float | str] = dict(state.ledger.grades(keys))
        state.usage.replayed += len(found)
        wanted = [k for k in keys if k not in found]
        if not wanted:
            return found
        criteria = {k: self.name for k in wanted}
        model = self.config.model or self.config.api
        claim = await state.ledger.claim(wanted, state.owner, criteria, model)
        for key, record in claim.done.items():
            if record.value is not None:
                state.usage.replayed += 1
                found[key] = record.value
        if claim.mine:
            async with state.limits.call() as ticket:  # in flight, and the budget
                limit = ticket.spent
                if limit is not None:
                    await state.ledger.run(state.ledger.release, claim.mine, state.owner)
                    state.usage.budget_exhausted = 1
                    state.usage.unscored += len(claim.mine)
                    found.update({k: f"reward_model {self.name!r}: budget spent ({limit}); not "
                                     f"scored" for k in claim.mine})
                    return found
                state.usage.calls += 1
                call, outcomes = await self._call(state, [texts[k] for k in claim.mine],
                                                  claim.mine)
                ticket.charge(call.tokens_in, 0.0)  # max_tokens counts prompt tokens
            try:
                await state.ledger.finish(call, outcomes, {k: self.name for k in outcomes})
            except RewardsmithError as exc:
                outcomes = {k: f"reward_model {self.name!r}: reward not recorded, so not "
                               f"used: {exc}" for k in outcomes}
            found.update(outcomes)
        if claim.theirs:
            records = await state.watcher.wait(claim.theirs)
            for key in claim.theirs:
                settled = records.get(key)
                if settled is not None and settled.state == "ok" and settled.value is not None:
                    state.usage.shared += 1
                    found[key] = settled.value
                else:
                    found[key] = (f"reward_model {self.name!r}: another process sharing the "
                                  f"store did not record this reward; run again to ask for it")
        return found

    def _body(self, texts: list[tuple[str, str]]) -> dict[str, Any]:
        api = self.config.api
        if api == "vllm_score":
            return {"model": self.config.model, "text_1": [q for q, _ in texts],
                    "text_2": [t for _, t in texts]}
        if api == "vllm_classify":
            return {"model": self.config.model, "input": [t for _, t in texts]}
        return {"query": [t for _, t in texts], "prompts": [q for q, _ in texts]}

    async def _call(self, state: _State, texts: list[tuple[str, str]],
                    keys: list[str]) -> tuple[CallRecord, dict[str, float | str]]:
        assert state.http is not None
        config = self.config
        call = CallRecord(judge=self.name, model=config.model or config.api,
                          criteria=[self.name], status="ok", attempts=0, tokens_in=0,
                          tokens_out=0, cost=0.0, started_at=time.time())
        url = config.base_url + _ROUTES[config.api]
        body = self._body(texts)
        while True:
            call.attempts += 1
            wait: float | None = None
            if config.requests_per_minute is not None:
                await state.limits.pace(0.0)
            try:
                response = await state.http.post(url, json=body)
            except httpx.HTTPError as exc:
                reason = _transport_reason(exc)
            else:
                if response.status_code == 200:
                    return self._read(state, call, response, keys)
                reason = f"HTTP {response.status_code}: {_error_text(response)}"
                if response.status_code not in _RETRY_STATUSES and response.status_code < 500:
                    return self._failed(state, call, reason, keys, response.status_code)
                wait = _retry_after(response)
            if call.attempts > config.retries:
                return self._failed(state, call, f"after {call.attempts} attempt(s): {reason}",
                                    keys)
            state.usage.retries += 1
            ceiling = min(20.0, config.retry_backoff * 2 ** (call.attempts - 1))
            delay = min(wait, config.max_retry_wait) if wait is not None else \
                random.uniform(ceiling / 2, ceiling)
            await asyncio.sleep(delay)

    def _failed(self, state: _State, call: CallRecord, reason: str, keys: list[str],
                status: int | None = None) -> tuple[CallRecord, dict[str, float | str]]:
        state.usage.failed += 1
        call.status, call.http_status = "failed", status
        joint = " " if reason.startswith("after") else ": "
        call.error = f"reward_model {self.name!r}: request failed{joint}{reason}"
        return call, {k: call.error for k in keys}

    def _read(self, state: _State, call: CallRecord, response: httpx.Response,
              keys: list[str]) -> tuple[CallRecord, dict[str, float | str]]:
        call.reply = response.text[:100_000]
        try:
            rewards = self._rewards(response.json(), len(keys))
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            return self._failed(state, call, f"with a reply not shaped as {self.config.api} "
                                f"answers ({exc}): {response.text[:160]!r}", keys, 200)
        usage = response.json().get("usage") if self.config.api != "openrlhf" else None
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            call.tokens_in = usage["prompt_tokens"]
            state.usage.tokens_in += call.tokens_in
        out: dict[str, float | str] = {}
        for key, value in zip(keys, rewards, strict=True):
            out[key] = value if math.isfinite(value) else (
                f"reward_model {self.name!r}: the server sent {value}, not a finite reward")
        if any(isinstance(v, str) for v in out.values()):
            call.status, call.error = "failed", next(v for v in out.values()
                                                     if isinstance(v, str))
            state.usage.failed += 1
        return call, out

    def _rewards(self, data: Any, count: int) -> list[float]:
        api = self.config.api
        if api == "openrlhf":
            values = [float(v) for v in data["rewards"]]
        else:
            items = sorted(data["data"], key=lambda item: int(item["index"]))
            if api == "vllm_score":
                values = [float(item["score"]) for item in items]
            else:
                values = [self._class_probability(item) for item in items]
        if len(values) != count:
            raise ValueError(f"{len(values)} rewards for {count} texts")
        return values

    def _class_probability(self, item: Mapping[str, Any]) -> float:
        probs = item["probs"]
        index = self.config.class_index
        if index is None:
            if len(probs) != 1:
                raise ValueError(f"the model has {len(probs)} classes: set class_index")
            index = 0
        return float(probs[index])

    def components(self, *, weight: float = 1.0, requires: str | None = None) -> list[Component]:
        return [Component(self.name, weight=weight, requires=requires, evaluator=self)]


class _State:
    """What lives on one event loop: HTTP client, store, claims, counters."""

    def __init__(self, model: RewardModel, loop: asyncio.AbstractEventLoop, path: str):
        self.loop = loop
        self.owner = Owner.here()
        self.usage = Usage()
        self.ledger = Ledger(path)
        self.limits = Limits(LimitSettings.of(
            f"reward_model {model.name!r} ({model.config.model or model.config.api} at "
            f"{model.config.base_url})", model.config), path)
        self.watcher = Watcher(self.ledger, self.owner)
        self.http: httpx.AsyncClient | None = None


def reward_model_components(name: str, config: Mapping[str, Any], where: str) -> list[Component]:
    """The rubric factory for ``reward_model:`` components."""
    try:
        model = _ComponentModel.model_validate(dict(config))
    except ValidationError as exc:
        raise RubricError(config_error_message(exc, where)) from None
    try:
        evaluator = RewardModel(name, model.reward_model, where=f"{where}.reward_model")
    except ConfigError as exc:
        raise RubricError(str(exc)) from None
    return evaluator.components(weight=model.weight, requires=model.requires)


register_component_kind("reward_model", reward_model_components)
