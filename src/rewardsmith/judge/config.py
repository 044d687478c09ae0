"""The judge's configuration: one pydantic model for YAML and Python alike."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ConfigError

__all__ = ["Budget", "Criterion", "JudgeConfig", "DEFAULT_STORE", "LimitScope",
           "config_error_message"]

DEFAULT_STORE = "rewardsmith.db"  # in the current directory, when neither config nor run names one


class Criterion(BaseModel):
    """One thing the judge grades, with the range its number must fall in."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    description: str = Field(min_length=1)
    range: tuple[float, float] = (0.0, 1.0)
    binary: bool = False  # pass/fail: samples are combined by majority, not by mean

    @field_validator("name")
    @classmethod
    def _identifier(cls, value: str) -> str:
        # Each criterion becomes a rubric component, and rubric formulas name components.
        if not value.isidentifier():
            raise ValueError(f"criterion name {value!r} must be a valid identifier "
                             f"(letters, digits and _, not starting with a digit)")
        return value

    @field_validator("range")
    @classmethod
    def _ordered(cls, value: tuple[float, float]) -> tuple[float, float]:
        low, high = value
        if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
            raise ValueError(f"range must be [low, high] with finite low < high, not {list(value)}")
        return value

    @model_validator(mode="after")
    def _binary_range(self) -> Criterion:
        if self.binary and self.range != (0.0, 1.0):
            raise ValueError(f"criterion {self.name!r}: a binary (pass/fail) criterion has "
                             f"range [0, 1], not {list(self.range)}")
        return self

    def spec(self) -> tuple[Any, ...]:
        """What identifies this criterion's grade (part of every record key)."""
        base = (self.name, self.description, self.range[0], self.range[1])
        # binary only changes how samples combine, but keys of plain criteria stay as they were
        return (*base, "binary") if self.binary else base


class _CriterionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str = Field(min_length=1)
    range: tuple[float, float] = (0.0, 1.0)
    binary: bool = False


