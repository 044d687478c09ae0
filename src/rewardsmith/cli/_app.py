"""The typer application and what every verb shares: consoles, error mapping, exit codes."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from functools import wraps
from typing import TYPE_CHECKING, Any, TypeVar, cast

import typer

from ..errors import RewardsmithError
from .streams import json_stream, write_json

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["app", "console", "err_console", "fail", "handle_errors", "EXIT_OK", "EXIT_FAILED",
           "EXIT_USAGE", "UsageProblem", "real_console"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

app = typer.Typer(
    name="rewardsmith",
    help="Rewards for RL post-training of language models: verifiers, rules, LLM judges, "
    "rubrics, and GRPO advantages that are exactly zero when a group teaches nothing.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


_PIPE_WIDTH = 1000


class _LazyConsole:
    """A rich ``Console`` made on first use: rich's console module costs a tenth of the CLI's
    start-up, and a quiet run to a file never prints through it."""

    def __init__(self, *, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def resolve(self) -> Console:
        if self._console is None:
            import os

            from rich import console as rich_console

            made = rich_console.Console(stderr=self._stderr)
            if not made.is_terminal and "COLUMNS" not in os.environ:
                # Piped or redirected: no screen to fit, so tables keep whole values (run ids,
                # headers) instead of folding them at rich's default 80 columns.
                made.width = _PIPE_WIDTH
            self._console = made
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.resolve(), name)


def real_console(target: Console) -> Console:
    """The rich ``Console`` behind ``console`` or ``err_console`` (for rich objects that need
    the real one, such as a progress bar)."""
    return target.resolve() if isinstance(target, _LazyConsole) else target


console = cast("Console", _LazyConsole(stderr=False))  # results (stdout)
err_console = cast("Console", _LazyConsole(stderr=True))  # summaries, progress, errors

F = TypeVar("F", bound=Callable[..., Any])


class UsageProblem(RewardsmithError):
    """Bad usage a verb found itself (conflicting options, a read-only store...)."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code


def fail(message: str, code: int = EXIT_USAGE) -> UsageProblem:
    """The error to raise for bad usage: ``handle_errors`` prints ``message`` (or makes it the
    ``--json`` document) and exits with ``code``."""
    return UsageProblem(message, code)


def _print_error(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {_escape(message)}", highlight=False, markup=True,
                      soft_wrap=True)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that every ``finally`` and ``with`` runs (outputs
    left untouched, runs marked ``interrupted``, workers stopped) before exit status 143."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated()


@contextlib.contextmanager
def _sigterm_as_exception() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def handle_errors(func: F) -> F:
    """Map rewardsmith's errors to a clear message and exit status 2 (bad usage or input);
    Ctrl-C and SIGTERM to a clean exit (130, 143). With ``--json``, an error is the one JSON
    document on the JSON stream (``{"error": ..., "exit_code": 2}``)."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with _sigterm_as_exception():
                return func(*args, **kwargs)
        except RewardsmithError as exc:
            code = exc.code if isinstance(exc, UsageProblem) else EXIT_USAGE
            if kwargs.get("as_json"):
                stream = json_stream(kwargs.get("output"))
                write_json({"error": str(exc), "exit_code": code}, stream)
                if stream is sys.stderr:
                    raise typer.Exit(code) from None
            _print_error(str(exc))
            raise typer.Exit(code) from None
        except Terminated:
            err_console.print("terminated")
            sys.exit(143)
        except KeyboardInterrupt:
            err_console.print("interrupted")
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def _escape(text: str) -> str:
    return text.replace("[", "\\[")
