"""Rewards for the tests of ``rewardsmith test``: one sound reward, and plausible rewards that
each hide one flaw the harness must catch and name. Loaded by path, as a user's file would be."""

from __future__ import annotations

import asyncio
import math
import random
import re
from typing import Any

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _numbers(text: str) -> list[str]:
    return _NUMBER.findall(text.replace(",", ""))


def _label(answer: Any) -> str:
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        raise ValueError(f"the reference answer is missing ({answer!r})")
    found = _numbers(str(answer))
    if not found:
        raise ValueError(f"the reference answer {answer!r} holds no number")
    return found[-1]


def last_number(completion: str, answer: Any) -> float:
    """Sound: the last number in the completion equals the label's (the Miles example)."""
    label = _label(answer)
    found = _numbers(completion)
    return 1.0 if found and float(found[-1]) == float(label) else 0.0


async def async_last_number(completion: str, answer: Any) -> float:
    """Sound, and async: as ``last_number``."""
    await asyncio.sleep(0)
    return last_number(completion, answer)


def crashes_on_empty(completion: str, answer: Any) -> float:
    """Takes the last number without checking there is one: IndexError on an empty answer."""
    return 1.0 if _numbers(completion)[-1] == _label(answer) else 0.0


def loops_forever(completion: str, answer: Any) -> float:
    """Waits for text to arrive (code written for a stream): an empty answer never arrives."""
    text = completion.strip()
    while not text:
        text = completion.strip()
    return last_number(text, answer)


def returns_nan(completion: str, answer: Any) -> float:
    """Means 'no score' by NaN when the text has no number."""
    found = _numbers(completion)
    return float(found[-1] == _label(answer)) if found else math.nan


def non_deterministic(completion: str, answer: Any) -> float:
    """Adds a little noise to break ties between equal rewards."""
    return last_number(completion, answer) + random.uniform(-0.01, 0.01)


def credits_every_candidate(completion: str, answer: Any) -> float:
    """Credits the answer when it is any of the numbers in the text."""
    return 1.0 if _label(answer) in _numbers(completion) else 0.0


_shared: dict[str, str] = {}


async def racy_async(completion: str, answer: Any) -> float:
    """Keeps the text in module state across an await: concurrent calls read each other's."""
    _shared["text"] = completion
    await asyncio.sleep(0.005)
    return last_number(_shared["text"], answer)


def out_of_range(completion: str, answer: Any) -> float:
    """Scales a 0/1 verdict by 10 by mistake."""
    return 10.0 * last_number(completion, answer)


def never_returns(completion: str) -> float:
    """Spins on every input (a loop whose exit condition was lost in an edit)."""
    spins = 0
    while completion is not None:
        spins += 1
    return float(spins)


def returns_text(completion: str, answer: Any) -> Any:
    """Returns the extracted answer instead of a score."""
    found = _numbers(completion)
    return found[-1] if found else ""
