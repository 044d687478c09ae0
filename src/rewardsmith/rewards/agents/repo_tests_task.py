"""What a ``repo_tests`` rollout is graded against, and the files it is run on.

The task comes from the rollout's ``answer`` (a JSON object, or a string of one): ``repo``
(the base repository: a folder, a ``.tar``/``.tar.gz``, or a ``{path: text}`` map), ``tests``
(test files placed over the workspace before the run: a folder whose files land at the same
relative paths, or a ``{path: text}`` map), ``test_command`` (pytest's arguments; default the
test files the ids name), ``fail_to_pass`` and ``pass_to_pass`` (pytest node ids, or JSON
strings of lists as SWE-bench stores them) and ``protected`` (globs).

A repository is read into a ``{path: bytes | Link}`` map: symbolic links stay links (never
followed), and ``.git``, ``__pycache__`` folders and ``*.pyc`` files are left out (compiled
files could stand in for the sources the run restores). A task's repository is read once per
process while its files are unchanged; the agent's workspace is read on each call, within a
size limit, and names that would leave it are dropped.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import io
import json
import os
import posixpath
import tarfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .repo_patch import Content, Link, PatchError, safe_path

__all__ = ["DEFAULT_PROTECTED", "RepoTestsTask", "WorkspaceTooLarge", "load_workspace",
           "parse_task", "protect", "tar_bytes"]

# What configures a pytest run or runs at interpreter start: the agent may not change them.
DEFAULT_PROTECTED = ("conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml",
                     "tox.ini", "setup.cfg", "pyproject.toml", "sitecustomize.py",
                     "usercustomize.py", "*.pth")
_SKIPPED_DIRS = (".git", "__pycache__", ".pytest_cache")
FileMap = dict[str, Content]


class WorkspaceTooLarge(ValueError):
    """The agent's workspace holds more than the run's limit."""


@dataclass(frozen=True)
class RepoTestsTask:
    repo: FileMap | None
    repo_key: str  # names the base repository's content: its packed form is kept by this key
    tests: FileMap
    args: tuple[str, ...]
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    protected: tuple[str, ...]  # globs
    protected_files: frozenset[str]  # exact paths: the tests placed and the files ids name


def _skipped(name: str) -> bool:
    parts = name.split("/")
    return any(p in _SKIPPED_DIRS for p in parts[:-1]) or parts[-1] in _SKIPPED_DIRS \
        or name.endswith(".pyc")


def _ids(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(f"answer.{field}: a list of test ids (or a JSON string of one) "
                             f"expected, got {value[:80]!r}") from None
    if not isinstance(value, list) or not all(isinstance(i, str) and i for i in value):
        raise ValueError(f"answer.{field}: a list of test ids expected")
    return tuple(value)


def _text_map(value: Mapping[Any, Any], field: str) -> FileMap:
    files: FileMap = {}
    for path, text in value.items():
        if not isinstance(path, str) or not isinstance(text, str):
            raise ValueError(f"answer.{field}: a {{path: text}} map expected")
        try:
            files[safe_path(path)] = text.encode("utf-8")
        except PatchError as exc:
            raise ValueError(f"answer.{field}: {exc}") from None
    return files


def _signature(path: str) -> tuple[Any, ...]:
    """What changes when a folder's or file's content may have: sizes, times, inodes."""
    if os.path.isdir(path):
        found = []
        for root, dirs, names in os.walk(path):
            dirs[:] = [d for d in dirs if d not in _SKIPPED_DIRS]
            for name in names:
                stat = os.lstat(os.path.join(root, name))
                found.append((os.path.join(root, name), stat.st_size, stat.st_mtime_ns,
                              stat.st_ino))
        return tuple(sorted(found))
    stat = os.stat(path)
    return (stat.st_size, stat.st_mtime_ns, stat.st_ino)


def _tree_key(files: Mapping[str, Content]) -> str:
    digest = hashlib.sha256()
    for path in sorted(files):
        content = files[path]
        digest.update(path.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(b"L" + content.target.encode("utf-8", "surrogateescape")
                      if isinstance(content, Link) else b"F" + content)
        digest.update(b"\0")
    return digest.hexdigest()


@functools.lru_cache(maxsize=64)
def _read_tree_cached(path: str, signature: tuple[Any, ...]) -> tuple[FileMap, str]:
    files = dict(_read_tree(path, limit=None, hostile=False))
    return files, _tree_key(files)


def _read_tree(path: str, limit: int | None, hostile: bool) -> Iterator[tuple[str, Content]]:
    """The files of a folder or tarball, as (relative path, content)."""
    total = 0

    def counted(size: int) -> None:
        nonlocal total
        total += size
        if limit is not None and total > limit:
            raise WorkspaceTooLarge(f"the workspace holds more than {limit >> 20} MB")

    if os.path.isdir(path):
        for root, dirs, names in os.walk(path):  # os.walk never follows a linked folder
            dirs.sort()
            for name in sorted(names + [d for d in dirs if os.path.islink(os.path.join(root, d))]):
                full = os.path.join(root, name)
                relative = os.path.relpath(full, path).replace(os.sep, "/")
                if _skipped(relative):
                    continue
                if os.path.islink(full):
                    target = os.readlink(full)
                    counted(len(target))
                    yield relative, Link(target)
                elif os.path.isfile(full):
                    counted(os.path.getsize(full))
                    with open(full, "rb") as handle:
                        yield relative, handle.read()
            dirs[:] = [d for d in dirs if d not in _SKIPPED_DIRS
                       and not os.path.islink(os.path.join(root, d))]
        return
    try:
        archive = tarfile.open(path)
    except (tarfile.TarError, OSError) as exc:
        raise ValueError(f"{path}: not a folder or a readable tarball ({exc})") from None
    with archive:
        for member in archive:
            if not (member.isfile() or member.issym()):
                continue  # folders are made as needed; devices and the like have no place
            try:
                name = safe_path(member.name)
            except PatchError:
                if hostile:
                    continue
                raise ValueError(f"{path}: member {member.name!r} leaves the repository") \
                    from None
            if _skipped(name):
                continue
            if member.issym():
                counted(len(member.linkname))
                yield name, Link(member.linkname)
            elif member.isfile():
                counted(member.size)
                source = archive.extractfile(member)
                yield name, source.read() if source is not None else b""


def _load_tree(source: Any, field: str) -> tuple[FileMap, str]:
    """A task's repository or tests (folder, tarball or map) and a key for its content."""
    if isinstance(source, Mapping):
        files = _text_map(source, field)
        return files, _tree_key(files)
    if not isinstance(source, str) or not source:
        raise ValueError(f"answer.{field}: a folder, a tarball or a {{path: text}} map "
                         f"expected, got {type(source).__name__}")
    path = os.path.abspath(os.path.expanduser(source))
    if not os.path.exists(path):
        raise ValueError(f"answer.{field}: {source!r} does not exist")
    return _read_tree_cached(path, _signature(path))


