"""Unified diffs (``git diff``, SWE-bench's ``model_patch``) applied to a repository in memory.

A repository is a ``{path: content}`` map (``bytes`` for a file, ``Link`` for a symbolic
link). ``apply_patch`` returns the patched copy or raises ``PatchError`` saying which file and
hunk did not apply. Like ``git apply``: every context and removed line must match exactly, a
hunk may sit at another line than its header says (the nearest match wins), a new file must not
exist yet, and a deleted file must be removed whole. Renames, new and deleted files and
``\\ No newline at end of file`` are understood; binary patches, symbolic links in a patch and
paths that leave the repository are refused.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Link", "PatchError", "apply_patch", "extract_patch", "safe_path"]

_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*(diff|patch|udiff)?[^\n]*\n(.*?)^[ \t]*\1[ \t]*$",
                    re.DOTALL | re.MULTILINE)
_NO_NEWLINE = b"\\ No newline at end of file"


@dataclass(frozen=True)
class Link:
    """A symbolic link and where it points."""

    target: str


Content = bytes | Link


class PatchError(ValueError):
    """The diff cannot be applied (the policy's failure: a 0, not an error)."""


def safe_path(path: str) -> str:
    """``path`` normalised inside the repository (``./a/../b`` is ``b``); ``PatchError`` for
    one that leaves it or is empty."""
    normal = posixpath.normpath(path.replace("\\", "/"))
    if normal.startswith("/") or normal in (".", "..", "") or normal.startswith("../") \
            or "\x00" in normal:
        raise PatchError(f"path {path!r} is outside the repository")
    return normal


def extract_patch(completion: str) -> str:
    """The diff in a completion: its last fenced block tagged diff/patch (or untagged and
    holding a diff), else the text from its first diff header on, else the whole text."""
    chosen = None
    for match in _FENCE.finditer(completion):
        body = match.group(3)
        if match.group(2) or _looks_like_diff(body):
            chosen = body
    if chosen is not None:
        return chosen
    found = re.search(r"^(diff --git |--- )", completion, re.MULTILINE)
    return completion[found.start():] if found else completion


def _looks_like_diff(text: str) -> bool:
    return bool(re.search(r"^(diff --git |--- |@@ )", text, re.MULTILINE))


@dataclass
class _Hunk:
    old_start: int
    old: list[bytes] = field(default_factory=list)
    new: list[bytes] = field(default_factory=list)


@dataclass
class _FilePatch:
    old_path: str | None  # None: a new file
    new_path: str | None  # None: a deleted file
    hunks: list[_Hunk] = field(default_factory=list)
    rename: bool = False


def _strip_prefix(raw: bytes) -> str | None:
    text = raw.decode("utf-8", "surrogateescape").split("\t", 1)[0].rstrip("\r\n")
    if text.startswith('"') and text.endswith('"') and len(text) >= 2:
        text = text[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
    if text == "/dev/null":
        return None
    if text.startswith(("a/", "b/")):
        text = text[2:]
    return safe_path(text)


def _parse(patch: bytes) -> list[_FilePatch]:
    lines = patch.splitlines(keepends=True)
    files: list[_FilePatch] = []
    current: _FilePatch | None = None
    git_header = False
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if line.startswith(b"diff --git "):
            parts = line[len(b"diff --git "):].rstrip(b"\r\n").split(b" b/", 1)
            old = _strip_prefix(parts[0])
            new = _strip_prefix(b"b/" + parts[1]) if len(parts) == 2 else old
            current = _FilePatch(old, new)
            files.append(current)
            git_header = True
        elif line.startswith((b"GIT binary patch", b"Binary files ")):
            raise PatchError("binary patches are not supported")
        elif current is not None and git_header and line.startswith(b"new file mode"):
            current.old_path = None
        elif current is not None and git_header and line.startswith(b"deleted file mode"):
            current.new_path = None
        elif line.startswith((b"new mode 120000", b"new file mode 120000")):
            raise PatchError("symbolic links in a patch are not supported")
        elif current is not None and line.startswith(b"rename from "):
            current.old_path = _strip_prefix(b"a/" + line[len(b"rename from "):])
            current.rename = True
        elif current is not None and line.startswith(b"rename to "):
            current.new_path = _strip_prefix(b"b/" + line[len(b"rename to "):])
            current.rename = True
        elif line.startswith(b"--- ") and index < len(lines) and \
                lines[index].startswith(b"+++ "):
            old, new = _strip_prefix(line[4:]), _strip_prefix(lines[index][4:])
            index += 1
            if current is None or not git_header or current.hunks:
                current = _FilePatch(old, new)
                files.append(current)
            else:
                current.old_path, current.new_path = old, new
            git_header = False
        elif line.startswith(b"@@"):
            if current is None:
                raise PatchError("a hunk comes before any file header")
            hunk, index = _read_hunk(line, lines, index)
            current.hunks.append(hunk)
    return files


def _read_hunk(header: bytes, lines: list[bytes], index: int) -> tuple[_Hunk, int]:
    match = _HUNK.match(header)
    if match is None:
        raise PatchError(f"malformed hunk header {header[:80]!r}")
    old_left = int(match.group(2)) if match.group(2) is not None else 1
    new_left = int(match.group(4)) if match.group(4) is not None else 1
    hunk = _Hunk(int(match.group(1)))
    touched: tuple[list[bytes], ...] = ()  # the sides the previous line went to
    while index < len(lines):
        line = lines[index]
        if line.startswith(_NO_NEWLINE):  # the previous line has no newline at its end
            index += 1
            for side in touched:
                side[-1] = side[-1].rstrip(b"\r\n")
            continue
        if old_left <= 0 and new_left <= 0:
            break
        index += 1
        tag, body = line[:1], line[1:]
        if line.rstrip(b"\r\n") == b"":  # a context line whose single space was trimmed
            tag, body = b" ", line
        if tag == b" ":
            hunk.old.append(body)
            hunk.new.append(body)
            old_left, new_left, touched = old_left - 1, new_left - 1, (hunk.old, hunk.new)
        elif tag == b"-":
            hunk.old.append(body)
            old_left, touched = old_left - 1, (hunk.old,)
        elif tag == b"+":
            hunk.new.append(body)
            new_left, touched = new_left - 1, (hunk.new,)
        else:
            raise PatchError(f"hunk at line {hunk.old_start} ends early: {line[:60]!r}")
    if old_left > 0 or new_left > 0:
        raise PatchError(f"hunk at line {hunk.old_start} is cut short")
    return hunk, index


def _apply_hunks(text: bytes, hunks: list[_Hunk], path: str) -> bytes:
    lines = text.splitlines(keepends=True)
    out: list[bytes] = []
    position = 0  # lines of the original already consumed
    offset = 0
    for number, hunk in enumerate(hunks, 1):
        size = len(hunk.old)
        wanted = max(hunk.old_start - 1 + offset, position) if size else hunk.old_start + offset
        if not size:  # pure insertion after line old_start
            at = min(max(wanted, position), len(lines))
        else:
            found = _find(lines, hunk.old, wanted, position)
            if found is None:
                raise PatchError(f"{path}: hunk {number} (line {hunk.old_start}) does not "
                                 f"match the file")
            at = found
        out.extend(lines[position:at])
        out.extend(hunk.new)
        offset = at - (hunk.old_start - 1) if size else offset
        position = at + size
    out.extend(lines[position:])
    return b"".join(out)


def _find(lines: list[bytes], old: list[bytes], wanted: int, start: int) -> int | None:
    """Where ``old`` occurs in ``lines`` at or after ``start``, nearest to ``wanted``."""
    size = len(old)
    last = len(lines) - size
    for distance in range(0, max(last, 0) + max(wanted, 0) + 2):
        for at in (wanted - distance, wanted + distance) if distance else (wanted,):
            if start <= at <= last and lines[at:at + size] == old:
                return at
        if wanted - distance < start and wanted + distance > last:
            return None
    return None


def apply_patch(files: Mapping[str, Content], patch: str) -> dict[str, Content]:
    """``files`` with ``patch`` applied, as a new map; ``PatchError`` if any part fails."""
    result = dict(files)
    data = patch.encode("utf-8", "surrogateescape")
    parsed = _parse(data)
    if not parsed and data.strip():
        raise PatchError("no diff found in the completion")
    for item in parsed:
        source = item.old_path
        if source is None:  # a new file
            target = item.new_path
            if target is None:
                raise PatchError("a file section names neither an old nor a new file")
            if target in result:
                raise PatchError(f"{target}: a new file that already exists")
            result[target] = _apply_hunks(b"", item.hunks, target)
            continue
        current = result.get(source)
        if current is None:
            raise PatchError(f"{source}: no such file in the repository")
        if isinstance(current, Link):
            raise PatchError(f"{source}: a symbolic link cannot be patched")
        patched = _apply_hunks(current, item.hunks, source) if item.hunks else current
        if item.new_path is None:  # deleted: the hunks must have removed it whole
            if patched:
                raise PatchError(f"{source}: a deletion that leaves content behind")
            del result[source]
            continue
        if item.new_path != source:
            if item.new_path in result:
                raise PatchError(f"{item.new_path}: renamed onto a file that exists")
            del result[source]
        result[item.new_path] = patched
    return result
