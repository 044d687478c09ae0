"""A stand-in judge: a small OpenAI-compatible server for trying judges offline, and for tests.

It is NOT a judge. It answers ``POST /v1/chat/completions`` with grades that are a digest of
what is graded (the fenced completion, or the whole prompt when there is none) and of the
criterion: the same text always gets the same grade, and a grade says nothing about quality.
It reads the criteria and their scales from the prompt rewardsmith sends (pointwise, group
and pairwise), so every reply is well-formed and within range whatever ``response_format``
asks. Pairwise verdicts compare the two responses' grades, so they do not depend on the
order shown. It also serves ``GET /v1/models`` and, with ``slots``, llama.cpp's ``GET /props``.

Run it with ``rewardsmith judge-serve``; point a judge's ``base_url`` at a real server (vLLM,
llama.cpp's ``llama-server``, a hosted API) to get real grades (see docs/judge.md).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["DEFAULT_MODEL", "StandInJudge", "stand_in_grade"]

DEFAULT_MODEL = "judge-2024-01-01"
_MAX_BODY = 16 * 1024 * 1024  # bytes: a request larger than this is refused
_CRITERION = re.compile(r"^- ([A-Za-z_][A-Za-z0-9_]*) \((a number from [^)]*|which response "
                        r"is better)\)", re.MULTILINE)
_SCALE = re.compile(r"a number from (-?[0-9.e+-]+) to (-?[0-9.e+-]+)(.*)")
_STEP = re.compile(r"in steps of (-?[0-9.e+-]+)")
_SECTION = re.compile(r"^### Response (\w+)\n", re.MULTILINE)
_FENCED = re.compile(r"<(response-[0-9a-f]{12})>\n(.*?)\n</\1>", re.DOTALL)


@dataclass(frozen=True)
class _Scale:
    low: float
    high: float
    step: float | None  # None: any whole number from low to high

    def pick(self, unit: float) -> float:
        """The grade at ``unit`` (in [0, 1)) of the way along the scale's allowed grades."""
        step = 1.0 if self.step is None else self.step
        count = int(round((self.high - self.low) / step)) + 1
        return round(self.low + step * min(count - 1, int(unit * count)), 10)


def stand_in_grade(criterion: str, graded: str, low: float = 0.0, high: float = 1.0,
                   step: float | None = 0.1) -> float:
    """The stand-in's grade of ``graded`` on ``criterion``: a digest, not a judgement."""
    digest = hashlib.blake2b(f"{criterion}\x1f{graded}".encode("utf-8", "surrogatepass"),
                             digest_size=8).digest()
    return _Scale(low, high, step).pick(int.from_bytes(digest, "big") / 2.0 ** 64)


def _scale(words: str) -> _Scale:
    found = _SCALE.match(words)
    if found is None:
        return _Scale(0.0, 1.0, 0.1)
    low, high, rest = float(found.group(1)), float(found.group(2)), found.group(3)
    if "0 fails, 1 passes" in rest:
        return _Scale(0.0, 1.0, 1.0)
    step = _STEP.search(rest)
    if step is not None:
        return _Scale(low, high, float(step.group(1)))
    return _Scale(low, high, None)


def _graded_text(section: str) -> str:
    """What is graded in a prompt or one response of it: its fenced blocks, else all of it."""
    blocks = [m.group(2) for m in _FENCED.finditer(section)]
    return "\n".join(blocks) if blocks else section


def answer(prompt: str) -> dict[str, Any]:
    """The reply's JSON for a prompt rewardsmith wrote (pointwise, group or pairwise)."""
    criteria = _CRITERION.findall(prompt)
    parts = _SECTION.split(prompt)
    sections = dict(zip(parts[1::2], parts[2::2], strict=True))
    if "A" in sections and "B" in sections:
        first, second = _graded_text(sections["A"]), _graded_text(sections["B"])
        verdicts: dict[str, Any] = {}
        for name, _ in criteria:
            a, b = stand_in_grade(name, first), stand_in_grade(name, second)
            verdicts[name] = "A" if a > b else "B" if b > a else "tie"
        return verdicts
    if sections:
        return {number: {name: _grade(name, words, _graded_text(text))
                         for name, words in criteria}
                for number, text in sections.items()}
    graded = _graded_text(prompt)
    return {name: _grade(name, words, graded) for name, words in criteria}


def _grade(name: str, words: str, graded: str) -> float | int:
    scale = _scale(words)
    value = stand_in_grade(name, graded, scale.low, scale.high, scale.step)
    return int(value) if value.is_integer() else value


