"""MkDocs hooks for the documentation site (``hooks:`` in mkdocs.yml).

GitHub needs ``\\|`` for a pipe inside a code span in a table cell, and shows it as ``|``;
Python-Markdown's tables already ignore pipes inside code spans and would show the backslash.
So the pages keep GitHub's spelling and the site drops the backslash before building.
"""

from __future__ import annotations

from typing import Any


def unescape_pipes_in_table_code(markdown: str) -> str:
    """``\\|`` inside code spans on table rows becomes ``|``; everything else is unchanged."""
    lines = []
    fenced = False
    for line in markdown.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if not fenced and line.lstrip().startswith("|") and "\\|" in line:
            parts = line.split("`")
            for i in range(1, len(parts), 2):  # inside backticks
                parts[i] = parts[i].replace("\\|", "|")
            line = "`".join(parts)
        lines.append(line)
    return "\n".join(lines)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return unescape_pipes_in_table_code(markdown)
