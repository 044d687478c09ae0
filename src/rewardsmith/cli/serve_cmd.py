"""``rewardsmith serve``: the reward server."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from ._app import app, err_console, fail, handle_errors
from .backend_opts import BACKEND_HELP, RAY_ADDRESS_HELP, use_backend
from .score_cmd import load_rubric


@app.command("serve")
@handle_errors
def serve(
    rubric: Path | None = typer.Option(None, "--rubric", "-r", help="Rubric YAML file."),
    reward: str | None = typer.Option(None, "--reward", help="Serve one reward instead of a "
                                      "rubric (built-in name or import path)."),
    param: list[str] | None = typer.Option(None, "--param", "-p", help="k=v for --reward."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0 for "
                             "every interface: set --token-env then)."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="Port (0: any free port)."),
    token_env: str | None = typer.Option(None, "--token-env", help="Require 'Authorization: "
                                         "Bearer <token>', the token read from this "
                                         "environment variable."),
    workers: int | None = typer.Option(None, "--workers", "-w", min=0,
                                       help="Worker processes for rewards (default: one per "
                                       "core; 0 runs them in the server process)."),
    backend: str | None = typer.Option(None, "--backend", help=BACKEND_HELP),
    ray_address: str | None = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    max_batch: int = typer.Option(4096, "--max-batch", min=1,
                                  help="Most rollouts in one request (422 past it)."),
    max_body_bytes: int = typer.Option(64 * 1024 * 1024, "--max-body-bytes", min=1,
                                       help="Largest request body (413 past it)."),
    queue_limit: int = typer.Option(32768, "--queue-limit", min=1,
                                    help="Rollouts accepted and not yet scored, over all "
                                    "requests (429 with Retry-After past it)."),
    request_timeout: float = typer.Option(120.0, "--request-timeout", min=0.001,
                                          help="Seconds one request may take (504 past it)."),
    graceful_timeout: float = typer.Option(30.0, "--graceful-timeout", min=0.001,
                                           help="On SIGTERM, seconds to let requests in "
                                           "flight finish (503 with Retry-After after)."),
    read_timeout: float = typer.Option(30.0, "--read-timeout", min=0.001,
                                       help="Seconds a request's headers and body may take "
                                       "to arrive (408 and closed past it)."),
    access_log: bool = typer.Option(False, "--access-log", help="Log every request."),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level."),
) -> None:
    """Serve a rubric over HTTP: /score, /get_reward (OpenRLHF), /slime, /health, /metrics.

    Example: rewardsmith serve --rubric rubric.yaml --port 8000 --token-env REWARD_TOKEN
    """
    from ..server import ServerConfig, listen, require_server_extra
    from ..server import serve as run_server

    require_server_extra()
    token = None
    if token_env is not None:
        token = os.environ.get(token_env, "")
        if not token.strip():
            raise fail(f"--token-env {token_env}: the environment variable {token_env} is not "
                       "set or is empty")
    use_backend(backend, ray_address)
    chosen = load_rubric(rubric, reward, param)
    config = ServerConfig(chosen, host=host, port=port, token=token, workers=workers,
                          max_batch=max_batch, max_body_bytes=max_body_bytes,
                          queue_limit=queue_limit, request_timeout=request_timeout,
                          graceful_timeout=graceful_timeout, read_timeout=read_timeout,
                          log_level=log_level)
    sockets = listen(host, port)  # a port in use: exit 2 here, before anything starts
    from ..engine import Engine

    try:
        engine = Engine(chosen, workers=workers)
        try:
            engine.check()  # judges and other evaluators fail here, before anything is served
        except BaseException:
            engine.close()
            raise
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    if host not in ("127.0.0.1", "localhost", "::1") and token is None:
        err_console.print(f"[yellow]warning:[/] listening on {host} without --token-env: "
                          "anyone who can reach this port can score with your rubric")
    bound = sockets[0].getsockname()[1]  # the real port when --port 0
    err_console.print(f"serving rubric {chosen.name!r} ({', '.join(chosen.names)}) on "
                      f"http://{host}:{bound}  (docs: /docs, metrics: /metrics)")
    run_server(config, engine, access_log=access_log, sockets=sockets)
