"""An async client for any OpenAI-compatible ``/chat/completions`` endpoint that survives real ones.

Calls in flight are bounded by the caller (``Limits.call``, in whatever scope the limits hold)
and, per client, by what the server can serve (``InFlight``: at most its slots where it says,
halved on refusals and timeouts, shrunk when replies slow down as a queue forms). This module adds a connect deadline and a first-byte deadline
apart from the generation deadline (``connect_timeout``, ``first_byte_timeout``, ``timeout``:
the reply is read as a stream so that its first byte can be timed, and ``timeout`` bounds the
whole exchange, not each read as httpx's own timeout does), retries with exponential backoff and
jitter on 429, 5xx, connection errors and timeouts (honouring ``Retry-After`` and
``retry-after-ms``, and pausing every request while the server asked to wait), a longer budget
for a server that is restarting (503s and refused connections are retried for
``unavailable_wait`` seconds without using up ``retries``), and paces each attempt by the
request and token rate limits (``Limits.pace``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import logging
import random
import re
import sys
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from ..errors import JudgeError
from .config import Criterion, JudgeConfig
from .inflight import InFlight
from .limits import Limits, LimitSettings, RateLimiter
from .parse import snippet
from .scales import grade_schema

__all__ = ["CallFailed", "JudgeClient", "Reply", "RateLimiter", "request_body"]

log = logging.getLogger("rewardsmith.judge")
_T = TypeVar("_T")

_RETRY_STATUSES = frozenset({408, 409, 429})
_BACKOFF_CAP = 20.0  # seconds: the longest wait between attempts without a Retry-After
_CHECK_TIMEOUT = 10.0
_SHARD_CONNECTIONS = 4  # connections per httpx pool


@dataclass
class Reply:
    """A successful reply: the message content and what it cost."""

    content: str
    tokens_in: int
    tokens_out: int
    attempts: int
    model: str | None = None
    finish_reason: str | None = None
    logprobs: list[Any] | None = None  # choices[0].logprobs.content, when the server sent it


class CallFailed(Exception):
    """A call that ended without a usable reply, after any retries."""

    def __init__(self, message: str, *, attempts: int, status: int | None = None,
                 raw: str | None = None, tokens_in: int = 0, tokens_out: int = 0):
        super().__init__(message)
        self.message = message
        self.attempts = attempts
        self.status = status
        self.raw = raw
        self.tokens_in = tokens_in
        self.tokens_out = tokens_out


def request_body(config: JudgeConfig, messages: list[dict[str, str]],
                 criteria: Sequence[Criterion]) -> dict[str, Any]:
    """The chat-completions request that asks for one number per criterion."""
    body: dict[str, Any] = {"model": config.model, "messages": messages, **config.sampling()}
    if config.response_format == "json_schema":
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": "grades",
                "strict": True,
                "schema": {
                    "type": "object",
                    "properties": {c.name: grade_schema(c) for c in criteria},
                    "required": [c.name for c in criteria],
                    "additionalProperties": False,
                },
            },
        }
    elif config.response_format == "json_object":
        body["response_format"] = {"type": "json_object"}
    body.update(config.extra_body)
    return body


class JudgeClient:
    """Talks to one endpoint for one judge. Create it, use it and close it on one event loop."""

    def __init__(self, config: JudgeConfig, api_key: str | None, *, label: str = "judge",
                 limits: Limits | None = None):
        self.config = config
        self.label = label
        self._secret = api_key  # never logged, stored or shown: see ``redact``
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # httpx scans its whole pool on every request, so one pool of many connections costs
        # O(connections) per call: several small pools (one TLS context shared) scale instead.
        shards = -(-config.max_concurrency // _SHARD_CONNECTIONS)
        size = -(-config.max_concurrency // shards)
        pool = httpx.Limits(max_connections=size, max_keepalive_connections=size)
        tls = httpx.create_ssl_context()
        self._shards = [httpx.AsyncClient(headers=headers, limits=pool, verify=tls,
                                          timeout=httpx.Timeout(
                                              config.timeout, connect=config.connect_timeout))
                        for _ in range(shards)]
        self._busy = [0] * shards
        self._http = self._shards[0]  # for the pre-flight check
        if limits is None:  # a client on its own: its rates hold for itself alone
            settings = dataclasses.replace(LimitSettings.of(label, config), scope="process")
            limits = Limits(settings, store_path="")
        self._limits = limits
        self._paced = (config.requests_per_minute is not None
                       or config.tokens_per_minute is not None)
        self._paused_until = 0.0  # a Retry-After pauses every request, not just the one told
        self.retries = 0  # extra attempts made, for usage
        self.inflight = InFlight(config.max_concurrency, config.latency_tolerance)
        self.server_slots: int | None = None  # what the server said it serves at once

    def __repr__(self) -> str:
        return f"JudgeClient({self.config.base_url!r}, model={self.config.model!r})"

    def redact(self, text: str) -> str:
        """``text`` with the API key cut out (servers sometimes echo request headers)."""
        if self._secret and len(self._secret) >= 6 and self._secret in text:
            return text.replace(self._secret, "[api key]")
        return text

    async def close(self) -> None:
        for shard in self._shards:
            await shard.aclose()

    async def _post(self, url: str, body: dict[str, Any]) -> tuple[httpx.Response, float]:
        """The reply, and the seconds from when the request began to go out."""
        index = self._busy.index(min(self._busy))  # the least busy pool
        self._busy[index] += 1
        try:
            shard = self._shards[index]
            request = shard.build_request("POST", url, json=body)
            # The latency that tells a queue is the server's: from when the request begins to
            # go out, not counting a new connection or waiting for one.
            sending = _Sending()
            request.extensions["trace"] = sending
            response = await self._exchange(shard, request)
            return response, time.monotonic() - (sending.at or sending.started)
        finally:
            self._busy[index] -= 1

    async def _exchange(self, shard: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
        """Send one request and read its whole reply within the deadlines: its first byte
        (the status line) within ``first_byte_timeout``, all of it within ``timeout``.

        httpx's read timeout bounds each wait for the socket, so a server that trickles its
        reply would never time out by it alone; and it cannot tell a server that never starts
        answering from one that is still sending."""
        config = self.config
        started = time.monotonic()
        first = min(config.first_byte_timeout or config.timeout, config.timeout)
        try:
            response = await _within(shard.send(request, stream=True), first)
        except asyncio.TimeoutError:  # TimeoutError itself from 3.11 on
            if first < config.timeout:
                raise _Late(f"no reply began within {first:g} s") from None
            raise _Late(f"timed out after {config.timeout:g} s") from None
        try:
            await _within(response.aread(), config.timeout - (time.monotonic() - started))
        except asyncio.TimeoutError:
            raise _Late(f"timed out after {config.timeout:g} s") from None
        finally:
            await response.aclose()
        return response

    # ------------------------------------------------------------------ check

    async def check(self) -> None:
        """Raise ``JudgeError`` unless the endpoint answers and serves the configured model."""
        config = self.config
        url = f"{config.base_url}/models"
        try:
            response = await self._http.get(url, timeout=min(config.timeout, _CHECK_TIMEOUT))
        except httpx.HTTPError as exc:
            raise JudgeError(f"{self.label}: cannot reach the judge endpoint {config.base_url} "
                             f"({_transport_reason(exc)})") from None
        self._check_auth(response)
        served = _model_ids(response)
        if served is None:
            # No usable /models (some servers lack it): a one-token request tells instead.
            await self._probe()
            return
        if config.model in served:
            self._refuse_alias(served)
            await self._read_slots()
            return
        snapshots = sorted(m for m in served if m.startswith(config.model + "-"))
        listing = ", ".join(sorted(served)[:20]) or "(none)"
        raise JudgeError(f"{self.label}: model {config.model!r} is not served by "
                         f"{config.base_url}; it serves: {listing}"
                         + (f". Did you mean the snapshot {snapshots[-1]!r}?" if snapshots else ""))

    async def _read_slots(self) -> None:
        """Cap requests in flight at the server's slots where it states them (llama.cpp's
        ``/props``); a server that does not say keeps ``max_concurrency``."""
        root = re.sub(r"/v1$", "", self.config.base_url)
        try:
            response = await self._http.get(f"{root}/props",
                                            timeout=min(self.config.timeout, _CHECK_TIMEOUT))
            slots = response.json().get("total_slots") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return
        if isinstance(slots, int) and not isinstance(slots, bool) and slots >= 1:
            self.server_slots = slots
            if slots < self.config.max_concurrency:
                log.info("%s: the server serves %d requests at once: at most %d in flight "
                         "(max_concurrency %d)", self.label, slots, slots,
                         self.config.max_concurrency)
            self.inflight.cap(slots)

    def _refuse_alias(self, served: Sequence[str]) -> None:
        """Refuse a moving alias when dated snapshots of it are listed: recorded grades are
        keyed by the model id, so the id must name one fixed model."""
        if self.config.allow_alias:
            return
        dated = re.compile(re.escape(self.config.model) + r"-\d{4}-\d{2}-\d{2}")
        snapshots = sorted(m for m in served if dated.fullmatch(m))
        if snapshots:
            raise JudgeError(f"{self.label}: model {self.config.model!r} is an alias that moves; "
                             f"give an exact snapshot such as {snapshots[-1]!r} (or set "
                             f"allow_alias: true)")

    def _check_auth(self, response: httpx.Response) -> None:
        if response.status_code in (401, 403):
            source = (f"the key in ${self.config.api_key_env}" if self.config.api_key_env
                      else "requests without an API key (set api_key_env)")
            raise JudgeError(f"{self.label}: {self.config.base_url} rejected {source} "
                             f"(HTTP {response.status_code})")

    async def _probe(self) -> None:
        config = self.config
        body = {"model": config.model, "messages": [{"role": "user", "content": "Reply: {}"}],
                "max_tokens": 1, "temperature": 0}
        try:
            response = await self._http.post(f"{config.base_url}/chat/completions", json=body,
                                             timeout=min(config.timeout, _CHECK_TIMEOUT))
        except httpx.HTTPError as exc:
            raise JudgeError(f"{self.label}: cannot reach the judge endpoint {config.base_url} "
                             f"({_transport_reason(exc)})") from None
        self._check_auth(response)
        if response.status_code == 200 or response.status_code == 429:
            return  # answers (429: busy, but the model is there)
        raise JudgeError(f"{self.label}: {config.base_url} does not serve model "
                         f"{config.model!r}: HTTP {response.status_code}: "
                         f"{self.redact(_error_text(response))}")

    # ------------------------------------------------------------------ calls

    async def complete(self, messages: list[dict[str, str]], criteria: Sequence[Criterion],
                       overrides: dict[str, Any] | None = None) -> Reply:
        """One graded reply, retrying what is worth retrying; raises ``CallFailed`` otherwise.

        ``overrides`` replace request keys (a sample's seed, another reply schema)."""
        config = self.config
        body = request_body(config, messages, criteria)
        body.update(overrides or {})
        estimate = sum(len(m["content"]) for m in messages) // 4 + (config.max_tokens or 16)
        url = f"{config.base_url}/chat/completions"
        attempts = counted = 0
        unavailable_since: float | None = None
        while True:
            attempts += 1
            await self._wait_for_pause()
            if self._paced:
                await self._limits.pace(float(estimate))
            wait: float | None = None
            unavailable = False
            async with self.inflight.slot():
                try:
                    response, latency = await self._post(url, body)
                except httpx.ConnectTimeout:
                    reason, status = f"no connection within {config.connect_timeout:g} s", None
                except _Late as late:
                    reason, status = str(late), None
                    self.inflight.overloaded()
                except httpx.TimeoutException:
                    reason, status = f"timed out after {config.timeout:g} s", None
                    self.inflight.overloaded()
                except httpx.ConnectError as exc:  # refused: a server restarting, say
                    reason, status, unavailable = _transport_reason(exc), None, True
                except httpx.HTTPError as exc:
                    reason, status = _transport_reason(exc), None
                else:
                    status = response.status_code
                    if status == 200:
                        self.inflight.succeeded(latency)
                        return self._reply(response, attempts, estimate)
                    reason = f"HTTP {status}: {self.redact(_error_text(response))}"
                    if status not in _RETRY_STATUSES and status < 500:
                        raise CallFailed(f"judge call failed: {reason}", attempts=attempts,
                                         status=status, raw=self.redact(response.text[:4000]))
                    wait = _retry_after(response)
                    unavailable = status == 503
                    if status in (429, 503):
                        self.inflight.overloaded()
            # A server that is down or loading gets unavailable_wait seconds of retries that
            # do not use up ``retries`` (after that they count); every other failure counts.
            now = time.monotonic()
            if unavailable:
                unavailable_since = now if unavailable_since is None else unavailable_since
            within = unavailable and now - (unavailable_since or now) < config.unavailable_wait
            if not within:
                counted += 1
            if counted > config.retries:
                raise CallFailed(f"judge call failed after {attempts} attempt(s): {reason}",
                                 attempts=attempts, status=status)
            delay = self._backoff(attempts if within else counted, wait)
            log.info("%s: %s; retry %d/%d in %.2f s", self.label, reason, counted,
                     config.retries, delay)
            self.retries += 1
            await asyncio.sleep(delay)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            delay = min(retry_after, self.config.max_retry_wait)
            self._paused_until = max(self._paused_until, time.monotonic() + delay)
            return delay
        ceiling = min(_BACKOFF_CAP, self.config.retry_backoff * 2 ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)  # jitter keeps retries from arriving together

    async def _wait_for_pause(self) -> None:
        remaining = self._paused_until - time.monotonic()
        if remaining > 0:
            await asyncio.sleep(remaining)

    def _reply(self, response: httpx.Response, attempts: int, estimate: int) -> Reply:
        raw = response.text
        try:
            data = response.json()
            choice = data["choices"][0]
            message = choice["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise CallFailed(f"judge endpoint sent a reply that is not a chat completion: "
                             f"{snippet(self.redact(raw))}", attempts=attempts, status=200,
                             raw=self.redact(raw[:4000])) from None
        usage = data.get("usage") if isinstance(data, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        tokens_in, tokens_out = _usage(usage, estimate, content)
        if self.config.tokens_per_minute is not None:
            self._limits.adjust_tokens(tokens_in + tokens_out - estimate)
        if not isinstance(content, str):
            refusal = message.get("refusal") if isinstance(message, dict) else None
            what = f"refused: {snippet(str(refusal))}" if refusal else "sent no message content"
            raise CallFailed(f"judge {what}", attempts=attempts, status=200,
                             raw=self.redact(raw[:4000]), tokens_in=tokens_in,
                             tokens_out=tokens_out)
        logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
        tokens = logprobs.get("content") if isinstance(logprobs, dict) else None
        return Reply(content=self.redact(content), tokens_in=tokens_in, tokens_out=tokens_out,
                     attempts=attempts, model=data.get("model"),
                     finish_reason=choice.get("finish_reason"),
                     logprobs=tokens if isinstance(tokens, list) else None)


class _Sending:
    """An httpcore trace hook that notes when the request begins to be sent (on a connection
    that is open by then); never after the server could have it, so a latency measured
    from it is never less than the server's."""

    __slots__ = ("started", "at")

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.at: float | None = None

    async def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event == "http11.send_request_headers.started":
            self.at = time.monotonic()


class _Late(Exception):
    """An attempt that ran past the first-byte or the whole-reply deadline."""


async def _within(awaitable: Awaitable[_T], seconds: float) -> _T:
    """``await awaitable``, raising ``TimeoutError`` after ``seconds`` (cancelling it)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(max(0.0, seconds)):
            return await awaitable
    return await asyncio.wait_for(awaitable, max(0.0, seconds))  # pragma: no cover


def _usage(usage: Any, estimate: int, content: Any) -> tuple[int, int]:
    """Tokens from the reply's ``usage``; estimated (4 characters a token) when it has none."""
    if isinstance(usage, dict):
        tokens_in, tokens_out = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(tokens_in, int) and isinstance(tokens_out, int):
            return tokens_in, tokens_out
    out = len(content) // 4 + 1 if isinstance(content, str) else 0
    return estimate, out


def _model_ids(response: httpx.Response) -> list[str] | None:
    if response.status_code != 200:
        return None
    try:
        data = response.json()
        return [str(m["id"]) for m in data["data"]]
    except (ValueError, KeyError, TypeError):
        return None


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds the server asked to wait: ``retry-after-ms``, or ``Retry-After`` (seconds or date)."""
    millis = response.headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_text(response: httpx.Response) -> str:
    try:
        data = response.json()
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            return str(data["error"].get("message", ""))[:500]
        if isinstance(data, dict) and "detail" in data:
            return str(data["detail"])[:500]
    except ValueError:
        pass
    return " ".join(response.text.split())[:500]


def _transport_reason(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    if isinstance(exc, httpx.ConnectError):
        return f"connection failed: {exc}" if str(exc) else "connection failed"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
