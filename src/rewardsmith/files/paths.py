"""Whether an output would overwrite an input: by path, through a symlink, or as a hard link."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..errors import ConfigError

__all__ = ["refuse_output_over_input", "same_file"]


def same_file(first: str | Path, second: str | Path) -> bool:
    """Whether two paths name one existing file (device and inode compared, links followed)."""
    try:
        a, b = os.stat(first), os.stat(second)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def refuse_output_over_input(output: str | Path | None,
                             inputs: Iterable[tuple[str, str | Path | None]]) -> None:
    """``ConfigError`` when ``output`` is one of ``inputs`` (``(what, path)`` pairs, e.g.
    ``("the rollouts", path)``), before anything is read or written. ``-`` and None are
    stdout and nothing, never an input."""
    if output is None or str(output) == "-":
        return
    for what, path in inputs:
        if path is not None and str(path) != "-" and same_file(output, path):
            how = "" if os.path.abspath(output) == os.path.abspath(path) else \
                " (the same file through a link)"
            raise ConfigError(f"the output {str(output)!r} is {what} {str(path)!r}{how}: "
                              f"writing it would destroy the input; choose another output")
