"""Probability-weighted grades from the logprobs of the reply's score tokens.

With ``logprobs: true`` the request asks for ``top_logprobs`` alternatives of each reply token.
For each criterion, the token where its number begins (after ``"name":`` in the JSON reply) is
found; every alternative of that token that reads as a number within the criterion's range
counts with its probability, and the grade is their probability-weighted mean (the weights
renormalised over those alternatives). When the number spans several tokens (``0.75`` on most
tokenizers) or no alternative is a number, the parsed grade stands: this is for integer scales
such as 1 to 10, whose numbers are one token each.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from .config import Criterion

__all__ = ["weighted_grade"]


def weighted_grade(tokens: Sequence[Any], criterion: Criterion) -> float | None:
    """The probability-weighted grade, or None when the logprobs cannot give one."""
    pieces: list[str] = []
    for token in tokens:
        piece = token.get("token") if isinstance(token, dict) else None
        if not isinstance(piece, str):
            return None
        pieces.append(piece)
    text = "".join(pieces)
    found = re.search(r'"' + re.escape(criterion.name) + r'"\s*:\s*', text)
    if found is None:
        return None
    start = found.end()
    offset = 0
    for piece, token in zip(pieces, tokens, strict=True):
        if offset <= start < offset + len(piece):
            prefix = piece[: start - offset]
            number = piece[start - offset:]
            after = text[offset + len(piece):offset + len(piece) + 1]
            if not _number(number.strip()) or (after and (after.isdigit() or after == ".")):
                return None  # the number goes on in the next token
            return _weighted(token, prefix, criterion)
        offset += len(piece)
    return None


def _number(text: str) -> float | None:
    try:
        value = float(json.loads(text)) if text and text[0] in "-0123456789" else None
    except (ValueError, TypeError):
        return None
    return value if value is not None and math.isfinite(value) else None


def _weighted(token: dict[str, Any], prefix: str, criterion: Criterion) -> float | None:
    alternatives = token.get("top_logprobs") or [token]
    low, high = criterion.range
    total = weight = 0.0
    for alternative in alternatives:
        piece = alternative.get("token") if isinstance(alternative, dict) else None
        logprob = alternative.get("logprob") if isinstance(alternative, dict) else None
        if (not isinstance(piece, str) or not piece.startswith(prefix)
                or not isinstance(logprob, (int, float)) or isinstance(logprob, bool)):
            continue
        value = _number(piece[len(prefix):].strip())
        if value is None or not low <= value <= high:
            continue
        probability = math.exp(logprob)
        total += value * probability
        weight += probability
    return total / weight if weight > 0 else None
