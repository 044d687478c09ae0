"""Edge cases users rarely write, each with a defined expected outcome.

Besides the rules every check has (no crash, no hang, a finite value in range, the same value
on a second call), each edge case adds one rule:

=================================  ======================================================
edge case                          expected outcome
=================================  ======================================================
empty completion                   no full credit
whitespace only                    no full credit
truncated mid-answer               no full credit (sent with ``truncated=True``)
the marker with nothing after it   no full credit
a 1 MB completion                  answered in time (the correct answer is at its end)
unicode: RTL, emoji, combining     any value (the correct answer is embedded)
NUL and control characters         any value
chat messages (two forms)          the same value as the same text given as a string
label None / empty string          an ``error`` status (the dataset's fault), or a value
                                   that is not full credit
label a number or list / object    an ``error`` status, or any value
=================================  ======================================================

An ``error`` on a label edge case is accepted only when the same completion with a good
label scores without one; otherwise it is a crash like any other.

"No full credit" means below the reward a correct answer of the same kind gets; it is not
checked for rewards that grade no answers (a length penalty) or whose kind is unknown.
"""

from __future__ import annotations

from typing import Any

from .checks import Check, make_rollout
from .kinds import CHOICE, NUMBER, TEXT, Kind, filler

__all__ = ["edge_checks", "MEGABYTE"]

MEGABYTE = 1 << 20

_RTL = "\u202e\u05d4\u05ea\u05e9\u05d5\u05d1\u05d4 \u0627\u0644\u062c\u0648\u0627\u0628\u202c\u200f"
_EMOJI = "\U0001f914\U0001f4ad \U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467"
_COMBINING = "Z\u0334\u0321\u031ba\u0337l\u0338g\u0335o\u0336 e\u0301 a\u0300\u0316\u0317"
_CONTROL = "\x00\x1b[31m\x7f\x08\u200b"


def _one_megabyte_of_work() -> str:
    line = filler(9 * 38) + "\n"
    return (line * (MEGABYTE // len(line) + 1))[:MEGABYTE]


def _non_string_label(kind: Kind) -> Any:
    if kind.answers is NUMBER or not kind.uses_label:
        return int(NUMBER.label)
    if kind.answers is CHOICE:
        return CHOICE.candidates.index(CHOICE.label)  # a 0-based option index
    if kind.answers is TEXT:
        return [TEXT.label]
    return [kind.label]


def edge_checks(kind: Kind, *, judged: bool) -> list[Check]:
    """The edge cases for ``kind`` (the first kind the reward grades, or a number by default).

    ``judged`` is False when the reward's kind is unknown: credit rules are then not applied.
    """
    credit = judged and kind.grades_answers
    label_credit = credit and kind.uses_label
    prompt = kind.question

    def edge(name: str, completion: Any, *, answer: Any = kind.label, truncated: bool = False,
             no_full_credit: bool = False, label_edge: bool = False,
             same_as: str | None = None, rule: str = "") -> Check:
        rollout = make_rollout(completion, answer, prompt=prompt, truncated=truncated,
                               state=kind.state)
        return Check("edge", name, rollout, key=f"edge:{name}", no_full_credit=no_full_credit,
                     allow_error=label_edge, blame=twin if label_edge else None,
                     same_as=same_as, rule=rule)

    no_credit = "no full credit" if credit else "no crash"
    twin = "edge:the chat answer as a plain string"
    messages = [{"role": "system", "content": "You are a careful assistant."},
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": kind.correct}]
    parts = [{"role": "user", "content": [{"type": "text", "text": prompt}]},
             {"role": "assistant", "content": [{"type": "text", "text": kind.correct}]}]
    label_rule = "an error naming the label, or a value" + (
        " below full credit" if label_credit else "")
    return [
        edge("empty completion", "", no_full_credit=credit, rule=no_credit),
        edge("whitespace only", " \n\t \r\n  ", no_full_credit=credit, rule=no_credit),
        edge("truncated mid-answer", kind.truncated, truncated=True, no_full_credit=credit,
             rule=no_credit),
        edge("the marker with nothing after it", kind.bare_marker, no_full_credit=credit,
             rule=no_credit),
        edge("a 1 MB completion", _one_megabyte_of_work() + "\n" + kind.correct,
             rule="answered within the timeout"),
        edge("unicode: right-to-left text", f"{_RTL} {kind.correct} {_RTL}", rule="any value"),
        edge("unicode: emoji", f"{_EMOJI} {kind.correct} {_EMOJI}", rule="any value"),
        edge("unicode: combining marks", f"{_COMBINING} {kind.correct}", rule="any value"),
        edge("NUL and control characters", f"{_CONTROL}{kind.correct}{_CONTROL}",
             rule="any value"),
        edge("the chat answer as a plain string", kind.correct, rule="any value"),
        edge("chat messages", messages, same_as=twin,
             rule="the same value as the plain string"),
        edge("chat messages with content parts", parts, same_as=twin,
             rule="the same value as the plain string"),
        edge("label is None", kind.correct, answer=None, label_edge=True,
             no_full_credit=label_credit, rule=label_rule),
        edge("label is an empty string", kind.correct, answer="", label_edge=True,
             no_full_credit=label_credit, rule=label_rule),
        edge("label is not a string", kind.correct, answer=_non_string_label(kind),
             label_edge=True, rule="an error, or any value"),
        edge("label is an object", kind.correct, answer={"answer": kind.label},
             label_edge=True, rule="an error, or any value"),
    ]
