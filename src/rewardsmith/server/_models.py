"""Request and response bodies of the reward server (they make its OpenAPI schema).

The schema says what the routes enforce: a field that is a boolean takes only ``true`` or
``false`` (not ``"yes"`` or ``1``), and a list that may be left out may not be ``null`` either.
Limits that depend on the server's options (``--max-batch``) are added per server by
``_openapi.state_limits``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator
from pydantic.config import JsonDict

__all__ = [
    "ErrorReply",
    "HealthReply",
    "Message",
    "OpenRLHFReply",
    "OpenRLHFRequest",
    "RolloutIn",
    "ScoreOut",
    "ScoreReply",
    "ScoreRequest",
    "SlimeDetail",
    "SlimeRequest",
]

_EXAMPLE_ROLLOUT: JsonDict = {
    "id": "q7-s0",
    "group": "q7",
    "prompt": "Natalia sold 48 clips in April and half as many in May. How many in all?",
    "completion": "In May she sold 24, so 48 + 24 = 72. #### 72",
    "answer": "72",
}


class Message(BaseModel):
    """A chat message; ``content`` is text or a list of parts such as ``{"type": "text"}``."""

    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = None


TextOrMessages = str | list[Message]


class RolloutIn(BaseModel):
    """One completion of one prompt. Field names and aliases are those of rollout JSONL."""

    model_config = ConfigDict(extra="allow", json_schema_extra={
        "examples": [_EXAMPLE_ROLLOUT],
        "anyOf": [{"required": ["completion"]}, {"required": ["response"]}]})
    id: str | int | None = Field(None, description="Default: the position in the request.")
    group: str | int | None = Field(
        None, description="The prompt group GRPO normalizes over (aliases: group_id, prompt_id, "
        "group_index). Default: a hash of the prompt.")
    # The aliases, typed as ``group`` is (an object there is refused, so the schema says so).
    group_id: str | int | None = Field(None, description="Alias of group.")
    prompt_id: str | int | None = Field(None, description="Alias of group.")
    group_index: str | int | None = Field(None, description="Alias of group.")
    prompt: TextOrMessages | None = None
    completion: TextOrMessages | None = Field(None, description="Required (alias: response).")
    response: TextOrMessages | None = None
    answer: Any = Field(None, description="The reference answer (aliases: label, ground_truth).")
    metadata: dict[str, Any] | None = None
    truncated: StrictBool | None = None
    finish_reason: str | None = Field(None, description="'length' marks it truncated.")

    @model_validator(mode="after")
    def _has_completion(self) -> RolloutIn:
        if "completion" not in self.model_fields_set and "response" not in self.model_fields_set:
            raise ValueError("missing 'completion' (or 'response')")
        return self


def _score_request_schema(schema: JsonDict) -> None:
    schema["examples"] = [{"rollouts": [_EXAMPLE_ROLLOUT], "advantages": True,
                           "trainer": "verl"}]
    schema["oneOf"] = [{"required": ["rollouts"]}, {"required": ["groups"]}]
    properties = schema.get("properties")
    for key in ("rollouts", "groups"):  # a list or absent: null is refused, so not offered
        field = properties.get(key) if isinstance(properties, dict) else None
        branches = field.get("anyOf") if isinstance(field, dict) else None
        if not isinstance(field, dict) or not isinstance(branches, list):
            continue
        arrays = [b for b in branches if isinstance(b, dict) and b.get("type") == "array"]
        if len(arrays) == 1:
            del field["anyOf"]
            field.pop("default", None)
            field.update(arrays[0])


class ScoreRequest(BaseModel):
    """Rollouts to score: a flat list (grouped by ``group``) or a list of whole groups."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_score_request_schema)
    # Absent is fine, null is not: ``_not_null`` refuses it and the schema leaves it out.
    rollouts: list[RolloutIn] | None = Field(
        None, min_length=1,
        description="Rollouts in any order; those with the same group form one group.")
    groups: list[Annotated[list[RolloutIn], Field(min_length=1)]] | None = Field(
        None, min_length=1,
        description="Whole groups: each inner list is one group (give this or rollouts).")
    advantages: StrictBool = Field(True, description="Compute GRPO advantages per group.")
    trainer: Literal["rewardsmith", "verl", "trl", "slime", "miles", "openrlhf", "nemo"] | None = Field(
        None, description="Use this trainer's advantage formula (method, eps, std); "
        "equal groups still get exactly 0.")
    method: Literal["grpo", "dr_grpo", "rloo"] | None = None

    @field_validator("rollouts", "groups", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("must be a list of rollouts, not null (or leave the key out)")
        return value

    @model_validator(mode="after")
    def _one_form(self) -> ScoreRequest:
        if (self.rollouts is None) == (self.groups is None):
            raise ValueError("give exactly one of 'rollouts' and 'groups'")
        return self


class ScoreOut(BaseModel):
    """One rollout's result (the scored-JSONL line)."""

    id: str
    group: str
    reward: float | None = Field(description="The total; null when masked.")
    status: Literal["ok", "error", "timeout", "masked"]
    components: dict[str, float | None]
    errors: dict[str, str]
    advantage: float | None = Field(description="Null when masked or not asked for.")
    metrics: dict[str, float | None] | None = None


class ScoreReply(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "rubric": "gsm8k-v1", "rubric_id": "4f1c2a9e0b7d", "groups": 1,
        "counts": {"ok": 1, "error": 0, "timeout": 0, "masked": 0},
        "scores": [{"id": "q7-s0", "group": "q7", "reward": 1.0, "status": "ok",
                    "components": {"correct": 1.0}, "errors": {}, "advantage": 0.0}]}]})
    rubric: str
    rubric_id: str
    groups: int
    counts: dict[str, int] = Field(description="Rollouts by status.")
    scores: list[ScoreOut] = Field(description="In request order (groups flattened in order).")


