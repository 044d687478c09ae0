"""The typer application and what every verb shares: consoles, error mapping, exit codes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import typer
from rich.console import Console

from ..errors import RewardsmithError

__all__ = ["app", "console", "err_console", "fail", "handle_errors", "EXIT_OK", "EXIT_FAILED",
           "EXIT_USAGE"]

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
console = Console()  # results (stdout)
err_console = Console(stderr=True)  # summaries, progress, errors

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print ``message`` as an error and return the exit to raise."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, markup=True,
                      soft_wrap=True)
    return typer.Exit(code)


def handle_errors(func: F) -> F:
    """Map rewardsmith's errors to a clear message and exit status 2 (bad usage or input)."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except RewardsmithError as exc:
            raise fail(_escape(str(exc))) from None
        except KeyboardInterrupt:
            err_console.print("interrupted")
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def _escape(text: str) -> str:
    return text.replace("[", "\\[")