class Budget(BaseModel):
    """What one run may spend on the judge; calling stops cleanly at the first limit reached."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    max_calls: int | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=0)
    max_cost: float | None = Field(default=None, ge=0)


ResponseFormat = Literal["json_schema", "json_object", "none"]
# Where a judge's limits hold: see rewardsmith.judge.limits and docs/judges.md.
LimitScope = Literal["auto", "process", "store", "ray"]
JudgeMode = Literal["pointwise", "group", "pairwise"]
PairScoring = Literal["win_rate", "bradley_terry"]


class JudgeConfig(BaseModel):
    """How to reach the judge model, what to ask it, and how hard to try.

    ``criteria`` maps a name to a description, or to ``{description, range}``; it is kept as a
    list of ``Criterion`` after validation. ``api_key_env`` names the environment variable that
    holds the key: the key itself is read when the judge first connects and is never stored.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str
    model: str = Field(min_length=1)
    api_key_env: str | None = None
    template: str = Field(min_length=1)
    system: str | None = None
    criteria: tuple[Criterion, ...]
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, gt=0)
    seed: int | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict)
    response_format: ResponseFormat = "json_schema"
    allow_alias: bool = False
    max_concurrency: int = Field(default=16, ge=1, le=4096)
    # Fewer requests in flight once recent replies take this many times the fastest recent
    # ones (a server queueing them); None: only refusals and timeouts shrink the window.
    latency_tolerance: float | None = Field(default=2.0, gt=1.0, le=100.0)
    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)
    limit_scope: LimitScope = "auto"
    timeout: float = Field(default=30.0, gt=0)  # the generation: from sending to the reply
    connect_timeout: float = Field(default=10.0, gt=0)  # reaching the server
    # From the attempt's start to the reply's first byte (None: only ``timeout`` bounds it).
    first_byte_timeout: float | None = Field(default=None, gt=0)
    unavailable_wait: float = Field(default=120.0, ge=0)  # 503s and refused connections
    retries: int = Field(default=4, ge=0, le=100)
    retry_failed: int = Field(default=2, ge=0, le=100)  # later runs that re-ask a failed grade
    retry_backoff: float = Field(default=0.5, ge=0)
    max_retry_wait: float = Field(default=60.0, gt=0)
    price_per_million_input: float = Field(default=0.0, ge=0)
    price_per_million_output: float = Field(default=0.0, ge=0)
    budget: Budget = Field(default_factory=Budget)
    store: str | None = None
    # How rollouts are put before the model (see docs/judges.md for each mode's cost).
    mode: JudgeMode = "pointwise"
    samples: int = Field(default=1, ge=1, le=64)
    logprobs: bool = False
    top_logprobs: int = Field(default=20, ge=1, le=20)
    group_chunk: int = Field(default=16, ge=2, le=256)
    pair_scoring: PairScoring = "win_rate"
    all_pairs_up_to: int = Field(default=8, ge=2, le=256)
    pairs_per_rollout: int = Field(default=4, ge=2, le=256)

    @field_validator("criteria", mode="before")
    @classmethod
    def _criteria(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            if not value:
                raise ValueError("needs at least one criterion")
            out: list[Any] = []
            for name, body in value.items():
                if isinstance(body, Criterion):
                    out.append(body)
                elif isinstance(body, str):
                    out.append({"name": str(name), "description": body})
                elif isinstance(body, Mapping):
                    parsed = _CriterionBody.model_validate(body)
                    out.append({"name": str(name), "description": parsed.description,
                                "range": parsed.range, "binary": parsed.binary})
                else:
                    raise ValueError(f"criterion {name!r}: expected a description or "
                                     f"{{description, range}}, got {type(body).__name__}")
            return out
        return value

    @field_validator("criteria")
    @classmethod
    def _unique(cls, value: tuple[Criterion, ...]) -> tuple[Criterion, ...]:
        if not value:
            raise ValueError("needs at least one criterion")
        names = [c.name for c in value]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate criterion names in {names}")
        return value

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError(f"must be an http(s) URL such as http://127.0.0.1:8000/v1, "
                             f"not {value!r}")
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        # A common slip is pasting the key itself here: refuse it without echoing it.
        if value is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError("must be the NAME of an environment variable (such as "
                             "OPENAI_API_KEY), not the key itself")
        return value

    @model_validator(mode="after")
    def _finite_prices(self) -> JudgeConfig:
        for name in ("price_per_million_input", "price_per_million_output", "timeout",
                     "connect_timeout", "unavailable_wait"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be finite")
        first = self.first_byte_timeout
        if first is not None and not (math.isfinite(first) and first <= self.timeout):
            raise ValueError(f"first_byte_timeout ({first:g}) must be at most timeout "
                             f"({self.timeout:g}), which bounds the whole reply")
        return self

    @model_validator(mode="after")
    def _modes(self) -> JudgeConfig:
        if self.samples > 1 and self.temperature == 0:
            # Identical requests would pay n times for one answer.
            raise ValueError(f"samples: {self.samples} needs temperature > 0 (at temperature 0 "
                             f"every sample is the same reply)")
        if self.logprobs and self.mode != "pointwise":
            raise ValueError(f"logprobs: weighted scores are read in mode pointwise only, "
                             f"not {self.mode}")
        if self.pairs_per_rollout % 2:
            raise ValueError(f"pairs_per_rollout must be even (each rollout meets the same "
                             f"number of others on both sides), not {self.pairs_per_rollout}")
        binary = [c.name for c in self.criteria if c.binary]
        if binary and self.mode == "pairwise":
            raise ValueError(f"binary criteria {binary} cannot be judged pairwise (a pair "
                             f"verdict is a preference, not a pass/fail)")
        return self

    @property
    def criterion_names(self) -> list[str]:
        return [c.name for c in self.criteria]

    def sampling(self) -> dict[str, Any]:
        """Sampling parameters sent with every request (and part of every record key)."""
        params: dict[str, Any] = {"temperature": self.temperature}
        for key in ("top_p", "max_tokens", "seed"):
            value = getattr(self, key)
            if value is not None:
                params[key] = value
        return params

    @classmethod
    def parse(cls, data: Any, *, where: str = "judge") -> JudgeConfig:
        """Validate a mapping (from YAML) into a config; errors name the key and ``where``."""
        if isinstance(data, JudgeConfig):
            return data
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: expected a mapping with base_url, model, template and "
                              f"criteria, got {type(data).__name__}")
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            raise ConfigError(config_error_message(exc, where)) from None


def config_error_message(exc: ValidationError, where: str) -> str:
    lines = []
    for error in exc.errors():
        key = ".".join(str(p) for p in error["loc"])
        if error["type"] == "extra_forbidden":
            lines.append(f"{where}: unknown key {key!r}")
        elif error["type"] == "missing":
            lines.append(f"{where}: missing key {key!r}")
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            lines.append(f"{where}.{key}: {message}" if key else f"{where}: {message}")
    return "\n".join(lines)

