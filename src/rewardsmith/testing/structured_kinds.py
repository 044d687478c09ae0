"""Kinds and hack probes for the instruction-following and structured-output rewards.

=================  ==============================================  ===============================
kind               graded                                          probes (none may earn full
                                                                   credit)
=================  ==============================================  ===============================
ifeval             IFEval constraints (keyword, end phrase, no     empty answer against "no
                   commas)                                         commas" and "lowercase"; a bare
                                                                   ``{}``; every option glued
                                                                   together; three responses for
                                                                   two; the prompt repeated back;
                                                                   the request repeated, no answer
json-schema        JSON valid against a schema                     ``{}``; two objects glued; NaN
json-match         JSON fields against an expected object          ``{}``; every candidate value
                                                                   listed; the object glued twice
tool-call          tool calls against expected calls               every candidate call made; the
                                                                   call in prose; ``{}``
=================  ==============================================  ===============================
"""

from __future__ import annotations

import json
from typing import Any

from .kind_base import Kind

__all__ = ["STRUCTURED_KINDS", "STRUCTURED_DESCRIPTIONS", "structured_kind", "structured_probes"]

STRUCTURED_DESCRIPTIONS = {
    "ifeval": "IFEval constraints (instruction_id_list + kwargs in the answer)",
    "json-schema": "JSON that validates against a JSON Schema in the answer",
    "json-match": "JSON whose fields match an expected object in the answer",
    "tool-call": "tool calls that match the expected calls in the answer",
}
STRUCTURED_KINDS: tuple[str, ...] = tuple(STRUCTURED_DESCRIPTIONS)

_IFEVAL_LABEL = {
    "instruction_id_list": ["keywords:existence", "startend:end_checker", "punctuation:no_comma"],
    "kwargs": [{"keywords": ["orchard"]}, {"end_phrase": "Any other questions?"}, {}],
}
_SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}},
           "required": ["answer"], "additionalProperties": False}
_EXPECTED = {"name": "Ada", "year": 1815}
_CALL = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}


def _call(city: str) -> str:
    return json.dumps({"name": "get_weather", "arguments": {"city": city, "unit": "celsius"}})


def structured_kind(name: str) -> Kind:
    """The kind ``name`` (one of ``STRUCTURED_KINDS``)."""
    description = STRUCTURED_DESCRIPTIONS[name]
    if name == "ifeval":
        correct = "Apples grow in an orchard on sunny hills. Any other questions?"
        return Kind(name, description,
                    "Write about apples, use the word orchard, end with the phrase Any other "
                    "questions?, and use no commas.",
                    _IFEVAL_LABEL, correct, "Apples grow on trees, and they taste sweet.",
                    correct[:-8], "Any other questions?")
    if name == "json-schema":
        return Kind(name, description, "Reply with a JSON object holding the answer: 40 + 2.",
                    _SCHEMA, '{"answer": 42}', '{"answer": "42"}', '{"answer": 4',
                    "```json\n```")
    if name == "json-match":
        return Kind(name, description, "Give Ada Lovelace's name and birth year as JSON.",
                    _EXPECTED, '{"year": 1815.0, "name": "Ada"}',
                    '{"name": "Ada", "year": 1816}', '{"name": "Ada", "ye', "```json\n```")
    if name == "tool-call":
        return Kind(name, description, "What is the weather in Paris, in celsius?", [_CALL],
                    _call("Paris"), _call("London"), _call("Paris")[:30],
                    "<tool_call></tool_call>")
    raise KeyError(name)


def _ifeval(*ids_and_kwargs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"instruction_id_list": [i for i, _ in ids_and_kwargs],
            "kwargs": [k for _, k in ids_and_kwargs]}


def structured_probes(kind: Kind) -> list[tuple[str, Any, Any, Any]]:
    """(name, completion, answer, prompt) for each probe of ``kind``; None keeps the kind's."""
    if kind.name == "ifeval":
        request = "Name three fruits that grow on trees."
        return [
            ("an empty answer against no commas and lowercase only", "",
             _ifeval(("punctuation:no_comma", {}), ("change_case:english_lowercase", {})), None),
            ("a bare JSON {}", "{}", None, None),
            ("every allowed option glued together",
             "My answer is yes. My answer is no. My answer is maybe.",
             _ifeval(("detectable_format:constrained_response", {})), None),
            ("three responses glued where two were asked",
             "Apples are red.\n******\nPears are green.\n******\nPlums are purple.",
             _ifeval(("combination:two_responses", {})), None),
            ("the prompt repeated back", kind.question, None, kind.question),
            ("the request repeated back with no answer", request,
             _ifeval(("combination:repeat_prompt", {"prompt_to_repeat": request})), request),
        ]
    if kind.name == "json-schema":
        return [("a bare JSON {}", "{}", None, None),
                ("two JSON objects glued together", '{"answer": 42}{"answer": 42}', None, None),
                ("NaN, which is not JSON", '{"answer": NaN}', None, None)]
    if kind.name == "json-match":
        return [("a bare JSON {}", "{}", None, None),
                ("every candidate value listed",
                 '{"name": ["Ada", "Bob"], "year": [1815, 1816]}', None, None),
                ("the object glued twice", kind.correct + kind.correct, None, None)]
    if kind.name == "tool-call":
        every = "".join(f"<tool_call>{_call(city)}</tool_call>"
                        for city in ("London", "Paris", "Rome"))
        return [("every candidate call made", every, None, None),
                ("the call described in prose", "I would call get_weather for Paris in celsius.",
                 None, None),
                ("a bare JSON {}", "{}", None, None)]
    return []
