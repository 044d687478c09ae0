"""A small OpenAI-compatible chat-completions server for judge tests and benchmarks.

It is a real HTTP/1.1 server on 127.0.0.1 (asyncio, in a thread of its own), not a mock: the
client under test opens sockets, sends requests and reads replies as it would from a vendor.
It grades deterministically, counts what it is asked, and misbehaves on request. Besides
pointwise grading it answers group prompts (``### Response 1`` ...), pair prompts
(``### Response A`` / ``B``: the response with the higher ``default_grade`` wins, or always
A with ``bias_first``), sends ``logprobs`` when asked, and serves reward-model routes with
the request and reply shapes of vLLM (``/score``, ``/classify``, also under ``/v1``) and
OpenRLHF's ``serve_rm`` (``/get_reward``)::

    with OpenAIServer(models=["judge-2024-01-01"]) as server:
        server.inject(Fault.status_code(429, retry_after="1"), Fault.reply("prose"))
        ... server.base_url ... server.billed ... server.asked ...

Run it alone (for benchmarks): ``python tests/support/openai_server.py --latency 0.2``; it
prints ``READY <base_url>``, serves ``GET /_stats`` with its counters, and stops when its
standard input closes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

__all__ = ["Fault", "OpenAIServer", "default_grade", "unfenced"]

_HOLD_LIMIT = 30.0  # seconds a held request waits at most
_CRITERION_LINE = re.compile(r"^- ([A-Za-z_][A-Za-z0-9_]*) \(a number from", re.MULTILINE)
_PAIR_LINE = re.compile(r"^- ([A-Za-z_][A-Za-z0-9_]*) \(which response is better\)", re.MULTILINE)
_SECTION = re.compile(r"^### Response (\w+)\n", re.MULTILINE)
_NOTE = "\n\nEach graded response is"  # the judge's note on the delimiters, then criteria
_FENCE = re.compile(r"<response-[0-9a-f]{12}>\n|\n</response-[0-9a-f]{12}>")
_TOKEN = re.compile(r"\d+|\s+|[^\d\s]")
_RM_ROUTES = ("/score", "/v1/score", "/classify", "/v1/classify", "/get_reward")
Response = tuple[int, "dict[str, Any] | str", dict[str, str]]


@dataclass(frozen=True)
class Fault:
    """What the server does to one chat request instead of answering it plainly."""

    kind: str  # status | slow | reply | drop
    status: int = 500
    retry_after: str | None = None
    retry_after_ms: str | None = None
    seconds: float = 0.0
    style: str = "json"
    echo_auth: bool = False

    @classmethod
    def status_code(cls, status: int, *, retry_after: str | None = None,
                    retry_after_ms: str | None = None, echo_auth: bool = False) -> Fault:
        """An error status; ``echo_auth`` puts the request's Authorization header in the body."""
        return cls("status", status=status, retry_after=retry_after,
                   retry_after_ms=retry_after_ms, echo_auth=echo_auth)

    @classmethod
    def slow(cls, seconds: float) -> Fault:
        return cls("slow", seconds=seconds)

    @classmethod
    def reply(cls, style: str) -> Fault:
        """``style``: json | prose | malformed | cut | out_of_range | not_completion | no_usage."""
        return cls("reply", style=style)

    @classmethod
    def drop(cls) -> Fault:
        """Close the connection without answering (a connection error for the client)."""
        return cls("drop")


def default_grade(criterion: str, prompt: str) -> float:
    """A grade in [0, 1] on a 0.05 grid that depends on the criterion and what is graded only."""
    graded = unfenced(prompt.split("\n\nCriteria:\n", 1)[0].split(_NOTE, 1)[0])
    digest = hashlib.blake2b(f"{criterion}\x1f{graded}".encode(), digest_size=4).digest()
    return round(int.from_bytes(digest, "big") % 21 * 0.05, 2)


