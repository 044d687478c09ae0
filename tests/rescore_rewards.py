"""Rewards for the store and rescoring tests. Every call appends one line to the file named by
the ``log`` param, so a test counts the calls really made (in any process). Loaded by path, as a
user's file would be."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rewardsmith import group_reward


def _log(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line.replace("\n", " ") + "\n")


def counted_marker(completion: str, log: str, marker: str = "####", delay: float = 0.0) -> float:
    """1.0 when ``marker`` is in the completion."""
    _log(log, f"marker {completion}")
    if delay:
        time.sleep(delay)
    return 1.0 if marker in completion else 0.0


def counted_length(completion: str, log: str, limit: int = 40) -> float:
    """-1.0 for a completion longer than ``limit`` characters, else 0.0."""
    _log(log, f"length {completion}")
    return -1.0 if len(completion) > limit else 0.0


def counted_answer(completion: str, answer: str, log: str) -> float | None:
    """1.0 when the answer is in the completion; abstains (None) on an empty completion."""
    _log(log, f"answer {completion}")
    if not completion:
        return None
    return 1.0 if str(answer) in completion else 0.0


def counted_crash(completion: str, log: str) -> float:
    """Raises on completions containing 'boom' (a failure is retried on the next run)."""
    _log(log, f"crash {completion}")
    if "boom" in completion:
        raise ValueError("boom in the completion")
    return 0.5


@group_reward
def counted_shortest(completions: Sequence[str], log: str) -> list[float]:
    """1.0 for the shortest completion(s) of the group, 0.0 for the others."""
    _log(log, f"group {len(completions)}")
    shortest = min(len(c) for c in completions)
    return [1.0 if len(c) == shortest else 0.0 for c in completions]
