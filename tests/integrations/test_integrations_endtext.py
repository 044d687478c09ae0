"""End-of-turn texts: which are cut, from where, and how the setting is read."""

from __future__ import annotations

import pytest

from rewardsmith import ConfigError
from rewardsmith.integrations.endtext import (
    DEFAULT_END_TEXTS,
    ENV_END_TEXTS,
    EndTexts,
    resolve_end_texts,
    strip_end_text,
)


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_END_TEXTS, raising=False)


@pytest.mark.parametrize("end", [
    "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|eot|>",
    "</s>", "<end_of_turn>", "<eos>", "<|end|>", "<|return|>", "<｜end▁of▁sentence｜>",
    "<|EOT|>", "<|user|>", "<|observation|>", "<|END_OF_TURN_TOKEN|>",
])
def test_each_default_is_cut_from_the_end(end: str) -> None:
    assert end in DEFAULT_END_TEXTS
    assert strip_end_text("#### 7" + end) == "#### 7"


@pytest.mark.parametrize(("text", "want"), [
    ("7<|im_end|>", "7"),
    ("7<|im_end|>\n<|endoftext|>", "7"),           # the turn end, then the sequence end
    ("7<|endoftext|><|endoftext|><|endoftext|>", "7"),  # padding decoded as text
    ("7 <|eot_id|>\n", "7 "),                       # what precedes the end text is kept
    ("7\n", "7\n"),                                 # no end text: untouched, spaces and all
    ("a </s> b", "a </s> b"),                       # only the end is touched
    ("<s>strike</s> this", "<s>strike</s> this"),
    ("<|im_end|>", ""),
    ("", ""),
    ("7<|end_of_text|>", "7"),
    ("say <|end|", "say <|end|"),                   # a partial end text is text
])
def test_strip(text: str, want: str) -> None:
    assert strip_end_text(text) == want


def test_longest_first() -> None:
    texts = EndTexts(["<|end|>", "<|end|>x", "d|>"])
    assert texts.texts[0] == "<|end|>x"
    assert texts.cut("a<|end|>") == "a"
    assert texts.cut("a<|end|>x") == "a"


def test_chat_messages_lose_the_end_text_of_their_last_message() -> None:
    texts = resolve_end_texts()
    messages = [{"role": "assistant", "content": "hi<|im_end|>"},
                {"role": "assistant", "content": "#### 7<|im_end|>", "name": "m"}]
    out = texts.cut_completion(messages)
    assert out == [{"role": "assistant", "content": "hi<|im_end|>"},
                   {"role": "assistant", "content": "#### 7", "name": "m"}]
    assert messages[1]["content"] == "#### 7<|im_end|>"  # the caller's list is not changed
    parts = [{"role": "assistant", "content": [{"type": "text", "text": "x"}]}]
    assert texts.cut_completion(parts) is parts
    assert texts.cut_completion(None) is None


def test_explicit_setting_wins_and_empty_strips_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_END_TEXTS, '["<END>"]')
    assert strip_end_text("7<END>") == "7"
    assert strip_end_text("7<|im_end|>") == "7<|im_end|>"   # the env list replaced the defaults
    assert strip_end_text("7<|im_end|>", ["<|im_end|>"]) == "7"
    assert strip_end_text("7<END>", []) == "7<END>"
    assert not resolve_end_texts([])


def test_env_plus_adds_to_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_END_TEXTS, '+ ["<END>"]')
    assert strip_end_text("7<END><|im_end|>") == "7"
    monkeypatch.setenv(ENV_END_TEXTS, "[]")
    assert strip_end_text("7<|im_end|>") == "7<|im_end|>"


@pytest.mark.parametrize(("raw", "says"), [
    ("<|im_end|>", "expected a JSON list"),
    ('{"a": 1}', "not dict"),
    ('["ok", 3]', "end text 1 must be a string, not int"),
    ("+", "expected a JSON list"),
])
def test_bad_env_is_named(monkeypatch: pytest.MonkeyPatch, raw: str, says: str) -> None:
    monkeypatch.setenv(ENV_END_TEXTS, raw)
    with pytest.raises(ConfigError, match=ENV_END_TEXTS) as info:
        resolve_end_texts()
    assert says in str(info.value)


def test_one_string_is_refused() -> None:
    with pytest.raises(ConfigError, match="list of strings, not one string"):
        resolve_end_texts("<|im_end|>")


def test_blank_and_repeated_texts_are_dropped() -> None:
    assert EndTexts(["", "  ", "<e>", "<e>"]).texts == ("<e>",)
