"""Reading IFEval constraints: ``instruction_id_list`` plus a matching ``kwargs`` list.

The answer holds them as IFEval and the RLVR-IF datasets store them: a dict, the same dict as a
JSON string, or a one-element list around it. Every kwarg is checked against what its
instruction takes; an unknown id, a missing or extra kwarg, or a value of the wrong kind makes
that constraint ``Unchecked``, with a reason naming the instruction's position, its id and the
kwarg (``parse_instructions`` raises it as ``ValueError``), never a silent pass.
``None`` values are dropped first: the published dataset pads every row with all kwarg names.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from types import MappingProxyType
from typing import Any, NamedTuple, cast

from .text import known_languages

__all__ = ["Instruction", "Unchecked", "parse_instructions", "read_instructions", "KWARGS",
           "RELATIONS"]

RELATIONS = ("less than", "at least")

Reader = Callable[[Any], Any]


class _Bad(ValueError):
    """A kwarg value of the wrong kind; the message says what was expected."""


def _count(value: Any) -> int:
    if type(value) is int and value >= 0:
        return value
    # JSON from other tools may write counts as 3.0; a fraction or a bool is not a count.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Bad(f"expected a whole number >= 0, got {value!r}")
    if isinstance(value, float) and not value.is_integer():
        raise _Bad(f"expected a whole number >= 0, got {value!r}")
    if value < 0:
        raise _Bad(f"expected a whole number >= 0, got {value!r}")
    return int(value)


def _positive(value: Any) -> int:
    number = _count(value)
    if number < 1:
        raise _Bad(f"expected a whole number >= 1, got {value!r}")
    return number


def _text(value: Any) -> str:
    stripped = value.strip() if isinstance(value, str) else ""
    if not stripped:
        raise _Bad(f"expected a non-empty string, got {value!r}")
    return stripped


def _lower_text(value: Any) -> str:
    return _text(value).lower()


def _words(value: Any) -> tuple[str, ...]:
    if type(value) is not list and (isinstance(value, str) or not isinstance(value, Sequence)) \
            or not value:
        raise _Bad(f"expected a non-empty list of strings, got {value!r}")
    return tuple(_text(item) for item in value)


def _relation(value: Any) -> str:
    if value not in RELATIONS:
        raise _Bad(f"expected one of {', '.join(map(repr, RELATIONS))}, got {value!r}")
    return str(value)


def _character(value: Any) -> str:
    # One character to count: a letter (either case counts) or any other mark IFEval's data
    # asks for ("#", "!"); whitespace or several characters are not one character.
    if not isinstance(value, str) or len(value.strip()) != 1:
        raise _Bad(f"expected one character (such as 'a' or '#'), got {value!r}")
    return value.strip().lower()


def _language(value: Any) -> str:
    code = _text(value).lower()
    if code not in known_languages():
        raise _Bad(f"expected a language code the detector knows (such as 'en', 'de', "
                   f"'zh-cn'), got {value!r}")
    return code


# Each instruction id and the kwargs it takes, every one required.
KWARGS: dict[str, dict[str, Reader]] = {
    "keywords:existence": {"keywords": _words},
    "keywords:frequency": {"keyword": _text, "frequency": _count, "relation": _relation},
    "keywords:forbidden_words": {"forbidden_words": _words},
    "keywords:letter_frequency": {"letter": _character, "let_frequency": _count,
                                  "let_relation": _relation},
    "language:response_language": {"language": _language},
    "length_constraints:number_sentences": {"num_sentences": _count, "relation": _relation},
    "length_constraints:number_paragraphs": {"num_paragraphs": _positive},
    "length_constraints:number_words": {"num_words": _count, "relation": _relation},
    "length_constraints:nth_paragraph_first_word": {
        "num_paragraphs": _positive, "nth_paragraph": _positive, "first_word": _lower_text},
    "detectable_content:number_placeholders": {"num_placeholders": _count},
    "detectable_content:postscript": {"postscript_marker": _text},
    "detectable_format:number_bullet_lists": {"num_bullets": _count},
    "detectable_format:constrained_response": {},
    "detectable_format:number_highlighted_sections": {"num_highlights": _count},
    "detectable_format:multiple_sections": {"section_spliter": _text, "num_sections": _count},
    "detectable_format:json_format": {},
    "detectable_format:title": {},
    "combination:two_responses": {},
    "combination:repeat_prompt": {"prompt_to_repeat": _text},
    "startend:end_checker": {"end_phrase": _lower_text},
    "change_case:capital_word_frequency": {"capital_frequency": _count,
                                           "capital_relation": _relation},
    "change_case:english_capital": {},
    "change_case:english_lowercase": {},
    "punctuation:no_comma": {},
    "startend:quotation": {},
}


class Instruction(NamedTuple):
    """One constraint: its IFEval id and its checked kwargs."""

    id: str
    kwargs: Mapping[str, Any]


class Unchecked(NamedTuple):
    """A constraint that cannot be checked (unknown id, bad kwargs): its id and why, in words."""

    id: str
    reason: str


# The instructions that take no kwargs, made once (their kwargs a read-only empty mapping).
_BARE = {iid: Instruction(iid, MappingProxyType({})) for iid, takes in KWARGS.items() if not takes}


def _unwrap(answer: Any) -> Mapping[str, Any]:
    if isinstance(answer, (list, tuple)) and len(answer) == 1:
        answer = answer[0]
    if type(answer) is not dict and not isinstance(answer, Mapping):
        raise ValueError(
            "ifeval: the answer must hold 'instruction_id_list' and 'kwargs' (a dict or its "
            f"JSON string), got {type(answer).__name__}"
        )
    return answer


def _name_misfits(position: int, instruction_id: str, given: Mapping[str, Any],
                   takes: Mapping[str, Any]) -> None:
    where = f"ifeval: instruction {position} ({instruction_id})"
    extra = sorted(set(given) - set(takes))
    if extra:
        raise ValueError(f"{where}: takes no kwarg(s) {', '.join(map(repr, extra))}; "
                         f"it takes {sorted(takes) or 'none'}")
    missing = sorted(set(takes) - set(given))
    raise ValueError(f"{where}: missing kwarg(s) {', '.join(map(repr, missing))}")


def _read_one(position: int, instruction_id: Any, raw: Any) -> Instruction:
    takes = KWARGS.get(instruction_id) if isinstance(instruction_id, str) else None
    if takes is None:
        raise ValueError(f"ifeval: instruction {position}: unknown instruction id "
                         f"{instruction_id!r}")
    if not takes and (raw is None or type(raw) is dict and not raw):
        return _BARE[instruction_id]  # the common case of an instruction without kwargs
    if raw is None:
        raw = {}
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise ValueError(f"ifeval: instruction {position} ({instruction_id}): kwargs must be an "
                         f"object, got {raw!r}")
    given = {k if type(k) is str else str(k): v for k, v in raw.items() if v is not None}
    if given.keys() != takes.keys():
        _name_misfits(position, instruction_id, given, takes)
    values: dict[str, Any] = {}
    try:
        for name, reader in takes.items():
            values[name] = reader(given[name])
    except _Bad as exc:
        raise ValueError(f"ifeval: instruction {position} ({instruction_id}): kwarg {name!r}: "
                         f"{exc}") from None
    if instruction_id == "length_constraints:nth_paragraph_first_word" and \
            values["nth_paragraph"] > values["num_paragraphs"]:
        raise ValueError(f"ifeval: instruction {position} ({instruction_id}): nth_paragraph "
                         f"{values['nth_paragraph']} is past num_paragraphs "
                         f"{values['num_paragraphs']}")
    return Instruction(instruction_id, values)


def _from_mapping(answer: Mapping[str, Any]) -> tuple[Instruction | Unchecked, ...]:
    ids = answer.get("instruction_id_list", answer.get("instruction_id"))
    if ids is None:
        raise ValueError("ifeval: the answer has no 'instruction_id_list'")
    if type(ids) is not list and (isinstance(ids, str) or not isinstance(ids, Sequence)) \
            or not ids:
        raise ValueError(f"ifeval: 'instruction_id_list' must be a non-empty list, got {ids!r}")
    kwargs = answer.get("kwargs")
    if kwargs is None:
        kwargs = [{} for _ in ids]
    if type(kwargs) is not list and (isinstance(kwargs, str) or not isinstance(kwargs, Sequence)):
        raise ValueError(f"ifeval: 'kwargs' must be a list (one object per instruction), "
                         f"got {kwargs!r}")
    if len(kwargs) != len(ids):
        raise ValueError(f"ifeval: {len(ids)} instruction id(s) but {len(kwargs)} kwargs")
    return tuple([_read_or_name(i, iid, raw) for i, (iid, raw) in enumerate(zip(ids, kwargs))])


def _read_or_name(position: int, instruction_id: Any, raw: Any) -> Instruction | Unchecked:
    try:
        return _read_one(position, instruction_id, raw)
    except ValueError as exc:
        return Unchecked(str(instruction_id), str(exc))


@lru_cache(maxsize=4096)
def _from_json(text: str) -> tuple[Instruction | Unchecked, ...]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"ifeval: the answer is a string but not JSON: {exc}") from None
    return _from_mapping(_unwrap(value))


def read_instructions(answer: Any) -> tuple[Instruction | Unchecked, ...]:
    """Each constraint in ``answer``, read, or ``Unchecked`` with the reason it cannot be.

    ``ValueError`` when the answer as a whole cannot be read (no ``instruction_id_list``, a
    kwargs list of another length, not a dict or its JSON): then no constraint is known.
    """
    if type(answer) is dict:
        return _from_mapping(answer)
    if answer is None:
        raise ValueError("ifeval: the answer is missing; it must hold 'instruction_id_list' "
                         "and 'kwargs'")
    if isinstance(answer, str):
        return _from_json(answer)
    return _from_mapping(_unwrap(answer))


def parse_instructions(answer: Any) -> tuple[Instruction, ...]:
    """The checked constraints in ``answer``; ``ValueError`` naming the first that is wrong."""
    read = read_instructions(answer)
    for item in read:
        if type(item) is Unchecked:
            raise ValueError(item.reason)
    return cast("tuple[Instruction, ...]", read)
