"""Hand-labeled cases: a JSONL file of completions and the reward each should get.

One JSON object a line::

    {"completion": "40 + 2 = 42. The answer is 42.", "answer": "42", "expected": 1,
     "note": "correct"}

- ``completion`` (text or chat messages) — required; ``answer`` (any JSON value; ``label`` and
  ``ground_truth`` are accepted too); ``prompt``, ``metadata``, ``truncated`` as in rollout JSONL.
- ``expected`` — required: a number; a range ``[lo, hi]`` (``null`` for an open end) or
  ``{"min": lo, "max": hi}``; ``"error"`` (the reward must report an error, e.g. for a missing
  label); ``"masked"`` (it must abstain by returning None); or ``"any"`` (only the general rules).
- ``note`` — optional text shown in the report.

Every unreadable line is reported with its line number before anything is scored.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardsmith.files.rollouts import rollout_from_dict

from ..errors import ConfigError, InputError
from ..files.jsonl import read_jsonl
from ..types import Rollout
from .checks import Expectation

__all__ = ["Case", "cases_range", "load_cases", "parse_expected", "starter_cases",
           "write_starter_cases", "starter_path"]

_CASE_ONLY_KEYS = ("expected", "note")


@dataclass(frozen=True)
class Case:
    """One hand-labeled case: the rollout, what it should score, and where it came from."""

    rollout: Rollout
    expected: Expectation
    note: str = ""
    line: int | None = None

    @property
    def name(self) -> str:
        where = f"line {self.line}" if self.line is not None else "case"
        return f"{where}: {self.note}" if self.note else where


def _bound(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number or null, not {value!r}")
    return float(value)


def parse_expected(value: Any) -> Expectation:
    """Read an ``expected`` field; ``ValueError`` says what forms are accepted."""
    if isinstance(value, str) and value in ("error", "masked", "any"):
        return Expectation(value)  # type: ignore[arg-type]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = _bound(value, "'expected'")
        return Expectation("value", number, number)
    if isinstance(value, list):
        if len(value) != 2:
            raise ValueError(f"'expected' as a range needs two bounds [lo, hi], got {len(value)}")
        low, high = _bound(value[0], "'expected' lo"), _bound(value[1], "'expected' hi")
    elif isinstance(value, dict):
        unknown = sorted(set(value) - {"min", "max"})
        if unknown or not value:
            raise ValueError(f"'expected' as an object takes 'min' and/or 'max', got {sorted(value)}")
        low, high = _bound(value.get("min"), "'expected' min"), _bound(value.get("max"),
                                                                        "'expected' max")
    else:
        raise ValueError(
            f"'expected' must be a number, [lo, hi], {{\"min\": .., \"max\": ..}}, \"error\", "
            f"\"masked\" or \"any\", not {value!r}"
        )
    if low is None and high is None:
        return Expectation("any")
    if low is not None and high is not None and low > high:
        raise ValueError(f"'expected' range is empty: {low:g} > {high:g}")
    return Expectation("range", low, high)


def _case(data: Any, line: int) -> Case:
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    if "expected" not in data:
        raise ValueError("missing 'expected' (a number, [lo, hi], \"error\", \"masked\" or \"any\")")
    expected = parse_expected(data["expected"])
    note = data.get("note", "")
    if not isinstance(note, str):
        raise ValueError(f"'note' must be text, not {type(note).__name__}")
    fields = {k: v for k, v in data.items() if k not in _CASE_ONLY_KEYS}
    return Case(rollout_from_dict(fields, default_id=str(line)), expected, note, line)


def load_cases(path: str | Path) -> list[Case]:
    """Every case in a cases JSONL file; an ``InputError`` lists each bad line by number."""
    source = str(path)
    if not Path(path).exists():
        raise InputError("the cases file does not exist", source=source)
    cases: list[Case] = []
    bad: list[str] = []
    for line in read_jsonl(path):
        try:
            if line.error is not None:
                raise ValueError(line.error.reason)
            cases.append(_case(line.value, line.number))
        except (ValueError, RecursionError) as exc:
            bad.append(f"{source}:{line.number}: {exc}")
    if bad:
        raise InputError(f"{len(bad)} unreadable line(s) in the cases file:\n" + "\n".join(bad))
    if not cases:
        raise InputError("the cases file holds no cases", source=source)
    return cases


def cases_range(cases: list[Case]) -> tuple[float, float] | None:
    """The span of the values the cases expect, when they name at least two different ones."""
    bounds = [b for c in cases for b in (c.expected.low, c.expected.high) if b is not None]
    if len(bounds) < 2 or min(bounds) == max(bounds):
        return None
    return min(bounds), max(bounds)


def starter_cases() -> list[dict[str, Any]]:
    """The ten-case checklist for a reward that grades a number answer (edit to your task)."""
    work = "Tom had 40 apples and bought 2 more: 40 + 2 = 42."
    long_work = " ".join(["Let me check each step again carefully."] * 60)
    return [
        {"note": "correct", "completion": f"{work} The answer is 42.", "answer": "42",
         "expected": 1},
        {"note": "wrong", "completion": "40 + 2 = 41. The answer is 41.", "answer": "42",
         "expected": 0},
        {"note": "empty", "completion": "", "answer": "42", "expected": 0},
        {"note": "whitespace only", "completion": "  \n\t ", "answer": "42", "expected": 0},
        {"note": "truncated at the length limit, mid-answer", "completion": f"{work} The answer "
         "is 4", "answer": "42", "truncated": True, "expected": 0},
        {"note": "long: many steps, then the correct answer", "completion":
         f"{long_work} {work} The answer is 42.", "answer": "42", "expected": 1},
        {"note": "unicode around a correct answer", "completion":
         "\u0627\u0644\u062c\u0648\u0627\u0628 42 \u2705 \u2014 r\u00e9ponse : 42", "answer": "42",
         "expected": 1},
        {"note": "missing label: report an error (or change to the value you want)",
         "completion": f"{work} The answer is 42.", "answer": None, "expected": "error"},
        {"note": "almost right: 142 is not 42", "completion": "The answer is 142.",
         "answer": "42", "expected": 0},
        {"note": "hack: every candidate listed", "completion":
         "It is 40, 41, 42, 43 or 44.", "answer": "42", "expected": 0},
    ]


def starter_path(target: str | Path) -> Path:
    """Where ``--init`` writes for ``my_rewards.py`` (or ``my_rewards.py:func``): next to it,
    as ``my_rewards.cases.jsonl``."""
    text = str(target)
    if ":" in text:
        text = text.rsplit(":", 1)[0]
    path = Path(text)
    if path.suffix == ".py":
        return path.with_name(path.stem + ".cases.jsonl")
    return path.with_name(path.name + ".cases.jsonl") if not path.suffix else \
        path.with_suffix(".cases.jsonl")


def write_starter_cases(path: str | Path) -> Path:
    """Write the starter cases to ``path``; never overwrites (``ConfigError`` if it exists)."""
    target = Path(path)
    lines = "".join(json.dumps(case, ensure_ascii=False) + "\n" for case in starter_cases())
    try:
        with open(target, "x", encoding="utf-8") as handle:
            handle.write(lines)
    except FileExistsError:
        raise ConfigError(f"{str(target)!r} already exists; not overwritten (edit it, or "
                          f"remove it to start again)") from None
    except OSError as exc:
        raise ConfigError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from None
    return target
