"""Fenced blocks of a Markdown page, with the `not-run` marker that may stand before each."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[ \t]*$")
_MARKER = re.compile(r"<!--\s*not-run\b(?P<rest>.*?)-->", re.DOTALL)
# A first line that names the file the block is: `# rubric.yaml`, `# my_rewards.py: ...`.
_FILE_LINE = re.compile(r"^(?:#|//)\s*(?P<name>[\w./-]+\.(?:py|ya?ml|jsonl?))\b(?:\s*$|:)")


@dataclass(frozen=True)
class Block:
    page: str          # path relative to the repository root
    line: int          # 1-based line of the opening fence
    lang: str          # the fence's info string ("" when none)
    text: str          # the content, dedented by the fence's indent
    not_run: str | None  # the marker's reason, "" for a marker without one, None for no marker

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def file_name(self) -> str | None:
        """The file a yaml/json/python block is written to, when its first line names one."""
        if self.lang not in ("yaml", "yml", "json", "python", "py"):
            return None
        first = self.text.split("\n", 1)[0].strip()
        match = _FILE_LINE.match(first)
        return match.group("name") if match else None


@dataclass(frozen=True)
class Page:
    path: str
    blocks: list[Block]
    stray_markers: list[int]  # lines of markers that stand before no block


def read_page(root: Path, relative: str) -> Page:
    lines = (root / relative).read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    stray: list[int] = []
    pending: tuple[int, str] | None = None  # (line, reason) of a marker awaiting its block
    index = 0
    while index < len(lines):
        line = lines[index]
        opened = _FENCE_OPEN.match(line)
        if opened:
            indent = opened.group("indent")
            close = re.compile(rf"^{re.escape(indent)}```[ \t]*$")
            end = index + 1
            while end < len(lines) and not close.match(lines[end]):
                end += 1
            body = [text[len(indent):] if text.startswith(indent) else text.lstrip()
                    for text in lines[index + 1:end]]
            blocks.append(Block(relative, index + 1, opened.group("lang"), "\n".join(body),
                                pending[1] if pending else None))
            pending = None
            index = end + 1
            continue
        marker = _MARKER.search(line)
        if marker:
            if pending:
                stray.append(pending[0])
            rest = marker.group("rest").strip()
            pending = (index + 1, rest[1:].strip() if rest.startswith(":") else "")
        elif line.strip() and pending:
            stray.append(pending[0])  # prose between a marker and the next block
            pending = None
        index += 1
    if pending:
        stray.append(pending[0])
    return Page(relative, blocks, stray)


def doc_pages(root: Path) -> list[str]:
    """README.md and docs/*.md; docs/reference/ is generated from the code and not read here."""
    return ["README.md"] + sorted(str(path.relative_to(root))
                                  for path in (root / "docs").glob("*.md"))


def shell_commands(text: str) -> list[str]:
    """The commands of a sh/bash block: continuation lines joined, comment lines dropped."""
    commands: list[str] = []
    current = ""
    for raw in text.split("\n"):
        if not current and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        if _open_quote(current + raw):  # a quoted argument that goes on to the next line
            current += raw + "\n"
            continue
        commands.append((current + raw).strip())
        current = ""
    if current.strip():
        commands.append(current.strip())
    return commands


def _open_quote(text: str) -> bool:
    quote = ""
    escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and not quote:
            return False
    return bool(quote)
