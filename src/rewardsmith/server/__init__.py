"""The reward server: ``rewardsmith serve --rubric rubric.yaml``.

Routes: ``POST /score`` (rollouts or whole groups -> scores, components, advantages),
``POST /get_reward`` (OpenRLHF's remote reward model; also ``/openrlhf``), ``POST /slime``
(slime/Miles ``remote_rm``), ``GET /health``, ``GET /metrics`` (Prometheus) and
``GET /openapi.json``. FastAPI, uvicorn and prometheus-client come with
``pip install 'rewardsmith[server]'``; they are imported only when a server is built.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

from ._config import ServerConfig, require_server_extra

if TYPE_CHECKING:
    from ..engine import Engine
    from ._run import ServerThread

__all__ = ["ServerConfig", "ServerThread", "create_app", "listen", "require_server_extra",
           "serve"]


def create_app(config: ServerConfig, engine: Engine | None = None) -> Any:
    """The ASGI application for ``config`` (for any ASGI server); it owns the engine.

    ``read_timeout`` and the port checks belong to ``serve``/``ServerThread``: under another
    ASGI server, set that server's own header and body timeouts."""
    require_server_extra()
    from ..engine import Engine
    from ._app import build_app

    asgi, _ = build_app(config, engine if engine is not None else
                        Engine(config.rubric, workers=config.workers))
    return asgi


def listen(host: str, port: int) -> list[socket.socket]:
    """Bind the server's sockets now: a port in use is a ``ConfigError`` before anything runs."""
    from ._listen import listen as bind

    return bind(host, port)


def serve(config: ServerConfig, engine: Engine | None = None, *, access_log: bool = False,
          sockets: list[socket.socket] | None = None) -> None:
    """Serve in the foreground until SIGINT/SIGTERM; requests in flight finish first.

    ``sockets`` from ``listen`` (default: bound here, before the engine starts)."""
    require_server_extra()
    if sockets is None:
        sockets = listen(config.host, config.port)
    from ._run import make_server

    try:
        server = make_server(config, engine, access_log=access_log)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    server.run(sockets)


def __getattr__(name: str) -> Any:
    if name == "ServerThread":
        require_server_extra()
        from ._run import ServerThread

        return ServerThread
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
