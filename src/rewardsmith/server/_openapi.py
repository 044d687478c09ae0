"""What the OpenAPI schema says beyond the models: per-server limits, error replies, and a
validation reply that survives any input.

The models are the same for every server, but ``--max-batch`` is not: ``state_limits`` writes it
into the schema as ``maxItems``, so a client (or a property-based test) generated from the schema
stays within what the server accepts.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from ._models import ErrorReply

__all__ = ["error_responses", "state_limits", "validation_reply"]

_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying.",
                                "schema": {"type": "integer", "minimum": 1}}}
_ERRORS: dict[int, tuple[str, dict[str, Any] | None]] = {
    400: ("The body cannot be read: not UTF-8 text, or a Content-Length that is not a number.",
          None),
    401: ("Missing or wrong bearer token (--token-env).", None),
    408: ("The request's headers and body did not arrive within --read-timeout; the "
          "connection is closed.", None),
    413: ("Request body larger than --max-body-bytes.", None),
    422: ("Invalid body (the detail says where), or more rollouts than --max-batch.", None),
    429: ("Queue full (--queue-limit); retry after the Retry-After seconds.", _RETRY_AFTER),
    503: ("The server is shutting down and could not finish this request within "
          "--graceful-timeout; retry after the Retry-After seconds.", _RETRY_AFTER),
    504: ("Scoring took longer than --request-timeout.", None),
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` entries for these error codes, each with its reply model."""
    out: dict[int | str, dict[str, Any]] = {}
    for code in codes:
        description, headers = _ERRORS[code]
        entry: dict[str, Any] = {"model": ErrorReply, "description": description}
        if headers is not None:
            entry["headers"] = headers
        out[code] = entry
    return out


def state_limits(schema: dict[str, Any], max_batch: int) -> dict[str, Any]:
    """Write ``max_batch`` into ``schema`` as the most items of each list of rollouts."""
    models = schema.get("components", {}).get("schemas", {})
    score = models.get("ScoreRequest", {}).get("properties", {})
    note = f" At most {max_batch} rollouts in all (--max-batch)."
    for key in ("rollouts", "groups"):
        for array in _arrays(score.get(key)):
            array["maxItems"] = max_batch
            array["description"] = array.get("description", "") + note
            if key == "groups":
                for inner in _arrays(array.get("items")):
                    inner["maxItems"] = max_batch
    openrlhf = models.get("OpenRLHFRequest", {}).get("properties", {})
    for key in ("query", "prompts", "labels"):
        for array in _arrays(openrlhf.get(key)):
            array["maxItems"] = max_batch
    for array in _arrays(openrlhf.get("query")):
        array["description"] = array.get("description", "") + \
            f" At most {max_batch} (--max-batch)."
    return schema


def _arrays(node: Any) -> Iterator[dict[str, Any]]:
    """The array schemas in ``node``: itself, or the branches of its ``anyOf``."""
    if not isinstance(node, dict):
        return
    if node.get("type") == "array":
        yield node
    for branch in node.get("anyOf", ()):
        if isinstance(branch, dict) and branch.get("type") == "array":
            yield branch


async def validation_reply(_: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 reply, except that a NaN or infinity in the echoed input (Python's JSON
    reader accepts them) is written as text instead of failing as a 500."""
    assert isinstance(exc, RequestValidationError)
    return JSONResponse({"detail": _finite(jsonable_encoder(exc.errors()))}, status_code=422)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value
