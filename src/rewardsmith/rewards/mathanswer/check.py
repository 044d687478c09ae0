"""One verdict for one completion against one reference (or a list of acceptable ones)."""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from .equivalence import Comparer, NeedsSymbolic
from .extraction import Extraction, extract_answer, reference_text
from .fastpath import TooLarge
from .latex import ParseError, clean, decimal_comma
from .nodes import Coll, Node
from .parser import parse

__all__ = ["Verdict", "check", "OK", "ERROR", "UNDECIDED"]

OK, ERROR, UNDECIDED = "ok", "error", "undecided"
MAX_INTEGER_DIGITS = 1_000_000  # plain integers compare exactly up to this many digits
_LETTER = re.compile(r"\s*\(?([A-J])\)?\s*")
_OPTION = re.compile(r"\s*\(?([A-J])[.):]\s+\S")
_INTEGER = re.compile(r"\s*\$?\s*([+-]?)0*(\d+)\s*\$?\s*")
_SPACE = re.compile(r"\s+")
_OTHER_DIGIT = re.compile(r"(?![0-9])\d")  # Arabic-Indic ٣, Devanagari ३, fullwidth ３...


def ascii_digits(text: str) -> str:
    """``الجواب: ٩٢`` as ``الجواب: 92``: the decimal digits of every script as 0-9."""
    if text.isascii():
        return text
    return _OTHER_DIGIT.sub(lambda m: str(unicodedata.digit(m.group(0))), text)


@dataclass(frozen=True)
class Verdict:
    """``status``: ok (``equal`` is the answer), error (the reference or the comparison
    failed: not the model's fault) or undecided (only sympy can tell; see ``symbolic``)."""

    equal: bool
    status: str
    extracted: str | None
    reason: str


def _reference_strings(reference: Any) -> list[str]:
    refs = list(reference) if isinstance(reference, (list, tuple)) else [reference]
    out: list[str] = []
    for ref in refs:
        if ref is None or isinstance(ref, bool):
            continue
        if isinstance(ref, float):
            if not math.isfinite(ref):
                continue
            out.append(repr(ref))
        elif isinstance(ref, (int, str)):
            text = reference_text(ascii_digits(str(ref)))
            if text:
                out.append(text)
        else:
            out.append(str(ref))
    return out


def _key(text: str) -> str | None:
    try:
        return _SPACE.sub("", clean(text))
    except ParseError:
        return None


def check(completion: str, reference: Any, *, boxed_only: bool = False,
          symbolic: bool = True) -> Verdict:
    """Is the final answer of ``completion`` equal to ``reference``?

    ``boxed_only`` grades only ``\\boxed{}`` answers. With ``symbolic`` off, a pair that needs
    sympy comes back ``undecided`` instead of running sympy in this process.
    """
    refs = _reference_strings(reference)
    if not refs:
        return Verdict(False, ERROR, None, f"unparseable reference: missing or empty ({reference!r})")
    found = extract_answer(ascii_digits(completion) if isinstance(completion, str) else completion,
                           boxed_only=boxed_only)
    if found is None:
        reason = "no \\boxed{} answer" if boxed_only else "no answer found"
        return Verdict(False, OK, None, reason)
    comparer = Comparer(symbolic=symbolic)
    verdicts = [_against(found, ref, comparer) for ref in refs]
    for status in (OK, UNDECIDED, ERROR):
        for verdict in verdicts:
            if verdict.status == status and (verdict.equal or status != OK):
                return verdict
    return next(v for v in verdicts if v.status == OK)


def _integers(answer: str, ref: str) -> Verdict | None:
    """Two plain integers are compared digit by digit, however long (up to
    ``MAX_INTEGER_DIGITS``): no conversion, no arithmetic, linear time."""
    a, r = _INTEGER.fullmatch(answer), _INTEGER.fullmatch(ref)
    if a is None or r is None:
        return None
    if max(len(a.group(2)), len(r.group(2))) > MAX_INTEGER_DIGITS:
        return Verdict(False, ERROR, answer[:40], f"integers longer than {MAX_INTEGER_DIGITS:,} digits")
    def signed(match: re.Match[str]) -> str:
        return "" if match.group(2) == "0" else match.group(1).replace("+", "")
    equal = (signed(a), a.group(2)) == (signed(r), r.group(2))
    return Verdict(equal, OK, answer if len(answer) <= 80 else answer[:77] + "...",
                   f"{'equal' if equal else 'not equal'} (integers, digit by digit)")


