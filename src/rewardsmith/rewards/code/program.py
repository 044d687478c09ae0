"""Which part of a completion is the program: the last fenced block of its language."""

from __future__ import annotations

import re

__all__ = ["LANGUAGE_TAGS", "extract_program"]

# Fence info strings that name each language (compared lower-cased, first word only).
LANGUAGE_TAGS: dict[str, frozenset[str]] = {
    "python": frozenset({"python", "py", "python3", "py3"}),
    "cpp": frozenset({"cpp", "c++", "cc", "cxx", "hpp"}),
    "javascript": frozenset({"javascript", "js", "node", "nodejs", "mjs", "cjs"}),
}
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([^\n`]*)\n(.*?)^[ \t]*\1[ \t]*$",
                    re.DOTALL | re.MULTILINE)


def extract_program(completion: str, language: str) -> str:
    """The last closed fenced block tagged with ``language`` or untagged; else the whole text.

    Blocks tagged with another language (an example input in ```text, say) are skipped.
    """
    tags = LANGUAGE_TAGS[language]
    chosen: str | None = None
    for match in _FENCE.finditer(completion):
        info = match.group(2).strip().lower()
        tag = info.split()[0] if info else ""
        if tag == "" or tag in tags:
            chosen = match.group(3)
    return chosen if chosen is not None else completion
