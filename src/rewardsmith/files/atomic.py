"""Atomic replacement of output files: a file the user owns changes only when the new one is
complete.

The new content goes to a temporary file in the same folder (so the final ``rename`` never
crosses a file system), is flushed and fsynced, and is renamed over the target; the folder is
fsynced so the rename itself survives a power loss. On any exception, ``KeyboardInterrupt`` or
``SystemExit`` (the CLI turns SIGTERM into one) the temporary file is removed and the old file
is left exactly as it was. A symlink is followed: its target is replaced, the link stays.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from ..errors import ConfigError

__all__ = ["atomic_path", "atomic_text", "final_path"]

_TEMP_SUFFIX = ".tmp"


def final_path(path: str | Path) -> Path:
    """The file that will really be replaced: ``path``, or the file its symlink points to."""
    return Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)


def _fsync_folder(folder: Path) -> None:
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # some file systems cannot open a folder; the rename is done all the same
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def _mode_for(target: Path) -> int:
    """The new file's permissions: the old file's, or what ``open`` would give a new one."""
    try:
        return os.stat(target).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; write the whole file there. When the block ends
    normally the temporary file is fsynced and renamed onto ``path``; otherwise it is removed
    and ``path`` is untouched. Errors creating or renaming are ``ConfigError`` naming the path."""
    target = final_path(path)
    folder = target.parent
    try:
        descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=_TEMP_SUFFIX,
                                                 dir=folder)
    except OSError as exc:
        raise ConfigError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    os.close(descriptor)
    temp = Path(temporary)
    try:
        yield temp
        try:
            os.chmod(temp, _mode_for(target))
            with open(temp, "rb+") as handle:
                os.fsync(handle.fileno())
            os.replace(temp, target)
        except OSError as exc:
            raise ConfigError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from exc
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    _fsync_folder(folder)


class _OutputText(io.TextIOWrapper):
    """A text file whose failed writes (a full disk, a quota, a size limit) are an error
    naming the output, not a traceback from wherever the write happened."""

    shown = ""

    def _failed(self, exc: OSError) -> ConfigError:
        return ConfigError(f"cannot write {self.shown!r}: {exc.strerror or exc} (nothing was "
                           f"replaced; an older file there is unchanged)")

    def write(self, text: str) -> int:
        try:
            return super().write(text)
        except OSError as exc:
            raise self._failed(exc) from exc

    def flush(self) -> None:
        try:
            super().flush()
        except OSError as exc:
            raise self._failed(exc) from exc


@contextlib.contextmanager
def atomic_text(path: str | Path, *, encoding: str = "utf-8") -> Iterator[IO[str]]:
    """Like ``atomic_path``, yielding the temporary file open for writing text. A write that
    fails (``ENOSPC``, ``EDQUOT``, ``EFBIG``) raises ``ConfigError`` naming ``path``."""
    with atomic_path(path) as temp:
        handle = _OutputText(open(temp, "wb"), encoding=encoding, newline="")
        handle.shown = str(path)
        try:
            yield handle
            handle.flush()
        finally:
            with contextlib.suppress(OSError, ConfigError):
                handle.close()
