"""The data model: what goes in (``Rollout``) and what comes out (``Score``)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from enum import Enum
from json.encoder import encode_basestring
from typing import Any

from .frozen import EMPTY, FrozenDict, freeze

__all__ = [
    "Message",
    "Rollout",
    "RolloutView",
    "Score",
    "Status",
    "ComponentResult",
    "message_text",
    "stable_json",
    "content_hash",
    "content_json_of",
    "key_of_content",
]

Message = dict[str, Any]
TextOrMessages = str | list[Message]


class Status(str, Enum):
    """What happened to a rollout (or one component of it)."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    MASKED = "masked"

    def __str__(self) -> str:
        return self.value


def message_text(value: Any, *, role: str | None = "assistant") -> str:
    """The text a reward grades: a string as is; for chat messages, the last ``role`` message.

    When no message has that role the last message is used; ``role=None`` joins all contents.
    Content given as a list of parts (``[{"type": "text", "text": ...}]``) is joined.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return _content_text(value.get("content"))
    if isinstance(value, (list, tuple)):
        messages = [m for m in value if isinstance(m, dict)]
        if not messages:
            return "".join(str(v) for v in value if isinstance(v, str))
        if role is None:
            return "\n".join(_content_text(m.get("content")) for m in messages)
        for message in reversed(messages):
            if message.get("role") == role:
                return _content_text(message.get("content"))
        return _content_text(messages[-1].get("content"))
    return str(value)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return str(content)


# The reserved metric that carries a call's wall time when a run records timing (see
# ``rewardsmith.engine.timing``); the store keeps it in a column of its own.
TIME_METRIC = "@seconds"

_escape = encode_basestring  # JSON string escaping, non-ASCII kept (as ensure_ascii=False)

# One encoder, built once: json.dumps with options builds a new one on every call.
_STABLE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def stable_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal values give equal strings (for hashing)."""
    return _STABLE.encode(value)


def key_of_content(content_json: str) -> str:
    """A rollout's content key from its ``content_json`` (the same digest as
    ``content_hash(prompt, completion, answer, metadata, truncated, length=32)``)."""
    return hashlib.blake2b(content_json.encode("utf-8", "surrogatepass"),
                           digest_size=16).hexdigest()


def content_hash(*parts: Any, length: int = 16) -> str:
    """A short hex digest of values, stable across processes and runs."""
    digest = hashlib.blake2b(_STABLE.encode(parts).encode("utf-8", "surrogatepass"),
                             digest_size=max(8, length // 2 + length % 2))
    return digest.hexdigest()[:length]


def content_json_of(prompt: Any, completion: Any, answer: Any, metadata: Any,
                    truncated: Any) -> str:
    """``Rollout.content_json`` from the fields themselves."""
    if (type(prompt) is str and type(completion) is str and type(answer) is str
            and not metadata and type(truncated) is bool):
        # The common case, spelled out: the same text the encoder makes (it escapes strings
        # with this very function), in a third less time.
        return (f"[{_escape(prompt)},{_escape(completion)},{_escape(answer)},{{}},"
                f"{'true' if truncated else 'false'}]")
    return stable_json([prompt, completion, answer, metadata, truncated])


@dataclass(slots=True, init=False)
class Rollout:
    """One completion of one prompt, with what is needed to grade it.

    ``group`` is the prompt group GRPO normalizes over. ``prompt`` and ``completion`` are text or
    chat messages; ``text`` is what a reward grades (the last assistant message).

    ``answer``, ``metadata`` and chat messages are made read-only here (``frozen.freeze``: still
    a ``dict`` or ``list``, but nothing can change them), and a reward that asks for the whole
    rollout gets a ``RolloutView`` whose attributes cannot be set: no reward can change what
    another reward, or a later rescore, sees.
    """

    id: str
    group: str
    prompt: TextOrMessages = ""
    completion: TextOrMessages = ""
    answer: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    truncated: bool = False

    def __init__(self, id: str, group: str, prompt: TextOrMessages = "",
                 completion: TextOrMessages = "", answer: Any = None,
                 metadata: dict[str, Any] = EMPTY, truncated: bool = False) -> None:
        # Written out (no __post_init__, no call for plain text) to keep building a rollout
        # as cheap as before: the common fields are strings and an empty metadata.
        self.id = id
        self.group = group
        self.prompt = prompt if type(prompt) is str else freeze(prompt)
        self.completion = completion if type(completion) is str else freeze(completion)
        self.answer = answer if type(answer) is str or answer is None else freeze(answer)
        self.metadata = metadata if type(metadata) is FrozenDict else freeze(metadata)
        self.truncated = truncated

    def view(self) -> RolloutView:
        """This rollout as a reward gets it: the same fields, none of which can be set."""
        view = object.__new__(RolloutView)
        for name in _FIELDS:
            _SET[name](view, getattr(self, name))
        return view

    @property
    def text(self) -> str:
        """The completion's text: the string, or the last assistant message's content."""
        completion = self.completion
        return completion if type(completion) is str else message_text(completion)

    @property
    def response(self) -> str:
        """The completion's text, by the name slime/Miles samples use."""
        return self.text

    @property
    def label(self) -> Any:
        """The reference answer, by the name slime/Miles samples use."""
        return self.answer

    @property
    def prompt_text(self) -> str:
        """The prompt's text: the string, or the last user message's content."""
        return message_text(self.prompt, role="user")

    def content_json(self) -> str:
        """Everything a reward can see (not ``id``), as stable JSON: what the store keeps."""
        return content_json_of(self.prompt, self.completion, self.answer, self.metadata,
                               self.truncated)

    def content_key(self) -> str:
        """A hash of everything a reward can see (not ``id``): equal content, equal key."""
        return key_of_content(self.content_json())

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "group": self.group,
            "prompt": self.prompt,
            "completion": self.completion,
            "answer": self.answer,
            "metadata": self.metadata,
            "truncated": self.truncated,
        }


class RolloutView(Rollout):
    """A ``Rollout`` whose attributes cannot be set or deleted: what a reward that asks for
    ``rollout`` (or ``rollouts``) gets. Its containers are the rollout's read-only ones."""

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> Rollout:  # type: ignore[misc]
        # Building one by hand (``dataclasses.replace(view, ...)``) makes a plain Rollout: only
        # ``Rollout.view`` makes views.
        return Rollout(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Rollout, tuple(getattr(self, name) for name in _FIELDS))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot set {name!r}: a rollout given to a reward is read-only "
                             f"(make a new one with dataclasses.replace(rollout, ...))")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete {name!r}: a rollout given to a reward is read-only")


