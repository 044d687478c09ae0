"""One verdict for one completion against one reference (or a list of acceptable ones)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from .equivalence import Comparer, NeedsSymbolic
from .extraction import Extraction, extract_answer, reference_text
from .fastpath import TooLarge
from .latex import ParseError, clean
from .nodes import Coll, Node
from .parser import parse

__all__ = ["Verdict", "check", "OK", "ERROR", "UNDECIDED"]

OK, ERROR, UNDECIDED = "ok", "error", "undecided"
_SPACE = re.compile(r"\s+")


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
            text = reference_text(str(ref))
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
    found = extract_answer(completion, boxed_only=boxed_only)
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


def _against(found: Extraction, ref: str, comparer: Comparer) -> Verdict:
    shown = " | ".join(found.answers)
    ref_key = _key(ref)
    if ref_key is not None and all(_key(a) == ref_key for a in found.answers):
        return Verdict(True, OK, shown, f"equal ({found.source}, same text)")
    try:
        ref_node = parse(ref)
    except ParseError as exc:
        return Verdict(False, ERROR, shown, f"unparseable reference {ref[:80]!r}: {exc}")
    try:
        if len(found.answers) == 1:
            try:
                node = parse(found.answers[0])
            except ParseError as exc:
                return Verdict(False, OK, shown, f"not equal: unreadable answer ({exc})")
            equal = comparer.equal(node, ref_node)
            return Verdict(equal, OK, shown, f"{'equal' if equal else 'not equal'} ({found.source})")
        return _several(found, ref_node, comparer)
    except TooLarge as exc:
        return Verdict(False, ERROR, shown, str(exc))
    except NeedsSymbolic as exc:
        return Verdict(False, UNDECIDED, shown, str(exc))
    except RecursionError:
        return Verdict(False, ERROR, shown, "cannot compare: expression nested too deeply")


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
        if comparer.equal(Coll("list", tuple(nodes)), ref_node):
            return Verdict(True, OK, shown, "equal (the boxes together are the reference list)")
    return Verdict(False, OK, shown, "not equal: several different boxed answers")
