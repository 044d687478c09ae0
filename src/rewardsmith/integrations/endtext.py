"""End-of-turn texts: the special-token text some trainers leave at the end of a completion.

TRL and verl decode completions with ``skip_special_tokens=True``; OpenRLHF decodes the query with
special tokens kept, and slime keeps the stop text in ``sample.response``. So the same answer
reaches a reward as ``"7"`` from one trainer and ``"7<|im_end|>"`` from another. Every trainer
adapter and server route removes these texts from the end of a completion before grading, so a
rubric gives the same reward in every trainer.

Only the end is touched: a run of end texts (with whitespace between or after them) is cut off,
and what comes before the first of them is kept as it was. ``</s>`` inside a completion (an HTML
strikethrough, say) is left alone.

The texts are :data:`DEFAULT_END_TEXTS` (the end-of-sequence and end-of-turn tokens of the common
chat templates, as their tokenizer configs name them), or the setting:

* an adapter's ``end_texts=`` argument (a list of strings; ``[]`` strips nothing), else
* the environment variable ``REWARDSMITH_END_TEXTS``: a JSON list of strings that replaces the
  defaults (``[]`` strips nothing), or ``+`` followed by a JSON list to add to them
  (``+["<|my_end|>"]``).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from rewardsmith.errors import ConfigError

__all__ = ["DEFAULT_END_TEXTS", "ENV_END_TEXTS", "EndTexts", "resolve_end_texts", "strip_end_text"]

ENV_END_TEXTS = "REWARDSMITH_END_TEXTS"

# End-of-sequence / end-of-turn token texts, by the chat templates that emit them. Each is the
# eos_token, or one of the generation_config eos_token_id entries, of that family's tokenizer.
DEFAULT_END_TEXTS: tuple[str, ...] = (
    "<|im_end|>",             # ChatML: Qwen 1.5-3, Phi-4, Yi, many fine-tunes
    "<|endoftext|>",          # Qwen base/pad, GPT-2/NeoX, Phi-3 eos, GLM-4 eos, OLMo
    "<|eot_id|>",             # Llama 3.x end of turn
    "<|eom_id|>",             # Llama 3.1+ end of message (tool call)
    "<|end_of_text|>",        # Llama 3.x, Granite eos
    "<|eot|>",                # Llama 4 end of turn
    "</s>",                   # Llama 2, Mistral, Mixtral, Zephyr
    "<end_of_turn>",          # Gemma 1-3
    "<eos>",                  # Gemma eos
    "<|end|>",                # Phi-3 / Phi-3.5 end of turn; gpt-oss end of message
    "<|return|>",             # gpt-oss (harmony) end of final answer
    "<｜end▁of▁sentence｜>",  # DeepSeek V2/V3/R1 and R1 distills (full-width bars)
    "<|end▁of▁sentence|>",    # the same with ASCII bars, as some re-uploads spell it
    "<|EOT|>",                # DeepSeek Coder instruct
    "<|user|>",               # GLM-4 stops when it starts the next user turn
    "<|observation|>",        # GLM-4 stops before a tool result
    "<|END_OF_TURN_TOKEN|>",  # Cohere Command R
)


class EndTexts:
    """A set of end texts, longest first so ``<|end|>`` never cuts into ``<|end_of_text|>``."""

    __slots__ = ("texts",)

    def __init__(self, texts: Iterable[str]):
        unique = []
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise ConfigError(f"end text {index} must be a string, not {type(text).__name__}")
            if text.strip() and text not in unique:
                unique.append(text)
        self.texts: tuple[str, ...] = tuple(sorted(unique, key=len, reverse=True))

    def __repr__(self) -> str:
        return f"EndTexts({list(self.texts)!r})"

    def __bool__(self) -> bool:
        return bool(self.texts)

    def cut(self, text: str) -> str:
        """``text`` without the end texts (and the whitespace around them) at its end."""
        if not self.texts:
            return text
        end = len(text)
        while True:
            trimmed = text[:end].rstrip()
            for candidate in self.texts:
                if trimmed.endswith(candidate):
                    end = len(trimmed) - len(candidate)
                    break
            else:
                return text[:end]

    def cut_completion(self, completion: Any) -> Any:
        """A completion (text, or chat messages) with the end texts cut from its last text."""
        if isinstance(completion, str):
            return self.cut(completion)
        if isinstance(completion, list) and completion and isinstance(completion[-1], Mapping):
            last = completion[-1]
            content = last.get("content")
            if isinstance(content, str):
                stripped = self.cut(content)
                if stripped != content:
                    return [*completion[:-1], {**last, "content": stripped}]
        return completion


def _from_env() -> EndTexts:
    return _parse_env(os.environ.get(ENV_END_TEXTS, "").strip())


@functools.lru_cache(maxsize=8)
def _parse_env(raw: str) -> EndTexts:
    # Cached: adapters read the setting on every call, and it rarely changes.
    if not raw:
        return EndTexts(DEFAULT_END_TEXTS)
    add = raw.startswith("+")
    body = raw[1:].strip() if add else raw
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{ENV_END_TEXTS}={raw!r}: expected a JSON list of strings, or '+' "
                          f"and a JSON list to add to the defaults ({exc.msg})") from None
    if not isinstance(value, list):
        raise ConfigError(f"{ENV_END_TEXTS}={raw!r}: expected a JSON list of strings, not "
                          f"{type(value).__name__}")
    try:
        return EndTexts([*DEFAULT_END_TEXTS, *value] if add else value)
    except ConfigError as exc:
        raise ConfigError(f"{ENV_END_TEXTS}={raw!r}: {exc}") from None


def resolve_end_texts(explicit: Iterable[str] | EndTexts | None = None) -> EndTexts:
    """The end texts to strip: ``explicit`` when given, else the environment, else the defaults.

    A single string is refused (it would be read as a list of characters).
    """
    if isinstance(explicit, EndTexts):
        return explicit
    if explicit is None:
        return _from_env()
    if isinstance(explicit, (str, bytes)):
        raise ConfigError(f"end_texts must be a list of strings, not one string: {explicit!r}")
    return EndTexts(explicit)


def strip_end_text(text: str, texts: Iterable[str] | EndTexts | None = None) -> str:
    """``text`` without trailing end-of-turn texts (see the module docstring)."""
    return resolve_end_texts(texts).cut(text)
