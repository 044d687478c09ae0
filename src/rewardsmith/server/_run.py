"""Running the server: in the foreground (``rewardsmith serve``) or in a background thread.

The listening sockets are bound before anything else starts (``_listen.listen``), so a busy
port is a clear ``ConfigError`` up front instead of a log line from inside uvicorn after the
server has announced itself.
"""

from __future__ import annotations

import logging
import math
import socket
import threading
import time
from typing import Any

import uvicorn
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from ..engine import Engine
from ._app import build_app
from ._config import ServerConfig
from ._listen import listen
from ._read_timeout import with_read_timeout

__all__ = ["RewardServer", "ServerThread", "make_server"]

_log = logging.getLogger("uvicorn.error")


class RewardServer(uvicorn.Server):
    """uvicorn's server, serving sockets bound before it starts (see ``listen``)."""

    def run(self, sockets: list[socket.socket] | None = None) -> None:
        if sockets is None:
            sockets = listen(self.config.host, self.config.port)
        super().run(sockets=sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and sockets:
            # uvicorn announces only the sockets it binds itself; say where this one listens,
            # in uvicorn's words, for the scripts that wait for that line.
            for sock in sockets:
                host, port = sock.getsockname()[:2]
                shown = f"[{host}]" if ":" in host else host
                _log.info("Uvicorn running on http://%s:%d (Press CTRL+C to quit)", shown, port)


def make_server(config: ServerConfig, engine: Engine | None = None, *,
                access_log: bool = False) -> RewardServer:
    """A uvicorn server for ``config``; it closes the engine when it shuts down.

    On SIGINT/SIGTERM uvicorn stops accepting connections, lets the requests in flight finish
    (up to ``graceful_timeout`` seconds; those still running then get 503), then the app's
    shutdown closes the engine. A request must arrive within ``read_timeout`` seconds.
    """
    engine = engine if engine is not None else Engine(config.rubric, workers=config.workers)
    asgi, _ = build_app(config, engine)
    protocol = with_read_timeout(AutoHTTPProtocol, config.read_timeout,
                                 asgi.metrics.rejected.labels("read_timeout").inc)
    uv_config = uvicorn.Config(
        asgi, host=config.host, port=config.port, log_level=config.log_level,
        access_log=access_log, lifespan="on", http=protocol,
        timeout_graceful_shutdown=math.ceil(config.graceful_timeout),
        # A trainer keeps its connection open between steps.
        timeout_keep_alive=30,
    )
    return RewardServer(uv_config)


class ServerThread:
    """The server in a background thread (tests, notebooks): ``with ServerThread(cfg) as s:``.

    ``config.port=0`` picks a free port; ``url`` tells which. A port in use raises
    ``ConfigError`` here, before any engine starts.
    """

    def __init__(self, config: ServerConfig, engine: Engine | None = None):
        self._sockets = listen(config.host, config.port)
        try:
            self.server = make_server(config, engine)
        except BaseException:
            for sock in self._sockets:
                sock.close()
            raise
        self._thread = threading.Thread(target=self.server.run, args=(self._sockets,),
                                        name="rewardsmith-server", daemon=True)
        self.url = ""

    def start(self, timeout: float = 20.0) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the reward server stopped while starting (see its log)")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the reward server did not start within {timeout:g} s")
            time.sleep(0.01)
        host, port = self._sockets[0].getsockname()[:2]
        self.url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Shut down gracefully: requests in flight finish first."""
        self.server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
        else:
            for sock in self._sockets:  # never started: the sockets are still ours to close
                sock.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
