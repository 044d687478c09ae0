"""The OpenAI-compatible test server, counting the chat requests in flight at once.

Judge limits are checked where they matter, at the endpoint: ``max_in_flight`` is the most
chat requests the server was answering at one moment, whichever processes sent them, and
``request_times`` (from the base server) when each arrived.
"""

from __future__ import annotations

from typing import Any

from support.openai_server import OpenAIServer, Response

__all__ = ["CountingServer", "most_in_any_window"]


class CountingServer(OpenAIServer):
    def __init__(self, **options: Any):
        super().__init__(**options)
        self.in_flight = 0
        self.max_in_flight = 0

    async def _route(self, method: str, path: str, headers: dict[str, str],
                     raw: bytes) -> Response | None:
        if method != "POST" or path != "/v1/chat/completions":
            return await super()._route(method, path, headers, raw)
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await super()._route(method, path, headers, raw)
        finally:
            with self._lock:
                self.in_flight -= 1


def most_in_any_window(times: list[float], window: float) -> int:
    """The most arrivals within any ``window`` seconds (a sliding window over sorted times)."""
    ordered = sorted(times)
    most = start = 0
    for end, at in enumerate(ordered):
        while at - ordered[start] > window:
            start += 1
        most = max(most, end - start + 1)
    return most
