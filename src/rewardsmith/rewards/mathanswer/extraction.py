"""Finding the final answer in a completion, and the answer in a reference label.

Order: the boxes (``\\boxed{}`` / ``\\fbox{}``) of the last paragraph that has any, then
"final answer is ...", "Answer: ...", "#### ...", and else the last math expression in the
text. Every step is linear in the text's length.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from ..extract import after_last_marker, all_boxed, last_boxed

__all__ = ["Extraction", "extract_answer", "reference_text"]


@dataclass(frozen=True)
class Extraction:
    """The final answer(s) found and where. Several answers: different boxes at the end."""

    answers: tuple[str, ...]
    source: str  # boxed | final answer | answer | #### | last expression | whole text


_FINAL = re.compile(r"final\s+answer\s*(?:is|:|=)?\s*:?", re.IGNORECASE)
_ANSWER = re.compile(r"\banswer\s*(?:is|:|=)\s*:?", re.IGNORECASE)
_MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
_PLAIN = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:\s*/\s*-?\d+(?:\.\d+)?)?\s*%?")
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\s+(?:I hope|which|so|because|since)\b")
_SHORT = 100
_WHOLE_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{(.*)\}", re.DOTALL)
_TEXT_GROUP = re.compile(r"\\(?:text|mbox|mathrm|textbf|begin|end)\s*\{[^{}]*\}")
_WORD = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]{3,}")
_MATH_WORDS = {"sqrt", "sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan",
               "sinh", "cosh", "tanh", "log", "exp", "inf", "infty", "infinity", "and"}


def _boxes(text: str) -> tuple[str, ...]:
    """The distinct boxes of the last paragraph that has a complete box."""
    if "\\boxed" not in text and "\\fbox" not in text:
        return ()
    paragraphs = text.split("\n\n")
    for paragraph in reversed(paragraphs):
        found = all_boxed(paragraph)
        if found:
            return tuple(dict.fromkeys(_unbox(b) for b in found if b.strip()))
    box = last_boxed(text)  # a box spanning a blank line
    return (_unbox(box),) if box and box.strip() else ()


def _unbox(box: str) -> str:
    """``\\boxed{\\boxed{9}}`` is 9."""
    for _ in range(8):
        whole = _WHOLE_BOX.fullmatch(box.strip())
        if whole is None or last_boxed(box) != whole.group(1).strip():
            break  # not one box around everything, as in \\boxed{1}+\\boxed{2}
        box = whole.group(1).strip()
    return box


def _tail(text: str) -> str | None:
    """The answer right after a marker: a math segment, else the rest of the sentence."""
    text = text.lstrip(" \t*:")
    if text.startswith("\n"):
        text = text.strip()
    line = text.split("\n", 1)[0].strip()
    segment = _MATH.search(line)
    if segment and segment.start() < 4:
        return next(g for g in segment.groups() if g is not None).strip()
    line = _SENTENCE_END.split(line, maxsplit=1)[0]
    line = line.strip().strip("*").strip()
    return line or None


def _last(matches: Iterator[re.Match[str]]) -> re.Match[str] | None:
    found = None
    for found in matches:  # noqa: B007 - only the last one is wanted
        pass
    return found


def _is_prose(text: str) -> bool:
    """Words that are not math (``\\text{}`` units aside) next to digits: a sentence."""
    words = _WORD.findall(_TEXT_GROUP.sub(" ", text))
    return any(w.lower() not in _MATH_WORDS for w in words) and any(c.isdigit() for c in text)


def _last_expression(text: str) -> tuple[str, str] | None:
    stripped = text.strip()
    if len(stripped) <= _SHORT and "\n" not in stripped and "$" not in stripped and not (
            _is_prose(stripped)):
        return stripped, "whole text"
    best: tuple[int, str] | None = None
    for match in _MATH.finditer(text):
        best = (match.end(), next(g for g in match.groups() if g is not None))
    last_plain = _last(_PLAIN.finditer(text))
    if last_plain is not None and (best is None or last_plain.start() >= best[0]):
        best = (last_plain.end(), last_plain.group(0))
    return (best[1].strip(), "last expression") if best else None


def extract_answer(completion: str, *, boxed_only: bool = False) -> Extraction | None:
    """The final answer(s) of ``completion``, or None when there is none."""
    if not isinstance(completion, str) or not completion.strip():
        return None
    boxes = _boxes(completion)
    if boxes:
        return Extraction(boxes, "boxed")
    if boxed_only:
        return None
    for pattern, source in ((_FINAL, "final answer"), (_ANSWER, "answer")):
        found = _last(pattern.finditer(completion))
        if found is not None:
            answer = _tail(completion[found.end() :])
            if answer:
                return Extraction((answer,), source)
    tail = after_last_marker(completion, "####")
    if tail is not None:
        answer = _tail(tail)
        return Extraction((answer,), "####") if answer else None
    last = _last_expression(completion)
    return Extraction((last[0],), last[1]) if last and last[0] else None


def reference_text(reference: str) -> str:
    """The answer in a reference label: its last box, the text after ``####``, or all of it."""
    box = last_boxed(reference)
    if box is not None:
        return box
    tail = after_last_marker(reference, "####")
    return tail if tail is not None else reference.strip()
