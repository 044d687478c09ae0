"""A read timeout for requests: a client that sends its headers or body too slowly is cut off.

uvicorn waits for a request's headers and body as long as the client takes, so clients that
trickle a byte now and then (or connect and send nothing) each hold a connection for good, and
enough of them starve the server. Here each request must arrive in full within ``seconds`` of
its first byte (the first request: of the connection); otherwise the connection gets a 408 (or,
when it sent nothing, is simply closed). Time spent scoring does not count: that is
``request_timeout``'s, and the wait between requests on a kept-alive connection is uvicorn's
keep-alive timeout.

It wraps uvicorn's own HTTP protocol class (httptools or h11) and reads only the state both keep
per request: ``cycle`` with ``more_body``, ``response_started``, ``disconnected`` and
``message_event``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

__all__ = ["with_read_timeout"]

_log = logging.getLogger("uvicorn.error")


def _reply_408(seconds: float) -> bytes:
    body = json.dumps({"detail": f"the request was not received within {seconds:g} s "
                                 "(--read-timeout): send its headers and body without pausing"
                       }).encode()
    head = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n")
    return head + body


def with_read_timeout(base: type[Any], seconds: float,
                      on_timeout: Callable[[], None] | None = None) -> type[asyncio.Protocol]:
    """A subclass of uvicorn's protocol ``base`` that enforces a ``seconds`` read deadline.

    ``on_timeout()`` is called for each connection cut off (a metrics counter, say).
    """
    reply = _reply_408(seconds)

    class ReadTimeoutProtocol(base):  # type: ignore[misc]
        # The pending deadline, and the request cycle that was current when it was set (a new
        # request's cycle appears once its headers are in).
        _deadline: asyncio.TimerHandle | None = None
        _before: Any = None
        _heard: bool = False

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._deadline is None and self._between_requests():
                self._arm()
            self._heard = True
            super().data_received(data)
            if self._deadline is not None and self._request_received():
                self._deadline.cancel()
                self._deadline = None

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._before = self.cycle
            self._heard = False
            self._deadline = self.loop.call_later(seconds, self._expire)

        def _between_requests(self) -> bool:
            cycle = self.cycle
            return cycle is None or bool(cycle.response_complete)

        def _request_received(self) -> bool:
            cycle = self.cycle
            if cycle is None or cycle is self._before:
                return False  # the headers are not all in yet
            return not cycle.more_body or bool(cycle.response_started)

        def _expire(self) -> None:
            self._deadline = None
            transport = self.transport
            if transport is None or transport.is_closing() or self._request_received():
                return
            cycle = self.cycle
            if cycle is not None and cycle is not self._before:
                # The app is waiting for the rest of the body: it hears a disconnect, and
                # anything it sends afterwards goes nowhere.
                cycle.disconnected = True
                cycle.message_event.set()
            if on_timeout is not None:
                on_timeout()
            client = f"{self.client[0]}:{self.client[1]} - " if self.client else ""
            _log.info("%sclosed a connection whose request did not arrive within %g s "
                      "(--read-timeout)", client, seconds)
            if self._heard:
                transport.write(reply)
            transport.close()

    ReadTimeoutProtocol.__name__ = ReadTimeoutProtocol.__qualname__ = \
        f"ReadTimeout{base.__name__}"
    return ReadTimeoutProtocol
