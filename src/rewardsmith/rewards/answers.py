"""Verifiers: compare the completion's final answer with the reference answer.

Each returns 1.0 (match) or 0.0 (no match), or a score in [0, 1] for ``f1``. A missing or
unreadable *reference* is the dataset's fault, not the model's: it raises ``ValueError`` naming
the label, which the engine reports as that rollout's ``error`` (never a silent 0).
"""

from __future__ import annotations

import numbers
import re
import string
from collections import Counter
from fractions import Fraction
from functools import lru_cache
from typing import Any

from ._registry import builtin
from .extract import after_last_marker, find_numbers, last_boxed, last_number, parse_number

__all__ = ["gsm8k", "number", "exact", "normalized", "f1", "choice"]


def _references(answer: Any, what: str) -> list[Any]:
    """The acceptable reference answers: a list means any of them; None or empty is an error.

    Each must be text or a number: a dict, a nested list or bytes would otherwise be graded as
    its repr (``{'x': 42}`` "contains" 42), so it is the label's error instead.
    """
    if answer is None:
        raise ValueError(f"{what}: the reference answer is missing (None)")
    refs = list(answer) if isinstance(answer, (list, tuple)) else [answer]
    for ref in refs:
        if ref is not None and not _is_scalar(ref):
            inside = " inside the list of answers" if ref is not answer else ""
            raise ValueError(
                f"{what}: the reference answer (label) {_preview(ref)} is a "
                f"{type(ref).__name__}{inside}, not text or a number; give the answer itself, "
                "or a list of acceptable answers"
            )
    refs = [r for r in refs if r is not None and (not isinstance(r, str) or r.strip())]
    if not refs:
        raise ValueError(f"{what}: the reference answer is empty ({answer!r})")
    return refs


def _is_scalar(value: Any) -> bool:
    # numbers.Real admits numpy and Decimal-like numbers as well as int, float and bool.
    return isinstance(value, (str, numbers.Real))


