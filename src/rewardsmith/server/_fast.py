"""``POST /score`` without the framework's per-request machinery, for bodies that are valid.

FastAPI parses the body into dicts, validates them into models, and passes the request and the
reply through a stack of middleware; for a group of 16 rollouts that is much of the server's
work. Here the body goes straight from JSON to the request model (pydantic's JSON validator) and
the reply straight to JSON. Anything this path does not accept as it is (another content type,
a body that does not validate) goes on to the FastAPI route, which answers exactly as it always
has (its 422 says where the body is wrong); errors found after that (too many rollouts, the queue
full, a timeout) get the replies FastAPI would give.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.responses import PlainTextResponse, Response

from ._guard import FastRoute, Message, Scope, Send
from ._models import ScoreRequest
from ._openapi import validation_reply

__all__ = ["fast_score_route"]

_JSON_HEADER = (b"content-type", b"application/json")


def _is_json(scope: Scope) -> bool:
    """The request says its body is JSON (the content types FastAPI reads as JSON)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            kind: bytes = value.split(b";", 1)[0].strip().lower()
            return kind == b"application/json" or (
                kind.startswith(b"application/") and kind.endswith(b"+json"))
    return False


async def _no_body() -> Message:
    return {"type": "http.disconnect"}


def fast_score_route(answer: Callable[[ScoreRequest], Awaitable[dict[str, Any]]]) -> FastRoute:
    """A fast ``/score``: ``answer`` turns a valid request into the reply's content."""

    async def route(scope: Scope, body: bytes, send: Send) -> bool:
        if not body or not _is_json(scope):
            return False
        try:
            request = ScoreRequest.model_validate_json(body)
        except ValidationError:
            return False  # the FastAPI route reads it again and says what is wrong
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            content = await answer(request)
            # As JSONResponse renders it (no NaN: a reward is finite or null).
            data = json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None,
                              separators=(",", ":")).encode("utf-8")
        except RequestValidationError as exc:
            await _send(await validation_reply(Request(scope), exc), scope, watched)
            return True
        except HTTPException as exc:
            await _send(await http_exception_handler(Request(scope), exc), scope, watched)
            return True
        except Exception:
            # As Starlette's error middleware does: a plain 500, then the error to the server's
            # log.
            if not started:
                await _send(PlainTextResponse("Internal Server Error", status_code=500), scope,
                            watched)
            raise
        await watched({"type": "http.response.start", "status": 200, "headers": [
            (b"content-length", str(len(data)).encode()), _JSON_HEADER]})
        await watched({"type": "http.response.body", "body": data})
        return True

    return route


async def _send(response: Response, scope: Scope, send: Send) -> None:
    await response(scope, _no_body, send)