def load_workspace(path: Any, limit_bytes: int) -> FileMap:
    """The agent's final workspace (a folder or tarball), at most ``limit_bytes`` in all."""
    if not isinstance(path, str) or not path:
        raise ValueError(f"metadata.workspace: the path of a folder or tarball expected, "
                         f"got {path!r}")
    full = os.path.abspath(os.path.expanduser(path))
    if not os.path.exists(full):
        raise ValueError(f"metadata.workspace: {path!r} does not exist")
    return dict(_read_tree(full, limit=limit_bytes, hostile=True))


def parse_task(answer: Any) -> RepoTestsTask:
    """The task in a rollout's ``answer``; ``ValueError`` naming the field that is wrong."""
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError:
            raise ValueError("answer: a JSON object describing the task expected") from None
    if not isinstance(answer, Mapping):
        raise ValueError(f"answer: a JSON object describing the task expected, got "
                         f"{type(answer).__name__}")
    unknown = set(answer) - {"repo", "tests", "test_command", "fail_to_pass", "pass_to_pass",
                             "protected"}
    if unknown:
        raise ValueError(f"answer: unknown field(s) {', '.join(sorted(unknown))}")
    fail_to_pass = _ids(answer.get("fail_to_pass"), "fail_to_pass")
    pass_to_pass = _ids(answer.get("pass_to_pass"), "pass_to_pass")
    if not fail_to_pass and not pass_to_pass:
        raise ValueError("answer: no test ids in fail_to_pass or pass_to_pass")
    repo, repo_key = (None, "") if answer.get("repo") is None else \
        _load_tree(answer["repo"], "repo")
    tests: FileMap = {} if answer.get("tests") is None else _load_tree(answer["tests"],
                                                                        "tests")[0]
    named = {test_id.split("::", 1)[0] for test_id in (*fail_to_pass, *pass_to_pass)}
    command = answer.get("test_command")
    if command is None:
        args = tuple(sorted(named))
    elif isinstance(command, list) and command and all(isinstance(a, str) for a in command):
        args = tuple(command)
    else:
        raise ValueError("answer.test_command: a non-empty list of pytest arguments expected")
    protected = answer.get("protected")
    if protected is None:
        globs = DEFAULT_PROTECTED
    elif isinstance(protected, list) and all(isinstance(g, str) and g for g in protected):
        globs = tuple(protected)
    else:
        raise ValueError("answer.protected: a list of glob patterns expected")
    exact = frozenset(tests) | frozenset(_safe_names(named))
    return RepoTestsTask(repo, repo_key, tests, args, fail_to_pass, pass_to_pass, globs, exact)


