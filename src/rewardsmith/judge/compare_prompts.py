"""Prompts, reply schemas and reply readers for judging several rollouts in one call.

Each rollout is shown as the judge's template renders it (without the criteria list), under a
``### Response N`` heading (group) or ``### Response A`` / ``### Response B`` (pairwise).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .config import Criterion
from .parse import grade_value, last_json_object, snippet
from .prompt import DATA_NOTE, Template, fence, render_criteria
from .scales import grade_schema

__all__ = ["group_prompt", "group_schema", "read_group_reply", "pair_prompt", "pair_schema",
           "read_pair_reply", "PAIR_VERDICTS"]

PAIR_VERDICTS = {"a": 1.0, "b": 0.0, "tie": 0.5}  # the first shown is always A


def _shown(template: Template, values: dict[str, str]) -> str:
    fenced = fence(values)
    if template.has_criteria_slot:
        return template.text.format(**fenced, criteria="").strip()
    return template.text.format(**fenced).strip()


def group_prompt(template: Template, members: Sequence[dict[str, str]],
                 criteria: Sequence[Criterion]) -> str:
    parts = [f"Below are {len(members)} responses to the same task. Grade every response on "
             f"every criterion, judging them against each other.", ""]
    for number, values in enumerate(members, start=1):
        parts += [f"### Response {number}", _shown(template, values), ""]
    parts += [DATA_NOTE, "", render_criteria(criteria).rsplit("\n\n", 1)[0]]
    example = ", ".join(f'"{c.name}": <number>' for c in criteria)
    parts += ["", f'Reply with a JSON object with one entry per response, keyed "1" to '
              f'"{len(members)}", each holding one number per criterion: {{"1": {{{example}}}, '
              f'...}}']
    return "\n".join(parts)


def group_schema(size: int, criteria: Sequence[Criterion]) -> dict[str, Any]:
    grades = {"type": "object",
              "properties": {c.name: grade_schema(c) for c in criteria},
              "required": [c.name for c in criteria], "additionalProperties": False}
    return {"type": "json_schema", "json_schema": {"name": "group_grades", "strict": True,
            "schema": {"type": "object",
                       "properties": {str(n): grades for n in range(1, size + 1)},
                       "required": [str(n) for n in range(1, size + 1)],
                       "additionalProperties": False}}}


def read_group_reply(content: str, size: int,
                     criteria: Sequence[Criterion]) -> list[dict[str, float | str]]:
    """Per position (0-based): criterion -> grade or the message saying what was wrong."""
    found = _object(content)
    if found is None:
        message = f"judge reply holds no JSON object: {snippet(content)}"
        return [{c.name: message for c in criteria} for _ in range(size)]
    out: list[dict[str, float | str]] = []
    for number in range(1, size + 1):
        entry = found.get(str(number))
        if not isinstance(entry, dict):
            message = f"judge reply has no grades for response {number}: {snippet(content)}"
            out.append({c.name: message for c in criteria})
            continue
        grades: dict[str, float | str] = {}
        for c in criteria:
            if c.name in entry:
                grades[c.name] = grade_value(entry[c.name], c)
            else:
                grades[c.name] = (f"judge reply has no {c.name!r} for response {number}: "
                                  f"{snippet(content)}")
        out.append(grades)
    return out


def pair_prompt(template: Template, first: dict[str, str], second: dict[str, str],
                criteria: Sequence[Criterion]) -> str:
    lines = ["Compare two responses to the same task on each criterion and say which is "
             "better.", "", "### Response A", _shown(template, first), "",
             "### Response B", _shown(template, second), "", DATA_NOTE, "", "Criteria:"]
    for c in criteria:
        lines.append(f"- {c.name} (which response is better): {c.description}")
    example = ", ".join(f'"{c.name}": "A" | "B" | "tie"' for c in criteria)
    lines += ["", f"Reply with a JSON object naming the better response per criterion: "
              f"{{{example}}}"]
    return "\n".join(lines)


def pair_schema(criteria: Sequence[Criterion]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "preferences", "strict": True,
            "schema": {"type": "object",
                       "properties": {c.name: {"type": "string", "enum": ["A", "B", "tie"],
                                               "description": c.description}
                                      for c in criteria},
                       "required": [c.name for c in criteria],
                       "additionalProperties": False}}}


def read_pair_reply(content: str, criteria: Sequence[Criterion]) -> dict[str, float | str]:
    """Criterion -> 1.0 (A, the first shown, is better), 0.0 (B), 0.5 (tie), or a message."""
    found = _object(content)
    if found is None:
        message = f"judge reply holds no JSON object: {snippet(content)}"
        return {c.name: message for c in criteria}
    out: dict[str, float | str] = {}
    for c in criteria:
        raw = found.get(c.name)
        verdict = PAIR_VERDICTS.get(raw.strip().lower()) if isinstance(raw, str) else None
        out[c.name] = verdict if verdict is not None else (
            f"judge gave {c.name!r} = {str(raw)[:40]!r}, not \"A\", \"B\" or \"tie\"")
    return out


def _object(content: str) -> dict[str, Any] | None:
    try:
        whole = json.loads(content.strip())
    except (ValueError, RecursionError):
        whole = None
    return whole if isinstance(whole, dict) else last_json_object(content)
