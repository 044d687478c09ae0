"""The files a reward reads besides the rollout, in the key of its stored results.

A reward that grades a task folder, a repository or a workspace named by a *path* in the
rollout (``answer.repo``, ``metadata.workspace``) gives the same verdict only while those files
are the same. A stored result is therefore kept under a key made of the rollout's content *and*
a digest of what those paths hold now: a task edited in place, or a workspace path reused for
another agent's state, misses the store and is computed again instead of replaying an old
verdict.

A reward declares what it reads with ``@reads_files(files_of)``: ``files_of(rollout, params)``
returns the paths (files or folders; relative ones from the working folder) for one rollout.
The digest covers, for a file, its bytes and whether it is executable; for a folder, every
entry under it by relative name (files by content and executable bit, links by their target,
not followed, empty folders by name); for a path that is not there, that it is missing. File
contents are hashed once per process while their size, times and inode stay the same.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from ..types import Rollout

__all__ = ["FilesOf", "FileDigests", "files_of", "keys_with_files", "reads_files"]

FilesOf = Callable[[Rollout, Mapping[str, Any]], Iterable["str | os.PathLike[str]"]]
F = TypeVar("F", bound=Callable[..., Any])

_ATTR = "__rewardsmith_reads_files__"
_CHUNK = 1 << 20
# File digests kept per process, by (path, device, inode, size, mtime, ctime).
_KNOWN: dict[tuple[str, int, int, int, int, int], str] = {}
_KNOWN_MAX = 200_000
# What one path may hold for a digest to be made (the digest is made before any call, outside
# its time limit): past this, the rollout's key is one of a kind, and the reward's own limits
# decide. A policy's huge or sparse workspace cannot stall scoring.
MAX_BYTES = 2 << 30
MAX_ENTRIES = 200_000


class _TooLarge(Exception):
    pass


def reads_files(files: FilesOf) -> Callable[[F], F]:
    """Declare the files a reward reads besides the rollout: ``files(rollout, params)`` gives
    their paths for one rollout (``params``: the component's params). Stored results of the
    reward are then reused only while those files hold what they held when it ran."""

    def mark(func: F) -> F:
        setattr(func, _ATTR, files)
        return func

    return mark


def files_of(func: Callable[..., Any]) -> FilesOf | None:
    """The ``files`` a reward declared with ``reads_files``, or None."""
    found = getattr(func, _ATTR, None)
    return found if callable(found) else None


class FileDigests:
    """Digests of paths, each path read once per use (a batch, a rescore): many rollouts of
    one task name the same repository, which is walked once."""

    def __init__(self) -> None:
        self._paths: dict[str, str] = {}

    def of(self, paths: Iterable[str | os.PathLike[str]]) -> str:
        """One digest for all ``paths``, in the order given; ``ValueError`` when one holds
        more than ``MAX_BYTES`` or ``MAX_ENTRIES``."""
        whole = hashlib.blake2b(digest_size=16)
        for path in paths:
            full = os.path.abspath(os.path.expanduser(os.fspath(path)))
            found = self._paths.get(full)
            if found is None:
                try:
                    found = _path_digest(full, [MAX_BYTES, MAX_ENTRIES])
                except _TooLarge:
                    found = "too-large"
                self._paths[full] = found
            if found == "too-large":
                raise ValueError(f"{full} holds more than a digest is made of")
            whole.update(f"{full}\0{found}\0".encode("utf-8", "surrogatepass"))
        return whole.hexdigest()


def keys_with_files(files: FilesOf | None, params: Mapping[str, Any],
                    rollouts: Sequence[Rollout], keys: Sequence[str],
                    digests: FileDigests | None = None) -> list[str]:
    """The keys a reward's stored results go under: each rollout's content key with a digest
    of the files it reads (``keys`` themselves for a reward that declared none). A rollout
    whose paths cannot be found out (a malformed task, say: the reward will say what is wrong)
    or whose files are too large to read before the call, gets a key of its own that nothing
    matches: its result is never reused."""
    if files is None:
        return list(keys)
    digests = digests if digests is not None else FileDigests()
    out = []
    for rollout, key in zip(rollouts, keys, strict=True):
        try:
            part = digests.of(files(rollout, params))
        except Exception:  # noqa: BLE001 - the reward reports the same input itself
            # Never the same twice: a rollout whose files cannot be read must not replay a
            # result stored for other files that failed the same way.
            part = f"unread:{secrets.token_hex(16)}"
        out.append(hashlib.blake2b(f"{key}\0files\0{part}".encode("utf-8", "surrogatepass"),
                                   digest_size=16).hexdigest())
    return out


def _path_digest(path: str, budget: list[int]) -> str:
    try:
        info = os.lstat(path)
    except OSError:
        return "missing"
    if stat.S_ISLNK(info.st_mode):
        try:
            info = os.stat(path)  # the path given is followed; links inside a folder are not
        except OSError:
            return f"dangling:{_readlink(path)}"
    if stat.S_ISDIR(info.st_mode):
        return _folder_digest(path, budget)
    if stat.S_ISREG(info.st_mode):
        _spend(budget, info.st_size)
        return _file_digest(path, info)
    return f"special:{stat.S_IFMT(info.st_mode)}"


def _spend(budget: list[int], size: int) -> None:
    """Take one entry of ``size`` bytes from ``budget`` ([bytes, entries] left)."""
    budget[0] -= size
    budget[1] -= 1
    if budget[0] < 0 or budget[1] < 0:
        raise _TooLarge


def _folder_digest(root: str, budget: list[int]) -> str:
    whole = hashlib.blake2b(digest_size=16)
    for folder, subfolders, names in os.walk(root, onerror=_raise):
        subfolders.sort()
        relative = os.path.relpath(folder, root)
        _spend(budget, 0)
        whole.update(f"d\0{relative}\0".encode("utf-8", "surrogatepass"))
        for name in sorted(names + [s for s in subfolders
                                    if os.path.islink(os.path.join(folder, s))]):
            full = os.path.join(folder, name)
            entry = os.path.join(relative, name)
            info = os.lstat(full)
            _spend(budget, info.st_size if stat.S_ISREG(info.st_mode) else 0)
            if stat.S_ISLNK(info.st_mode):
                part = f"l:{_readlink(full)}"
            elif stat.S_ISREG(info.st_mode):
                part = f"f:{_file_digest(full, info)}"
            else:
                part = f"s:{stat.S_IFMT(info.st_mode)}"
            whole.update(f"{entry}\0{part}\0".encode("utf-8", "surrogatepass"))
    return whole.hexdigest()


def _file_digest(path: str, info: os.stat_result) -> str:
    mark = (path, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    found = _KNOWN.get(mark)
    if found is not None:
        return found
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    found = f"{digest.hexdigest()}:{'x' if info.st_mode & 0o111 else '-'}"
    if len(_KNOWN) >= _KNOWN_MAX:
        _KNOWN.clear()
    _KNOWN[mark] = found
    return found


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _raise(error: OSError) -> None:
    raise error
