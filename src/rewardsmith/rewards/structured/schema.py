"""``reward: json_schema``: the completion is JSON that validates against a JSON Schema."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from .._registry import builtin
from .jsontext import NotJSON, load_json, read_json

__all__ = ["json_schema"]


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    from jsonschema import validators
    from jsonschema.exceptions import SchemaError

    schema = json.loads(schema_json)
    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"json_schema: the schema is not a valid JSON Schema: "
                         f"{exc.message}") from None
    return cls(schema)


def _schema_of(schema: Any, answer: Any) -> Any:
    source, where = (schema, "params.schema") if schema is not None else (answer, "the answer")
    if isinstance(source, dict) and schema is None and "schema" in source:
        source = source["schema"]
    if isinstance(source, str):
        try:
            source = load_json(source)
        except NotJSON as exc:
            raise ValueError(f"json_schema: the schema in {where} is not JSON: {exc}") from None
    if not isinstance(source, (dict, bool)):
        raise ValueError(f"json_schema: the schema in {where} must be an object, "
                         f"got {type(source).__name__}")
    return source


def _check_params(params: Mapping[str, Any]) -> None:
    if params.get("schema") is not None:  # a schema in params is checked before any rollout
        _validator(json.dumps(_schema_of(params["schema"], None), sort_keys=True))


@builtin("json_schema", kind="verifier", check=_check_params)
def json_schema(completion: str, answer: Any = None, schema: Any = None) -> dict[str, float]:
    """The completion (or its last fenced block) is JSON valid against the schema (params/answer)."""
    found = _schema_of(schema, answer)
    validator = _validator(json.dumps(found, sort_keys=True))
    try:
        value = read_json(completion)
    except NotJSON:
        return {"reward": 0.0, "parse_error": 1.0, "schema_error": 0.0}
    valid = validator.is_valid(value)
    return {"reward": 1.0 if valid else 0.0, "parse_error": 0.0,
            "schema_error": 0.0 if valid else 1.0}