def _preview(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


@lru_cache(maxsize=4096)
def _reference_number(label: str) -> Fraction:
    # GSM8K labels are often whole solutions ending in "#### 72": grade against the final value.
    tail = after_last_marker(label, "####")
    source = tail if tail is not None else label
    value = parse_number(source)
    if value is None:
        token = last_number(source)
        value = parse_number(token) if token is not None else None
    if value is None:
        raise ValueError(f"the reference answer {label[:80]!r} is not a number")
    return value


def _reference_numbers(answer: Any, what: str) -> list[Fraction]:
    out = []
    for ref in _references(answer, what):
        if isinstance(ref, bool):
            raise ValueError(f"{what}: the reference answer {ref!r} is a bool, not a number")
        if isinstance(ref, (int, float)):
            value = parse_number(ref)
            if value is None:
                raise ValueError(f"{what}: the reference answer {ref!r} is not a finite number")
            out.append(value)
        else:
            out.append(_reference_number(str(ref)))
    return out


def _first_number(text: str) -> str | None:
    numbers = find_numbers(text)
    return numbers[0] if numbers else None


@builtin("gsm8k", kind="verifier", boxable=True, bounded=True)
def gsm8k(completion: str, answer: Any) -> float:
    """GSM8K: the number after the last '####' (else the last number) equals the answer's value."""
    refs = _reference_numbers(answer, "gsm8k")
    tail = after_last_marker(completion, "####")
    # With a marker, only what follows it counts: '####' with nothing after earns nothing.
    token = _first_number(tail) if tail is not None else last_number(completion)
    value = parse_number(token) if token is not None else None
    return 1.0 if value is not None and value in refs else 0.0


@builtin("number", kind="verifier", boxable=True, bounded=True)
def number(completion: str, answer: Any) -> float:
    """The last number in the completion equals the answer as a value (42.0 = 42, 1,000 = 1000)."""
    refs = _reference_numbers(answer, "number")
    token = last_number(completion)
    value = parse_number(token) if token is not None else None
    return 1.0 if value is not None and value in refs else 0.0


def _reference_texts(answer: Any, what: str) -> list[str]:
    refs = _references(answer, what)
    return [r if isinstance(r, str) else _json_scalar_text(r) for r in refs]


def _json_scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@builtin("exact", kind="verifier", boxable=True, bounded=True)
def exact(completion: str, answer: Any) -> float:
    """The completion, stripped, equals the answer exactly (case and punctuation count)."""
    text = completion.strip()
    return 1.0 if any(text == ref.strip() for ref in _reference_texts(answer, "exact")) else 0.0


_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = str.maketrans("", "", string.punctuation + "‘’“”«»…")


def normalize_text(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (the SQuAD convention)."""
    text = text.lower().translate(_PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


@builtin("normalized", kind="verifier", boxable=True, bounded=True)
def normalized(completion: str, answer: Any) -> float:
    """Equal after normalizing case, whitespace, punctuation and articles."""
    text = normalize_text(completion)
    refs = _reference_texts(answer, "normalized")
    return 1.0 if any(text == normalize_text(ref) for ref in refs) else 0.0


def _f1(prediction: str, reference: str) -> float:
    pred_tokens = normalize_text(prediction).split()
    ref_tokens = normalize_text(reference).split()
    if not pred_tokens or not ref_tokens:
        return 1.0 if pred_tokens == ref_tokens else 0.0
    common = Counter(pred_tokens) & Counter(ref_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


@builtin("f1", kind="verifier", boxable=True, bounded=True)
def f1(completion: str, answer: Any) -> float:
    """Token-overlap F1 between the normalized completion and answer (for short text answers)."""
    return max(_f1(completion, ref) for ref in _reference_texts(answer, "f1"))


_LETTERS = "ABCDEFGHIJ"
_ANSWER_CUE = re.compile(
    r"(?:final\s+answer|answer|option|choice)\s*(?:is|:|=|-)?\s*(?:option|choice)?\s*:?",
    re.IGNORECASE,
)
_CUED_LETTER = re.compile(r"(?<![A-Za-z])\(?\s*([A-Ja-j])\s*\)?(?![A-Za-z])")
_PAREN_LETTER = re.compile(r"\(\s*([A-J])\s*\)|\[\s*([A-J])\s*\]")
_BARE_LINE = re.compile(r"^\W*([A-J])\W*$")


def _choice_letters(text: str) -> set[str]:
    """The letters given as the final answer; more than one means the answer is ambiguous."""
    box = last_boxed(text)
    if box is not None:
        text = box.replace("\\text", "").replace("{", " ").replace("}", " ")
    cues = list(_ANSWER_CUE.finditer(text))
    if cues:
        region = text[cues[-1].end() :].strip()
        first_line = region.splitlines()[0] if region else ""
        # Only the answer's own words: stop at the first sentence end after the letter(s).
        head = re.split(r"(?<=[A-Za-z\)\]])[.;!?](?:\s|$)", first_line, maxsplit=1)[0]
        letters = {m.upper() for m in _CUED_LETTER.findall(head)}
        if letters:
            return letters
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return set()
    last = lines[-1]
    bare = _BARE_LINE.match(last)
    if bare:
        return {bare.group(1)}
    return {a or b for a, b in _PAREN_LETTER.findall(last)}


@lru_cache(maxsize=1024)
def _reference_letter(label: str) -> str:
    cleaned = label.strip().strip("()[]. ").upper()
    if len(cleaned) == 1 and cleaned in _LETTERS:
        return cleaned
    letters = _choice_letters(label)
    if len(letters) == 1:
        return letters.pop()
    raise ValueError(f"choice: the reference answer {label[:80]!r} is not one letter A-J")


@builtin("choice", kind="verifier", boxable=True, bounded=True)
def choice(completion: str, answer: Any) -> float:
    """Multiple choice: one letter ('(B)', 'Answer: b', 'the answer is B.') equals the label."""
    refs = set()
    for ref in _references(answer, "choice"):
        if isinstance(ref, int) and not isinstance(ref, bool) and 0 <= ref < len(_LETTERS):
            refs.add(_LETTERS[ref])  # a 0-based option index
        else:
            refs.add(_reference_letter(str(ref)))
    letters = _choice_letters(completion)
    return 1.0 if len(letters) == 1 and letters <= refs else 0.0