_FIELDS = ("id", "group", "prompt", "completion", "answer", "metadata", "truncated")
# The slots' own setters: a view is filled without going through its refusing __setattr__.
_SET = {name: getattr(Rollout, name).__set__ for name in _FIELDS}


@dataclass(slots=True)
class ComponentResult:
    """One component's verdict on one rollout. ``value`` is None unless status is ok."""

    value: float | None
    status: Status = Status.OK
    error: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)

    @classmethod
    def failed(cls, status: Status, error: str) -> ComponentResult:
        return cls(None, status, error)


@dataclass(slots=True)
class Score:
    """A rollout's result: the total ``reward`` (None when masked) and every component.

    ``status`` is ``ok``, ``error`` (a component raised or returned garbage), ``timeout`` (a
    component ran past its limit) or ``masked`` (a component abstained, or the rubric masks
    failures). ``errors`` maps component name to message; ``metrics`` holds extra numbers that
    rewards returned alongside their value.
    """

    id: str
    group: str
    reward: float | None
    status: Status = Status.OK
    components: dict[str, float | None] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    advantage: float | None = None
    # Seconds each component's call took, when the run recorded timing (``score --timing``).
    timing: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "group": self.group,
            "reward": _finite_or_none(self.reward),
            "status": self.status.value,
            "components": {k: _finite_or_none(v) for k, v in self.components.items()},
            "errors": dict(self.errors),
            "advantage": _finite_or_none(self.advantage),
        }
        if self.metrics:
            out["metrics"] = {k: _finite_or_none(v) for k, v in self.metrics.items()}
        if self.timing:
            out["timing"] = {k: _finite_or_none(v) for k, v in self.timing.items()}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Score:
        return cls(
            id=str(data["id"]),
            group=str(data.get("group", "")),
            reward=None if data.get("reward") is None else float(data["reward"]),
            status=Status(data.get("status", "ok")),
            components={
                str(k): None if v is None else float(v)
                for k, v in (data.get("components") or {}).items()
            },
            errors={str(k): str(v) for k, v in (data.get("errors") or {}).items()},
            metrics={
                str(k): float(v)
                for k, v in (data.get("metrics") or {}).items()
                if isinstance(v, (int, float))
            },
            advantage=None if data.get("advantage") is None else float(data["advantage"]),
            timing={str(k): float(v) for k, v in data["timing"].items()
                    if isinstance(v, (int, float))}
            if isinstance(data.get("timing"), dict) else None,
        )


def _finite_or_none(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return value
