"""``reward: json_match``: the completion's JSON against an expected value, field by field.

Every leaf of the expected value (a scalar, an empty object or an empty list, found by its path
of keys and indices) is one field. The reward is the share of fields whose value the completion
has at the same path: key order is free, numbers compare by value (1 == 1.0), a boolean is never
a number. With ``allow_extra: false`` every leaf the completion adds also counts as a missed
field. With ``partial: false`` the reward is 1.0 only when every field matches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._registry import builtin
from .jsontext import NotJSON, load_json, read_json, require_bools, values_equal

__all__ = ["json_match", "leaves"]

Path = tuple[Any, ...]


def leaves(value: Any, path: Path = ()) -> dict[Path, Any]:
    """Every leaf of ``value`` by its path; an empty object or list is a leaf itself."""
    if isinstance(value, dict) and value:
        out: dict[Path, Any] = {}
        for key, item in value.items():
            out.update(leaves(item, (*path, key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, item in enumerate(value):
            out.update(leaves(item, (*path, index)))
        return out
    return {path: value}


def _expected(answer: Any) -> Any:
    if isinstance(answer, str):
        try:
            return load_json(answer)
        except NotJSON as exc:
            raise ValueError(f"json_match: the expected value is a string but not JSON: "
                             f"{exc}") from None
    if answer is None:
        raise ValueError("json_match: the expected value (the answer) is missing")
    return answer


def _check_params(params: Mapping[str, Any]) -> None:
    require_bools("json_match", params, "partial", "allow_extra")


@builtin("json_match", kind="verifier", check=_check_params)
def json_match(completion: str, answer: Any, partial: bool = True,
               allow_extra: bool = True) -> dict[str, float]:
    """Share of the expected JSON's fields the completion's JSON matches (numbers by value)."""
    expected = leaves(_expected(answer))
    try:
        actual = leaves(read_json(completion))
    except NotJSON:
        return {"reward": 0.0, "parse_error": 1.0, "fields_matched": 0.0,
                "fields_total": float(len(expected))}
    matched = sum(1 for path, value in expected.items()
                  if path in actual and values_equal(value, actual[path]))
    total = len(expected)
    if not allow_extra:
        total += sum(1 for path in actual if path not in expected)
    share = matched / total if total else 1.0
    reward = share if partial else float(matched == total)
    return {"reward": reward, "parse_error": 0.0, "fields_matched": float(matched),
            "fields_total": float(total)}