def _safe_names(names: Iterable[str]) -> Iterator[str]:
    for name in names:
        try:
            yield safe_path(name)
        except PatchError:
            raise ValueError(f"answer: test id path {name!r} leaves the repository") from None


def is_protected(path: str, task: RepoTestsTask) -> bool:
    if path in task.protected_files:
        return True
    base = posixpath.basename(path)
    return any(fnmatch.fnmatchcase(path if "/" in glob else base, glob) for glob in task.protected)


def protect(final: FileMap, task: RepoTestsTask) -> tuple[FileMap, list[str]]:
    """``final`` with every protected path as the task has it (the tests placed over the base
    repository; absent there means absent), and the protected paths the agent changed from
    the base. A file or link where a protected file's folder must be is removed as well.

    Without a base repository (a workspace given alone) nothing can be called changed: the
    tests are placed, other protected files are left as the workspace has them."""
    start = task.repo
    reference: FileMap = dict(start or {})
    reference.update(task.tests)
    result = dict(final)
    tampered = set()
    for path in set(result) | set(reference):
        if not is_protected(path, task) or (start is None and path not in task.tests):
            continue
        if start is not None and result.get(path) != start.get(path):
            tampered.add(path)
        if path in reference:
            result[path] = reference[path]
        else:
            result.pop(path, None)
    for path in reference:
        if not is_protected(path, task) or (start is None and path not in task.tests):
            continue
        parent = posixpath.dirname(path)
        while parent:
            if parent in result:  # a file or link where the protected file's folder is
                del result[parent]
                if start is not None:
                    tampered.add(parent)
            parent = posixpath.dirname(parent)
    return result, sorted(tampered)


def tar_bytes(files: Mapping[str, Content]) -> bytes:
    """An uncompressed tar of ``files``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in sorted(files):
            content = files[path]
            info = tarfile.TarInfo(path)
            if isinstance(content, Link):
                info.type = tarfile.SYMTYPE
                info.linkname = content.target
                archive.addfile(info)
            else:
                info.size = len(content)
                info.mode = 0o644
                archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()