class OpenRLHFRequest(BaseModel):
    """What OpenRLHF posts to ``--reward.remote_url``: each query is prompt + response."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [{
        "query": ["Q: 2+3? A: 5"], "prompts": ["Q: 2+3? A:"], "labels": ["5"]}]})
    query: list[str] = Field(description="One text per sample: its prompt and response.")
    prompts: list[str] | None = Field(
        None, description="The prompts, as many as there are queries (422 otherwise); "
        "each is cut from the front of its query.")
    labels: list[Any] | None = Field(
        None, description="The reference answers, as many as there are queries (422 otherwise).")


class OpenRLHFReply(BaseModel):
    rewards: list[float] = Field(description="Trained on; 0.0 for a masked sample.")
    scores: list[float] = Field(description="The same numbers (for --dynamic_filtering).")
    extra_logs: dict[str, list[float]] = Field(
        description="Per-sample masked (1/0), acc (1/0) and one list per component.")


class SlimeRequest(BaseModel):
    """What slime's ``--rm-type remote_rm`` posts to ``--rm-url`` for one sample.

    slime itself posts prompt, response and label only; ``truncated``, ``status`` and
    ``metadata`` are read when another client sends them (``custom_rm`` reads them in-process).
    """

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [{
        "prompt": "What is 6 x 7?", "response": "6 x 7 = 42. #### 42", "label": "42"}]})
    prompt: TextOrMessages | None = None
    response: TextOrMessages
    label: Any = None
    metadata: dict[str, Any] | None = None
    truncated: bool | None = Field(None, description="The response hit the length limit.")
    status: str | None = Field(
        None, description="slime's Sample.Status name: 'truncated' marks it truncated; "
        "'aborted' and 'failed' mask it without scoring.")


class SlimeDetail(BaseModel):
    """The reply with ``?detail=true`` (for ``--reward-key reward``)."""

    model_config = ConfigDict(extra="allow")
    reward: float
    masked: float
    acc: float
    status: Literal["ok", "error", "timeout", "masked"]


class HealthReply(BaseModel):
    status: Literal["ok", "stalled"] = Field(description="'stalled' (with 503): a reward call "
                                             "is stuck past its timeout and every request "
                                             "waits behind it.")
    problem: str | None = Field(None, description="Why scoring cannot make progress.")
    rubric: str
    rubric_id: str
    components: list[str]
    in_flight: int = Field(description="Rollouts accepted and not yet scored.")
    queue_limit: int
    version: str


class ErrorReply(BaseModel):
    detail: Any