class StandInJudge:
    """The stand-in server, run in a thread of its own (``with StandInJudge() as judge``) or
    in the foreground (``serve_forever``). ``requests`` counts chat requests answered."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0,
                 models: Iterable[str] = (DEFAULT_MODEL,), latency: float = 0.0,
                 slots: int | None = None, api_key: str | None = None):
        if latency < 0:
            raise ValueError(f"latency must be >= 0 seconds, not {latency}")
        if slots is not None and slots < 1:
            raise ValueError(f"slots must be at least 1, not {slots}")
        self.models = list(models) or [DEFAULT_MODEL]
        self.latency = latency
        self.slots = slots
        self.api_key = api_key
        self.requests = 0
        self._lock = threading.Lock()
        self._serving = threading.BoundedSemaphore(slots) if slots else None
        self._thread: threading.Thread | None = None
        self._http = ThreadingHTTPServer((host, port), _handler(self))
        self._http.daemon_threads = True

    @property
    def base_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def serve_forever(self) -> None:
        self._http.serve_forever()

    def start(self) -> StandInJudge:
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True,
                                        name="rewardsmith-stand-in-judge")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._http.shutdown()
            self._thread.join(10)
            self._thread = None
        self._http.server_close()

    def __enter__(self) -> StandInJudge:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def respond(self, path: str, authorization: str | None,
                body: bytes | None) -> tuple[int, dict[str, Any]]:
        """The status and JSON reply for one request (``body`` None for a GET)."""
        if self.api_key is not None and authorization != f"Bearer {self.api_key}":
            return 401, _error("missing or wrong API key (Authorization: Bearer ...)")
        route = path.split("?", 1)[0].rstrip("/")
        if body is None:
            if route in ("/v1/models", "/models"):
                return 200, {"object": "list", "data": [
                    {"id": m, "object": "model", "owned_by": "rewardsmith-stand-in"}
                    for m in self.models]}
            if route == "/props" and self.slots is not None:
                return 200, {"total_slots": self.slots}
            return 404, _error(f"no route GET {route}")
        if route not in ("/v1/chat/completions", "/chat/completions"):
            return 404, _error(f"no route POST {route}")
        try:
            request = json.loads(body)
            messages = request["messages"]
            prompt = "\n".join(str(m.get("content", "")) for m in messages)
            model = request["model"]
        except (ValueError, KeyError, TypeError, AttributeError):
            return 400, _error("expected a chat-completions request: a JSON object with "
                               "'model' and 'messages'")
        if model not in self.models:
            return 404, _error(f"model {model!r} is not served here; serving: "
                               f"{', '.join(self.models)}")
        return 200, self._complete(model, prompt, bool(request.get("logprobs")))

    def _complete(self, model: str, prompt: str, logprobs: bool) -> dict[str, Any]:
        if self._serving is not None:
            self._serving.acquire()  # at most ``slots`` answered at once; the rest queue
        try:
            if self.latency:
                time.sleep(self.latency)
            content = json.dumps(answer(prompt))
        finally:
            if self._serving is not None:
                self._serving.release()
        with self._lock:
            self.requests += 1
            number = self.requests
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": content}}
        if logprobs:
            choice["logprobs"] = {"content": [
                {"token": t, "logprob": 0.0, "top_logprobs": [{"token": t, "logprob": 0.0}]}
                for t in _tokens(content)]}
        return {"id": f"chatcmpl-stand-in-{number}", "object": "chat.completion",
                "created": int(time.time()), "model": model, "choices": [choice],
                "usage": {"prompt_tokens": len(prompt) // 4 + 1,
                          "completion_tokens": len(content) // 4 + 1,
                          "total_tokens": len(prompt) // 4 + len(content) // 4 + 2}}


def _tokens(text: str) -> Sequence[str]:
    """Token-like pieces: each number whole, each other character alone."""
    return re.findall(r"-?\d+(?:\.\d+)?|\s+|[^\d\s]", text)


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error"}}


def _handler(judge: StandInJudge) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as clients expect of a model server
        server_version = "rewardsmith-stand-in"

        def do_GET(self) -> None:
            self._reply(*judge.respond(self.path, self.headers.get("Authorization"), None))

        def do_POST(self) -> None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= _MAX_BODY:
                self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                            _error(f"a request body must have a Content-Length of at most "
                                   f"{_MAX_BODY} bytes"), close=True)
                return
            body = self.rfile.read(length)
            self._reply(*judge.respond(self.path, self.headers.get("Authorization"), body))

        def _reply(self, status: int, data: dict[str, Any], close: bool = False) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: a judge run makes thousands of requests

    return Handler