def _choice(answer: str, ref: str) -> Verdict | None:
    """A bare choice letter against a labeled option: ``C`` and ``C. x = 42`` are choice C."""
    for letter_side, labeled_side in ((answer, ref), (ref, answer)):
        letter = _LETTER.fullmatch(letter_side)
        option = _OPTION.match(labeled_side)
        if letter and option:
            equal = letter.group(1) == option.group(1)
            return Verdict(equal, OK, answer[:80], f"{'equal' if equal else 'not equal'} (choice)")
    return None


def _against(found: Extraction, ref: str, comparer: Comparer) -> Verdict:
    if len(found.answers) == 1:
        exact = _integers(found.answers[0], ref) or _choice(found.answers[0], ref)
        if exact is not None:
            return exact
    shown = " | ".join(found.answers)
    ref_key = _key(ref)
    if ref_key is not None and all(_key(a) == ref_key for a in found.answers):
        return Verdict(True, OK, shown, f"equal ({found.source}, same text)")
    try:
        ref_node = _parse_reference(ref)
    except ParseError as exc:
        return Verdict(False, ERROR, shown, f"unparseable reference {ref[:80]!r}: {exc}")
    try:
        if len(found.answers) == 1:
            try:
                node = parse(found.answers[0])
            except ParseError as exc:
                return Verdict(False, OK, shown, f"not equal: unreadable answer ({exc})")
            equal = comparer.equal(node, ref_node) or _decimal_comma_equal(
                found.answers[0], node, ref, ref_node, comparer)
            return Verdict(equal, OK, shown, f"{'equal' if equal else 'not equal'} ({found.source})")
        return _several(found, ref_node, comparer)
    except TooLarge as exc:
        return Verdict(False, ERROR, shown, str(exc))
    except NeedsSymbolic as exc:
        return Verdict(False, UNDECIDED, shown, str(exc))
    except RecursionError:
        return Verdict(False, ERROR, shown, "cannot compare: expression nested too deeply")


def _parse_reference(ref: str) -> Node:
    """The reference's tree; a reference written as a solution (prose ending in "The final
    answer is $28\\%$") is read for its stated answer, as a completion would be."""
    try:
        return parse(ref)
    except ParseError:
        stated = extract_answer(ref)
        if stated is None or len(stated.answers) != 1 or stated.answers[0] == ref.strip():
            raise
        return parse(stated.answers[0])


def _decimal_comma_equal(answer: str, node: Node, ref: str, ref_node: Node,
                         comparer: Comparer) -> bool:
    """``1000,99`` or ``0,111`` against one number: a decimal comma (see docs/math.md)."""
    for text, other in ((answer, ref_node), (ref, node)):
        value = decimal_comma(text)
        if value is not None and not isinstance(other, Coll):
            return comparer.equal(parse(value), other)
    return False


def _several(found: Extraction, ref_node: Node, comparer: Comparer) -> Verdict:
    """Several different boxes at the end: right only if each one is (or, together, they are
    exactly the reference's list of answers, as in ``x = \\boxed{1}`` or ``x = \\boxed{2}``)."""
    shown = " | ".join(found.answers)
    nodes: list[Node] = []
    for answer in found.answers:
        try:
            nodes.append(parse(answer))
        except ParseError:
            return Verdict(False, OK, shown, "not equal: several boxed answers, one unreadable")
    if all(comparer.equal(node, ref_node) for node in nodes):
        return Verdict(True, OK, shown, "equal (several boxes, all equal)")
    if isinstance(ref_node, Coll) and len(ref_node.items) == len(nodes):
        if comparer.equal(Coll("set", tuple(nodes)), ref_node):
            return Verdict(True, OK, shown, "equal (the boxes together are the reference list)")
    return Verdict(False, OK, shown, "not equal: several different boxed answers")
