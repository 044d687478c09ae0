"""Keeping stdout parseable when it carries results.

While scored lines go to stdout, anything else that would be printed there (a reward's
``print()``, a C library writing to fd 1, a subprocess started by a reward in this process,
worker processes started meanwhile) goes to stderr instead: the real stdout is duplicated for
the results writer, and fd 1 and ``sys.stdout`` point at stderr until the run ends.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import IO

__all__ = ["json_stream", "results_on_stdout", "write_json"]


def _fd(stream: IO[str]) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation, ValueError):
        return None  # not a real file (a test runner's capture): Python-level only


@contextlib.contextmanager
def results_on_stdout() -> Iterator[IO[str]]:
    """Yield the stream that reaches the real stdout; meanwhile stdout (fd 1 and
    ``sys.stdout``) is stderr."""
    original = sys.stdout
    original.flush()
    sys.stderr.flush()
    out_fd, err_fd = _fd(original), _fd(sys.stderr)
    if out_fd is None or err_fd is None:
        sys.stdout = sys.stderr
        try:
            yield original
        finally:
            sys.stdout = original
        return
    saved = os.dup(out_fd)
    results = open(os.dup(saved), "w", encoding="utf-8", newline="",
                   buffering=1 << 16, closefd=True)
    os.dup2(err_fd, out_fd)
    sys.stdout = sys.stderr
    try:
        yield results
    finally:
        try:
            results.close()  # flushes what the run wrote
        except BrokenPipeError:
            pass  # the reader went away (e.g. | head): nothing more to say to it
        finally:
            sys.stderr.flush()
            os.dup2(saved, out_fd)
            os.close(saved)
            sys.stdout = original


def json_stream(output: str | None) -> IO[str]:
    """Where a ``--json`` document goes: stdout, unless stdout carries the scored lines
    (``-o -``), then stderr."""
    return sys.stderr if output == "-" else sys.stdout


def write_json(document: object, stream: IO[str]) -> None:
    """One JSON document and a newline, nothing else."""
    import json

    stream.write(json.dumps(document, indent=2, allow_nan=False, default=str) + "\n")
    stream.flush()
