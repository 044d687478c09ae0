"""A kind of reward (``Kind``) and the answers its cases use: what every module of kinds builds
on. Apart from ``kinds``, which finds a kind by name, so that a module of kinds never imports the
module that finds it (no import cycle)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_PAD_LIMIT = 4096  # characters, when the reward names no max_length


@dataclass(frozen=True)
class Answers:
    """An answer type: the question, the reference, a near miss, and candidates to list."""

    question: str
    label: str
    miss: str  # the wrong answer of the calibration pair
    around: tuple[str, str]  # two wrong values listed before and after the reference
    candidates: tuple[str, ...]  # every candidate, the reference neither first nor last
    work: Callable[[str], str]  # a line of work that ends in the given value
    letters: bool = False  # multiple choice: shown as (B) outside a box


NUMBER = Answers(
    question="Tom has 40 apples and buys 2 more. How many apples does he have now?",
    label="42",
    miss="41",
    around=("40", "44"),
    candidates=("40", "41", "42", "43", "44"),
    work=lambda v: f"Tom had 40 apples and bought 2 more: 40 + 2 = {v}.",
)


TEXT = Answers(
    question="What is the capital of France?",
    label="Paris",
    miss="London",
    around=("London", "Rome"),
    candidates=("London", "Paris", "Rome", "Berlin", "Madrid"),
    work=lambda v: f"The capital of France is {v}.",
)


CHOICE = Answers(
    question="Which number is the largest?\n(A) 1\n(B) 9\n(C) 3\n(D) 4",
    label="B",
    miss="A",
    around=("A", "C"),
    candidates=("A", "B", "C", "D"),
    work=lambda v: "I compared the four numbers one by one.",
    letters=True,
)


@dataclass(frozen=True)
class Kind:
    """A kind of reward and the completions that show how it should behave."""

    name: str
    description: str
    question: str
    label: Any
    correct: str  # full credit
    wrong: str  # must score below ``correct``
    truncated: str  # the correct completion cut mid-answer (sent with truncated=True)
    bare_marker: str  # the answer's marker with nothing after it
    unmarked: str | None = None  # the answer without its marker or box (detection only)
    wrong_truncated: bool = False  # the wrong completion is ``correct`` cut at the length limit
    uses_label: bool = True  # grades the answer against the label
    grades_answers: bool = True  # an answer-free completion must not get full credit
    calibrated: bool = True  # has a correct/wrong pair (a user's pattern has none)
    answers: Answers | None = None
    slot: str = "format"  # plain | marker | boxed | format
    pad_limit: int = DEFAULT_PAD_LIMIT
    pad_unit: str = "chars"
    marker: str = "####"
    marker_max: int = 1
    tag: str = "think"
    language: str = ""  # code kinds: the program's language
    # Workspace kinds: the metadata (the workspace) a completion's text stands for.
    state: Callable[[str], dict[str, Any]] | None = None

    def shown(self, value: str) -> str:
        """A value as it is written in this kind's slot ((B) for a letter outside a box)."""
        if self.answers is not None and self.answers.letters and self.slot != "boxed":
            return f"({value})"
        return value

    def render(self, answer: str, work: str) -> str:
        """A completion with ``work`` and then ``answer`` in this kind's slot."""
        if self.slot == "marker":
            return f"{work}\n#### {answer}"
        if self.slot == "boxed":
            return f"{work}\nSo the answer is \\boxed{{{answer}}}."
        if self.answers is TEXT:
            return answer  # a short text answer is the whole completion
        return f"{work}\nThe answer is {answer}."

    def listing(self, values: tuple[str, ...]) -> str:
        """Several values written as one answer: '40, 41, 42, 43 or 44'."""
        shown = [self.shown(v) for v in values]
        return ", ".join(shown[:-1]) + " or " + shown[-1]
