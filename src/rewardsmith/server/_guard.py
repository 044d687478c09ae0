"""The gate in front of every route: bearer token, body size, request metrics, shutdown.

A plain ASGI middleware (not Starlette's ``BaseHTTPMiddleware``, which costs a task and a copy
per request). The body is read here, up to the limit, so a request that is too large is refused
with 413 before any of it is parsed, whether it declares its length or streams it in chunks.
A client that goes away before its body is in reaches no route.

When the server shuts down and a request is still being scored at the end of the graceful
timeout, uvicorn cancels it; the gate answers it 503 with ``Retry-After`` (another server, or
this one restarted, can take it) instead of letting it end as a 500 and a traceback.

A client that disconnects while its request is scored is not waited for: once its body is in,
the gate listens for the disconnect and cancels the request, which frees its place in the queue
and stops its scoring (so a shutdown does not wait for work nobody will read).
"""

from __future__ import annotations

import asyncio
import enum
import hmac
import json
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from ._metrics import ServerMetrics

__all__ = ["Guard", "OPEN_PATHS"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
# (scope, body, send) -> True when it answered; False passes the request on to the app.
FastRoute = Callable[[Scope, bytes, Send], Awaitable[bool]]

# Liveness probes and the API description need no token.
OPEN_PATHS = frozenset({"/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})


async def _reply(send: Send, status: int, detail: str,
                 headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class _Unread(enum.Enum):
    TOO_LARGE = "over --max-body-bytes"
    GONE = "the client disconnected"


class Guard:
    def __init__(self, app: ASGIApp, *, token: str | None, max_body_bytes: int,
                 metrics: ServerMetrics, routes: frozenset[str], retry_after: int = 1,
                 fast: Mapping[str, FastRoute] | None = None):
        self.app = app
        self.fast = dict(fast or {})  # POST routes answered before the app, by path
        self.retry_after = retry_after
        self._token = f"Bearer {token}".encode() if token is not None else None
        self.max_body_bytes = max_body_bytes
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        path = scope.get("path", "")
        route = path if path in self.routes else "other"
        code = 500
        sent = False

        async def watched_send(message: Message) -> None:
            nonlocal code, sent
            if message["type"] == "http.response.start":
                code = int(message["status"])
                sent = True
            elif listener is not None and not message.get("more_body", False):
                listener.answered = True  # a disconnect from now on cancels nothing
            await send(message)

        listener: _Listener | None = None
        try:
            refused = self._refusal(scope, path)
            if refused is not None:
                status, detail, headers, reason = refused
                self.metrics.rejected.labels(reason).inc()
                await _reply(watched_send, status, detail, headers)
                return
            if scope.get("method") in ("POST", "PUT", "PATCH"):
                body = await self._read_body(receive)
                if body is _Unread.GONE:
                    # The client left (or was cut off) mid-body: nobody to answer. Counted
                    # with nginx's 499 "client closed request", not as a server error.
                    code, sent = 499, True
                    return
                if body is _Unread.TOO_LARGE:
                    self.metrics.rejected.labels("body_too_large").inc()
                    await _reply(watched_send, 413, self._too_large())
                    return
                listener = _Listener(receive)
                fast = self.fast.get(path) if scope.get("method") == "POST" else None
                if fast is not None and await fast(scope, body, watched_send):
                    return
                receive = listener.replay(body)
            await self.app(scope, receive, watched_send)
        except asyncio.CancelledError:
            if listener is not None and listener.gone:
                # The client went away: its request was cancelled here; nobody to answer.
                _uncancel()
                code, sent = 499, True
                self.metrics.rejected.labels("disconnected").inc()
                return
            # Otherwise only uvicorn's shutdown cancels a request (past --graceful-timeout).
            if sent:
                raise
            self.metrics.rejected.labels("shutdown").inc()
            await _reply(watched_send, 503, "the server is shutting down and could not finish "
                         "this request within --graceful-timeout; retry it (the rollouts were "
                         "not scored here)", [(b"retry-after", str(self.retry_after).encode()),
                                              (b"connection", b"close")])
        finally:
            if listener is not None:
                listener.close()
            self.metrics.observe(route, str(scope.get("method", "")), code if sent else 500,
                                 time.perf_counter() - started)

    def _refusal(self, scope: Scope, path: str
                 ) -> tuple[int, str, list[tuple[bytes, bytes]], str] | None:
        if self._token is not None and path not in OPEN_PATHS:
            given = b""
            for name, value in scope.get("headers", ()):
                if name == b"authorization":
                    given = value
                    break
            if not hmac.compare_digest(given, self._token):
                what = "missing" if not given else "wrong"
                return (401, f"{what} bearer token: send 'Authorization: Bearer <token>'",
                        [(b"www-authenticate", b"Bearer")], "unauthorized")
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    return 400, "Content-Length is not a number", [], "bad_length"
                if declared > self.max_body_bytes:
                    return 413, self._too_large(declared), [], "body_too_large"
                break
        return None

    def _too_large(self, declared: int | None = None) -> str:
        size = f" ({declared} bytes)" if declared is not None else ""
        return (f"request body too large{size}: the limit is {self.max_body_bytes} bytes "
                "(--max-body-bytes); send fewer rollouts per request")

    async def _read_body(self, receive: Receive) -> bytes | _Unread:
        """The whole body, or why there is none."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return _Unread.GONE
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return _Unread.TOO_LARGE
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


class _Listener:
    """Waits, beside the request being handled, for its client to disconnect, and then cancels
    the request's task. It is the one reader of the server's ``receive`` once the body is in.

    It starts listening only once the request has run for ``_LISTEN_AFTER`` seconds (a timer
    costs a fraction of a task, and most requests are answered sooner), or when the app asks
    for the next message itself."""

    def __init__(self, receive: Receive):
        self._receive = receive
        self._request = asyncio.current_task()
        self.gone = False
        self.answered = False
        self._listening: asyncio.Future[Message] | None = None
        self._timer = asyncio.get_running_loop().call_later(_LISTEN_AFTER, self._listen)

    def _listen(self) -> asyncio.Future[Message]:
        if self._listening is None:
            self._listening = asyncio.ensure_future(self._wait())
        return self._listening

    async def _wait(self) -> Message:
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                break
        if not self.answered and self._request is not None:
            self.gone = True
            self._request.cancel()
        return message

    def replay(self, body: bytes) -> Receive:
        """A ``receive`` for the app: the body that was read, then the disconnect."""
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await asyncio.shield(self._listen())

        return replay

    def close(self) -> None:
        self.answered = True
        self._timer.cancel()
        if self._listening is not None and not self._listening.done():
            self._listening.cancel()


# How long a request runs before the gate listens for its client going away.
_LISTEN_AFTER = 0.05


def _uncancel() -> None:
    """Forget the cancellation the listener asked for: the request's task goes on normally."""
    uncancel = getattr(asyncio.current_task(), "uncancel", None)  # Python 3.11 on
    if uncancel is not None:
        uncancel()
