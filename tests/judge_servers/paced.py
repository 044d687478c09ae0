"""A chat-completions server on 127.0.0.1 whose timing is set by the test, byte by byte.

It is a real HTTP/1.1 server (asyncio, in a thread of its own). Each chat request waits its
turn for one of ``capacity`` slots (a server with N slots that does not say so, as vLLM: the
rest queue, and a queued request's clock runs), is served for ``service`` seconds, then the
reply goes out in the order the test set: ``head_delay`` seconds of silence before the status
line, the status line and headers, ``body_delay`` seconds more, and the body (one byte each
``trickle`` seconds when set). ``GET /v1/models`` lists ``judge-2024-01-01``.

Counters: ``requests`` (chat requests received), ``replies`` (bodies sent whole),
``peak_serving`` (most requests in service at once), ``peak_waiting`` (most requests queued
behind the slots at once) and ``queued`` (how many were waiting as each request arrived).
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from typing import Any

__all__ = ["MODEL", "PacedServer"]

MODEL = "judge-2024-01-01"


class PacedServer:
    def __init__(self, *, capacity: int = 1024, service: float = 0.0, jitter: float = 0.0,
                 head_delay: float = 0.0, body_delay: float = 0.0, trickle: float = 0.0,
                 content: str = '{"helpful": 0.5}'):
        self.capacity = capacity
        self.service = service
        self.jitter = jitter  # each service time is drawn from [service, service + jitter]
        self._random = random.Random(0)
        self.head_delay = head_delay
        self.body_delay = body_delay
        self.trickle = trickle
        self.content = content
        self.requests = 0
        self.replies = 0
        self.serving = 0
        self.waiting = 0
        self.peak_serving = 0
        self.peak_waiting = 0
        self.queued: list[int] = []  # requests already waiting as each request arrived
        self._loop = asyncio.new_event_loop()
        self._slots: asyncio.Semaphore | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> PacedServer:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("paced server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        assert self._thread is not None
        self._thread.join(10)
        self._loop.close()

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._slots = asyncio.Semaphore(self.capacity)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", 0, backlog=1024))
        self.port = int(self._server.sockets[0].getsockname()[1])
        ready.set()
        self._loop.run_forever()

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                path = lines[0].split(" ")[1]
                if path.endswith("/models"):
                    await self._send(writer, {"data": [{"id": MODEL}]}, paced=False)
                elif lines[0].startswith("GET "):  # no /props: it does not say its slots
                    await self._send(writer, {"error": {"message": "no such route"}},
                                     paced=False, status="404 Not Found")
                else:
                    await self._chat(writer, json.loads(body))
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _chat(self, writer: asyncio.StreamWriter, request: dict[str, Any]) -> None:
        assert self._slots is not None
        self.requests += 1
        queued = self._slots.locked()  # every slot is taken: this request waits
        self.queued.append(self.waiting)
        if queued:
            self.waiting += 1
            self.peak_waiting = max(self.peak_waiting, self.waiting)
        async with self._slots:
            if queued:
                self.waiting -= 1
            self.serving += 1
            self.peak_serving = max(self.peak_serving, self.serving)
            try:
                await asyncio.sleep(self.service + self._random.uniform(0, self.jitter))
            finally:
                self.serving -= 1
        reply = {"id": "paced", "object": "chat.completion", "model": request.get("model"),
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": self.content}}],
                 "usage": {"prompt_tokens": 10, "completion_tokens": 5}}
        await self._send(writer, reply, paced=True)
        self.replies += 1

    async def _send(self, writer: asyncio.StreamWriter, data: dict[str, Any], *,
                    paced: bool, status: str = "200 OK") -> None:
        body = json.dumps(data).encode()
        head = (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        if paced and self.head_delay:
            await asyncio.sleep(self.head_delay)
        writer.write(head)
        await writer.drain()
        if paced and self.body_delay:
            await asyncio.sleep(self.body_delay)
        if paced and self.trickle:
            for i in range(len(body)):
                writer.write(body[i:i + 1])
                await writer.drain()
                await asyncio.sleep(self.trickle)
        else:
            writer.write(body)
            await writer.drain()
