"""Running the server: in the foreground (``rewardsmith serve``) or in a background thread."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import uvicorn

from ..engine import Engine
from ._app import build_app
from ._config import ServerConfig

__all__ = ["ServerThread", "make_server"]


def make_server(config: ServerConfig, engine: Engine | None = None, *,
                access_log: bool = False) -> uvicorn.Server:
    """A uvicorn server for ``config``; it closes the engine when it shuts down.

    On SIGINT/SIGTERM uvicorn stops accepting connections, lets the requests in flight finish
    (up to ``graceful_timeout`` seconds), then the app's shutdown closes the engine.
    """
    engine = engine if engine is not None else Engine(config.rubric, workers=config.workers)
    asgi, _ = build_app(config, engine)
    uv_config = uvicorn.Config(
        asgi, host=config.host, port=config.port, log_level=config.log_level,
        access_log=access_log, lifespan="on",
        timeout_graceful_shutdown=math.ceil(config.graceful_timeout),
        # A trainer keeps its connection open between steps.
        timeout_keep_alive=30,
    )
    return uvicorn.Server(uv_config)


class ServerThread:
    """The server in a background thread (tests, notebooks): ``with ServerThread(cfg) as s:``.

    ``config.port=0`` picks a free port; ``url`` tells which.
    """

    def __init__(self, config: ServerConfig, engine: Engine | None = None):
        self.server = make_server(config, engine)
        self._thread = threading.Thread(target=self.server.run, name="rewardsmith-server",
                                        daemon=True)
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
        host, port = self.server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Shut down gracefully: requests in flight finish first."""
        self.server.should_exit = True
        self._thread.join(timeout)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
