"""``rewardsmith judge-serve``: the stand-in judge server, to try judges offline."""

from __future__ import annotations

import os

import typer

from ._app import app, err_console, fail, handle_errors

__all__ = ["judge_serve"]


@app.command("judge-serve")
@handle_errors
def judge_serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8001, "--port", help="Port to listen on (0: any free port)."),
    models: list[str] = typer.Option(["judge-2024-01-01"], "--model", help="A model id to "
                                     "serve (repeat for several); a request naming another is "
                                     "refused, as a real server would."),
    latency: float = typer.Option(0.0, "--latency", help="Seconds each reply takes."),
    slots: int | None = typer.Option(None, "--slots", help="Replies generated at once (the "
                                     "rest wait), stated at GET /props as llama.cpp does."),
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="Require the key in "
                                           "this environment variable as a Bearer token "
                                           "(default: no key, as local servers)."),
) -> None:
    """Serve a STAND-IN judge on an OpenAI-compatible /v1 endpoint, for trying judge rubrics
    without a model. Its grades are a digest of the graded text, stable and in range but not
    a judgement; point base_url at vLLM, llama.cpp's llama-server or a hosted API for real
    grades. Runs until Ctrl-C.

    Example: rewardsmith judge-serve --port 8001 --model judge-2024-01-01
    """
    from ..judge.standin import StandInJudge

    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise fail(f"--api-key-env: the environment variable {api_key_env} is not set")
    try:
        server = StandInJudge(host=host, port=port, models=models, latency=latency,
                              slots=slots, api_key=api_key)
    except ValueError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    err_console.print(f"stand-in judge (grades are a digest of the text, not a judgement) at "
                      f"{server.base_url}, serving {', '.join(server.models)}; Ctrl-C stops it",
                      markup=False, highlight=False, soft_wrap=True)
    try:
        server.serve_forever()
    finally:
        server.stop()