class OpenAIServer:
    """Serves ``/v1/models`` and ``/v1/chat/completions``; counts and misbehaves on request.

    Counters (read them from any thread): ``requests`` (chat requests received), ``billed``
    (replies generated, what a vendor charges for), ``held`` (requests waiting at the hold
    point), ``asked`` (criteria of each billed reply), ``request_times``, ``bodies`` and
    ``auth_headers`` (of each chat request).
    """

    def __init__(self, *, models: Iterable[str] = ("judge-2024-01-01",),
                 api_key: str | None = None, latency: float = 0.0, list_models: bool = True,
                 style: str = "json", grade: Callable[[str, str], float] = default_grade,
                 bias_first: bool = False, slots: int | None = None):
        self.models = list(models)
        self.slots = slots  # stated at GET /props (as llama.cpp does) when set
        self.inflight = 0  # chat requests being answered now, and the most at once
        self.peak_inflight = 0
        self.api_key = api_key
        self.latency = latency
        self.list_models = list_models
        self.style = style
        self.grade = grade
        self.bias_first = bias_first
        self.reward_batches: list[int] = []  # rollouts in each reward-model request
        self._lock = threading.Lock()
        self._faults: deque[Fault] = deque()
        self._hold_after: int | None = None
        self._release = asyncio.Event()
        self._drop_held = False
        self.requests = 0
        self.billed = 0
        self.held = 0
        self.asked: list[list[str]] = []
        self.request_times: list[float] = []
        self.bodies: list[dict[str, Any]] = []
        self.auth_headers: list[str | None] = []
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._port = 0

    # ------------------------------------------------------------------ control

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    def start(self) -> OpenAIServer:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True,
                                        name="openai-test-server")
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("test server did not start")
        return self

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(
            self._connection, "127.0.0.1", 0, backlog=1024))
        self._port = int(self._server.sockets[0].getsockname()[1])
        ready.set()
        self._loop.run_forever()

    def stop(self) -> None:
        if self._thread is None:
            return
        self.release(drop=True)
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._thread = None

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def inject(self, *faults: Fault) -> None:
        """Faults for the next chat requests, one each, in order."""
        with self._lock:
            self._faults.extend(faults)

    def hold_after(self, billed: int | None) -> None:
        """Hold every request that arrives once ``billed`` replies went out (None: stop)."""
        with self._lock:
            self._hold_after = billed
            self._release = asyncio.Event()
            self._drop_held = False

    def release(self, *, drop: bool = False) -> None:
        """Let held requests go on, or (``drop``) close them unanswered and unbilled."""
        with self._lock:
            self._hold_after = None
            self._drop_held = drop
            event = self._release
        if self._thread is not None:
            self._loop.call_soon_threadsafe(event.set)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"requests": self.requests, "billed": self.billed, "held": self.held,
                    "asked": [list(a) for a in self.asked]}

    # ------------------------------------------------------------------ HTTP

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                request_line, *lines = head.decode("latin-1").split("\r\n")
                method, path, _version = request_line.split(" ", 2)
                headers = {name.strip().lower(): value.strip()
                           for name, _, value in (line.partition(":") for line in lines if line)}
                body = await reader.readexactly(int(headers.get("content-length") or 0))
                response = await self._route(method, path, headers, body)
                if response is None:
                    return  # close without answering
                status, payload, extra = response
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                head_out = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
                            "Content-Type: application/json", f"Content-Length: {len(data)}",
                            *(f"{k}: {v}" for k, v in extra.items())]
                writer.write(("\r\n".join(head_out) + "\r\n\r\n").encode("latin-1") + data)
                await writer.drain()
        except (asyncio.CancelledError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self._connections.discard(task)

    async def _route(self, method: str, path: str, headers: dict[str, str],
                     raw: bytes) -> Response | None:
        if method == "GET" and path == "/_stats":
            return 200, self.stats(), {}
        if method == "GET" and path == "/props" and self.slots is not None:
            return 200, {"total_slots": self.slots}, {}
        if method == "GET" and path == "/v1/models" and self.list_models:
            return self._unauthorized(headers) or (200, {"object": "list", "data": [
                {"id": m, "object": "model", "owned_by": "test"} for m in self.models]}, {})
        if method == "POST" and path in _RM_ROUTES:
            return await self._reward_model(path, raw)
        if method != "POST" or path != "/v1/chat/completions":
            return 404, {"error": {"message": f"no route {method} {path}"}}, {}
        auth = headers.get("authorization")
        with self._lock:
            self.requests += 1
            self.request_times.append(time.monotonic())
            self.auth_headers.append(auth)
        refused = self._unauthorized(headers)
        if refused is not None:
            return refused
        try:
            body = json.loads(raw)
        except ValueError:
            return 400, {"error": {"message": "body is not JSON"}}, {}
        with self._lock:
            self.bodies.append(body)
        if body.get("model") not in self.models:
            return 404, {"error": {"message": f"The model `{body.get('model')}` does not exist",
                                   "code": "model_not_found"}}, {}
        with self._lock:
            fault = self._faults.popleft() if self._faults else None
        if fault is not None and fault.kind == "drop":
            return None
        if fault is not None and fault.kind == "status":
            extra = {}
            if fault.retry_after is not None:
                extra["Retry-After"] = fault.retry_after
            if fault.retry_after_ms is not None:
                extra["retry-after-ms"] = fault.retry_after_ms
            message = f"injected {fault.status}"
            if fault.echo_auth:
                message += f" (request had Authorization: {auth})"
            return fault.status, {"error": {"message": message}}, extra
        with self._lock:
            self.inflight += 1
            self.peak_inflight = max(self.peak_inflight, self.inflight)
        try:
            if not await self._hold():
                return None  # the client is gone: nothing generated, nothing billed
            delay = self.latency + (fault.seconds if fault and fault.kind == "slow" else 0.0)
            if delay:
                await asyncio.sleep(delay)
            style = fault.style if fault and fault.kind == "reply" else self.style
            return self._answer(body, style)
        finally:
            with self._lock:
                self.inflight -= 1

    def _unauthorized(self, headers: dict[str, str]) -> Response | None:
        if self.api_key is None or headers.get("authorization") == f"Bearer {self.api_key}":
            return None
        return 401, {"error": {"message": "Incorrect API key provided",
                               "type": "invalid_request_error"}}, {}

    async def _hold(self) -> bool:
        """Wait at the hold point if one is set and reached; False: drop this request."""
        with self._lock:
            if self._hold_after is None or self.billed < self._hold_after:
                return True
            self.held += 1
            event = self._release
        try:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(event.wait(), _HOLD_LIMIT)
        finally:
            with self._lock:
                self.held -= 1
        return not self._drop_held

    def _answer(self, body: dict[str, Any], style: str) -> Response:
        prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        sections = _sections(prompt)
        if "A" in sections and "B" in sections:
            criteria = _PAIR_LINE.findall(prompt)
            verdicts = {c: self._prefer(c, sections["A"], sections["B"]) for c in criteria}
            content = json.dumps(verdicts)
        elif sections:
            criteria = _CRITERION_LINE.findall(prompt)
            content = json.dumps({number: {c: self.grade(c, text) for c in criteria}
                                  for number, text in sections.items()})
        else:
            criteria = _criteria_asked(body, prompt)
            grades: dict[str, float] = {c: self.grade(c, prompt) for c in criteria}
            if style == "out_of_range" and criteria:
                grades[criteria[0]] = 7.5
            content = json.dumps(grades)
        if style == "prose":
            content = (f"Let me look at this {{carefully}}. My grades:\n```json\n{content}\n```\n"
                       f"That is all.")
        elif style in ("malformed", "cut"):  # cut: as a reply stopped at max_tokens
            content = content[: max(1, len(content) // 2)]
        with self._lock:
            self.billed += 1
            self.asked.append(criteria)
            number = self.billed
        if style == "not_completion":
            return 200, "<html>upstream proxy error</html>", {}
        choice: dict[str, Any] = {"index": 0,
                                  "finish_reason": "length" if style == "cut" else "stop",
                                  "message": {"role": "assistant", "content": content}}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": _logprobs(content, int(body.get("top_logprobs")
                                                                     or 0))}
        reply: dict[str, Any] = {
            "id": f"chatcmpl-{number}", "object": "chat.completion",
            "created": int(time.time()), "model": body.get("model"), "choices": [choice],
        }
        if style != "no_usage":
            reply["usage"] = {"prompt_tokens": len(prompt) // 4 + 1,
                              "completion_tokens": len(content) // 4 + 1,
                              "total_tokens": len(prompt) // 4 + len(content) // 4 + 2}
        return 200, reply, {}


    def _prefer(self, criterion: str, first: str, second: str) -> str:
        if self.bias_first:
            return "A"
        a, b = self.grade(criterion, first), self.grade(criterion, second)
        return "A" if a > b else "B" if b > a else "tie"

    def reward(self, text: str) -> float:
        """The reward-model score of one text (what every reward-model route returns)."""
        return self.grade("reward", text)

    async def _reward_model(self, path: str, raw: bytes) -> Response | None:
        try:
            body = json.loads(raw)
        except ValueError:
            return 400, {"error": {"message": "body is not JSON"}}, {}
        with self._lock:
            self.requests += 1
            self.bodies.append(body)
            fault = self._faults.popleft() if self._faults else None
        if fault is not None and fault.kind == "status":
            return fault.status, {"error": {"message": f"injected {fault.status}"}}, {}
        if fault is not None and fault.kind == "drop":
            return None
        if not await self._hold():
            return None
        if path == "/get_reward":  # OpenRLHF serve_rm: {"query": [...], "prompts": [...]}
            texts = body.get("query")
            if not isinstance(texts, list):
                return 400, {"error": "query must be a list"}, {}
            rewards = [self.reward(str(t)) for t in texts]
            self._bill(len(texts))
            return 200, {"rewards": rewards, "scores": rewards}, {}
        if body.get("model") not in self.models:
            return 404, {"error": {"message": f"The model `{body.get('model')}` does not "
                                              f"exist"}}, {}
        if path.endswith("/score"):  # vLLM: text_1 (one or many) against each text_2
            first, second = body.get("text_1"), body.get("text_2")
            seconds = second if isinstance(second, list) else [second]
            firsts = first if isinstance(first, list) else [first] * len(seconds)
            data = [{"index": i, "object": "score", "score": self.reward(f"{a}\n{b}")}
                    for i, (a, b) in enumerate(zip(firsts, seconds, strict=True))]
        else:  # vLLM classify: input (one or many) -> probs per class
            inputs = body.get("input")
            inputs = inputs if isinstance(inputs, list) else [inputs]
            data = []
            for i, text in enumerate(inputs):
                p = self.reward(str(text))
                data.append({"index": i, "label": "good" if p >= 0.5 else "bad",
                             "probs": [1.0 - p, p], "num_classes": 2})
        self._bill(len(data))
        return 200, {"id": "rm-1", "object": "list", "created": int(time.time()),
                     "model": body.get("model"), "data": data,
                     "usage": {"prompt_tokens": 10 * len(data), "total_tokens": 10 * len(data),
                               "completion_tokens": 0}}, {}

    def _bill(self, size: int) -> None:
        with self._lock:
            self.billed += 1
            self.reward_batches.append(size)


def _sections(prompt: str) -> dict[str, str]:
    """The responses of a group or pair prompt by their label (1, 2, ... or A, B)."""
    found = list(_SECTION.finditer(prompt))
    out: dict[str, str] = {}
    last = prompt.find(_NOTE)  # the note after the last response
    for index, match in enumerate(found):
        end = (found[index + 1].start() if index + 1 < len(found)
               else last if last != -1 else prompt.find("\nCriteria:"))
        out[match.group(1)] = unfenced(prompt[match.end():end].strip())
    return out


def unfenced(text: str) -> str:
    """``text`` without the judge's delimiter lines around each response."""
    return _FENCE.sub("", text)


def _logprobs(content: str, top: int) -> list[dict[str, Any]]:
    """Per-token logprobs; an integer token's alternatives are itself (0.6), +1 (0.3), -1 (0.1)."""
    tokens = []
    for piece in _TOKEN.findall(content):
        entry: dict[str, Any] = {"token": piece, "logprob": 0.0, "bytes": list(piece.encode())}
        if piece.isdigit() and top:
            value = int(piece)
            entry["logprob"] = math.log(0.6)
            entry["top_logprobs"] = [{"token": str(v), "logprob": math.log(p)}
                                     for v, p in ((value, 0.6), (value + 1, 0.3),
                                                  (value - 1, 0.1)) if v >= 0][:top]
        elif top:
            entry["top_logprobs"] = [{"token": piece, "logprob": 0.0}]
        tokens.append(entry)
    return tokens


def _criteria_asked(body: dict[str, Any], prompt: str) -> list[str]:
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict) and properties:
        return list(properties)
    return _CRITERION_LINE.findall(prompt)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="OpenAI-compatible test server")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--model", action="append", default=None)
    args = parser.parse_args(argv)
    server = OpenAIServer(models=args.model or ["judge-2024-01-01"], latency=args.latency)
    server.start()
    print(f"READY {server.base_url}", flush=True)
    try:
        sys.stdin.read()  # serve until the parent closes our standard input (or dies)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
