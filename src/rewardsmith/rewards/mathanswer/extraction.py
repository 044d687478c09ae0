"""Finding the final answer in a completion, and the answer in a reference label.

Order: the boxes (``\\boxed{}`` / ``\\fbox{}``) of the last paragraph that has any, then
"final answer is ...", "Answer: ..." (and its words in other languages, see ``cues``), "####
...", a conclusion ("所以 ...", "donc ...") in the last sentence with a number, and else the
last math expression in the text. Every step is linear in the text's length.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from ..extract import after_last_marker, all_boxed, last_boxed
from .cues import (
    ANSWER_CUE,
    CONCLUSION_CUE,
    LEADING_MARKS,
    SCRIPT_LETTER,
    SENTENCE_END,
    offers_alternatives,
    stated_first,
)
from .latex import undouble

__all__ = ["Extraction", "extract_answer", "reference_text"]


@dataclass(frozen=True)
class Extraction:
    """The final answer(s) found and where. Several answers: different boxes at the end."""

    answers: tuple[str, ...]
    source: str  # boxed | final answer | answer | #### | conclusion | last expression | whole text


_FINAL = re.compile(r"final\s+answer\s*(?:is|:|=)?\s*:?", re.IGNORECASE)
# Inline math ($...$, \\(...\\)) stays on one line; an escaped \\$ inside it is a dollar sign.
_MATH = re.compile(
    r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|(?<!\\)\$((?:[^$\n\\]|\\[^\n])+?)\$"
    r"|\\\(([^\n]+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
# A number standing alone: not the tail of a word such as AZYUK2A.
_PLAIN = re.compile(r"(?<![A-Za-z_\d.])-?\d[\d,]*(?:\.\d+)?(?:\s*/\s*-?\d+(?:\.\d+)?)?\s*%?")
_DOLLAR_SPAN = re.compile(r"(?<!\\)\$[^$]*(?<!\\)\$|\\\(.*?\\\)", re.DOTALL)
_JOINER = re.compile(r"\s*(?:,\s*and|,\s*or|,|and|or)\s*")
_SEPARATOR_IN_GAP = re.compile(r"[,;&]|\b(?:and|or)\b")
_LETTER = re.compile(r"[A-Za-z]")
# LaTeX that is one value even outside $...$: "(\\frac{2}{5}) 吨", "\\sqrt{3} cm".
_LATEX_VALUE = re.compile(
    r"-?\d*\s*\\[dtc]?frac\s*(?:\{[^{}]*\}|\d)\s*(?:\{[^{}]*\}|\d)"
    r"|-?\d*\s*\\sqrt\s*(?:\[[^\]]*\])?\s*(?:\{[^{}]*\}|\d)")
_DIGIT = re.compile(r"\d")
_SHORT = 100
_BOX_START = re.compile(r"\\(?:boxed|fbox)\s*(?=\{)")
_OPEN_BOX = re.compile(r"^\s*\$*\s*\\(?:boxed|fbox)\s*\{")
_WHOLE_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{(.*)\}", re.DOTALL)
_TEXT_GROUP = re.compile(r"\\(?:text|mbox|mathrm|textbf|begin|end)\s*\{[^{}]*\}")
_WORD = re.compile(r"(?<![\\a-zA-Z])(?!(?:or|and)[A-Z])[a-zA-Z]{3,}")
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
    """``\\boxed{\\boxed{9}}`` is 9; a sentence in a box is its last expression."""
    for _ in range(8):
        whole = _WHOLE_BOX.fullmatch(box.strip())
        if whole is None or last_boxed(box) != whole.group(1).strip():
            break  # not one box around everything, as in \\boxed{1}+\\boxed{2}
        box = whole.group(1).strip()
    if _is_prose(box):
        return _in_sentence(box) or box
    return box


def _tail(text: str) -> str | None:
    """The answer right after a marker: a math segment, else the rest of the sentence."""
    text = text.lstrip(LEADING_MARKS)
    if text.startswith("\n"):
        text = text.strip()
    line = text.split("\n", 1)[0].strip()
    segment = _MATH.search(line)
    if segment and segment.start() < 4:
        # "$12$ and $13$": math segments joined by "and", "or" or commas are one list.
        parts = [next(g for g in segment.groups() if g is not None).strip()]
        while (joiner := _JOINER.match(line, segment.end())) and (
                following := _MATH.match(line, joiner.end())):
            parts.append(next(g for g in following.groups() if g is not None).strip())
            segment = following
        return ", ".join(parts)
    line = SENTENCE_END.split(line, maxsplit=1)[0]
    line = line.strip().strip("*").strip()
    if _is_prose(line):
        return _in_sentence(line) or line
    return line or None


def _last(matches: Iterator[re.Match[str]]) -> re.Match[str] | None:
    found = None
    for found in matches:  # noqa: B007 - only the last one is wanted
        pass
    return found


def _is_prose(text: str) -> bool:
    """Words that are not math (``\\text{}`` units aside) next to digits: a sentence. A
    letter of another script (``个``, ``é``, ``ر``) is a word."""
    if not any(c.isdigit() for c in text):
        return False
    outside = _TEXT_GROUP.sub(" ", text)
    words = _WORD.findall(outside)
    return any(w.lower() not in _MATH_WORDS for w in words) or bool(
        SCRIPT_LETTER.search(outside))


def _blank(match: re.Match[str]) -> str:
    return " " * len(match.group(0))


def _values(text: str) -> list[tuple[int, int, str, bool]]:
    """The values a sentence holds, in order: (start, end, text, is a plain number)."""
    found = [(m.start(), m.end(), next(g for g in m.groups() if g is not None).strip(), False)
             for m in _MATH.finditer(text)]
    outside = _DOLLAR_SPAN.sub(_blank, text)
    found += [(m.start(), m.end(), m.group(0).strip(), False)
              for m in _LATEX_VALUE.finditer(outside)]
    outside = _LATEX_VALUE.sub(_blank, outside)
    found += [(m.start(), m.end(), m.group(0).strip(), True) for m in _PLAIN.finditer(outside)]
    return sorted(f for f in found if any(c.isdigit() or c == "\\" for c in f[2]))


def _in_sentence(text: str) -> str | None:
    """The one value a sentence states: "The largest $n$ is 34." gives 34 (a bare name such
    as $n$ or $f(x)$ is not a value). Of several values, the first when it is a quantity stated
    alone ("12 个苹果，比原来多 3 个" gives 12, see ``cues.stated_first``); else None ("3, not 4")."""
    values = _values(text)
    if len(values) == 1:
        return values[0][2]
    # Only a plain number is a quantity with a unit ("12 个"); "$x = 3$ gives" is not one.
    if values and values[0][3] and stated_first(text, [(v[0], v[1]) for v in values]):
        return values[0][2]
    return None


def _conclusion(text: str) -> str | None:
    """The value a conclusion word ("所以", "donc", "therefore") states, when it opens the
    last sentence that holds a number: reasoning says "so" at every step, only the last counts."""
    found = _last(CONCLUSION_CUE.finditer(text))
    if found is None:
        return None
    rest = text[found.end():].lstrip(LEADING_MARKS)
    end = SENTENCE_END.search(rest)
    sentence, after = (rest[:end.start()], rest[end.end():]) if end else (rest, "")
    if _DIGIT.search(after) or "\n\n" in sentence:
        return None
    sentence = sentence.strip().strip("*").strip()
    if offers_alternatives(sentence, [(v[0], v[1]) for v in _values(sentence)]):
        # "所以 3 个或 4 个", "thus 2 and 3": the values together, read as written (a hedge
        # answers no single value), never the last number alone.
        return sentence
    if not _is_prose(sentence):
        return None  # bare math after "so" is what the last expression reads anyway
    return _in_sentence(sentence)


def _last_expression(text: str, *, whole: bool = True) -> tuple[str, str] | None:
    stripped = text.strip()
    if whole and len(stripped) <= _SHORT and "\n" not in stripped and "$" not in stripped and not (
            _is_prose(stripped)):
        return stripped, "whole text"
    best: tuple[int, str] | None = None
    for match in _MATH.finditer(text):
        best = (match.end(), next(g for g in match.groups() if g is not None))
    if best is not None and _is_prose(best[1]):
        # Prose inside $...$ ("$? just about 1$"): the one value it states.
        best = (best[0], _in_sentence(best[1]) or best[1])
    # Numbers inside $...$ that is not math (it spans lines) are not answers.
    outside = _DOLLAR_SPAN.sub(lambda m: " " * len(m.group(0)), text) if (
        "$" in text or "\\(" in text) else text
    last_plain = _last(_PLAIN.finditer(outside))
    if last_plain is not None and (best is None or last_plain.start() >= best[0]):
        best = (last_plain.end(), last_plain.group(0))
    return (best[1].strip(), "last expression") if best else None


def extract_answer(completion: str, *, boxed_only: bool = False) -> Extraction | None:
    """The final answer(s) of ``completion``, or None when there is none."""
    if not isinstance(completion, str) or not completion.strip():
        return None
    boxes = _boxes(completion)
    if boxed_only:
        return Extraction(boxes, "boxed") if boxes else None
    last_box = max(completion.rfind("\\boxed"), completion.rfind("\\fbox")) if boxes else -1
    for pattern, source in ((_FINAL, "final answer"), (ANSWER_CUE, "answer")):
        found = _last(pattern.finditer(completion))
        if found is not None and found.start() > last_box:
            # A stated answer after the last box (or with no box) is the final word.
            answer = _tail(completion[found.end() :])
            if answer:
                return Extraction((answer,), source)
        if boxes:
            break
    if boxes:
        return Extraction(boxes, "boxed")
    tail = after_last_marker(completion, "####")
    if tail is not None:
        answer = _tail(tail)
        return Extraction((answer,), "####") if answer else None
    stated = _conclusion(completion)
    if stated:
        return Extraction((stated,), "conclusion")
    last = _last_expression(completion)
    return Extraction((last[0],), last[1]) if last and last[0] else None


def _boxes_listed(text: str) -> bool:
    """Do the last paragraph's boxes form one list? The text between each two must hold a
    separator (``,`` ``;`` "and" "or") or no words at all: ``\\boxed{1} and \\boxed{2}`` is a
    list, ``\\boxed{1} no no \\boxed{2}`` is not (its last box is the answer)."""
    paragraph = next((p for p in reversed(text.split("\n\n")) if all_boxed(p)), text)
    gaps = _BOX_START.split(paragraph)[1:-1]
    for gap in gaps:
        between = gap[_box_end(gap):]
        if not _SEPARATOR_IN_GAP.search(between) and _LETTER.search(
                re.sub(r"\\[a-zA-Z]+", " ", between)):
            return False
    return True


def _box_end(text: str) -> int:
    """The index after the braced group that opens ``text`` (the rest of a box)."""
    depth = 0
    for index, char in enumerate(text):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index + 1
    return len(text)


def reference_text(reference: str) -> str:
    """The answer in a reference label: its boxes, the text after ``####``, or all of it.

    Several different boxes (in the last paragraph that has any) are all the answer, read as
    a set: ``\\boxed{1} and \\boxed{2}`` is ``\\{1, 2\\}``. A box left open is read to the end.
    """
    reference = undouble(reference)
    boxes = _boxes(reference)
    if len(boxes) > 1 and _boxes_listed(reference):
        return "\\{" + ", ".join(boxes) + "\\}"
    if len(boxes) > 1:
        return boxes[-1]
    if boxes:
        return boxes[0]
    tail = after_last_marker(reference, "####")
    if tail is not None:
        return tail
    opened = _OPEN_BOX.search(reference)
    return reference[opened.end():].strip() if opened else reference.strip()
