"""The 25 IFEval instruction checks: each a pure function of the response text and its kwargs.

What each checks follows IFEval's definitions (google-research's instruction_following_eval and
lm-eval's port). Where those pass a response that did not do what was asked, the check here is
stricter, and docs/instructions.md lists each difference.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from .text import capital_word_count, count_sentences, count_words, detect_language, has_content

__all__ = ["CHECKS", "Check"]

Check = Callable[[str, Mapping[str, Any]], bool]


def _compare(actual: int, relation: str, threshold: int) -> bool:
    return actual < threshold if relation == "less than" else actual >= threshold


@lru_cache(maxsize=1024)
def _literal(word: str, whole_word: bool = False) -> re.Pattern[str]:
    # Keywords are literal text: "C++" or "(a)" must not be read as a pattern.
    body = re.escape(word)
    return re.compile(rf"\b{body}\b" if whole_word else body, re.IGNORECASE)


def keyword_existence(text: str, kw: Mapping[str, Any]) -> bool:
    return all(_literal(word).search(text) for word in kw["keywords"])


def keyword_frequency(text: str, kw: Mapping[str, Any]) -> bool:
    found = len(_literal(kw["keyword"]).findall(text))
    return _compare(found, kw["relation"], kw["frequency"])


def forbidden_words(text: str, kw: Mapping[str, Any]) -> bool:
    return not any(_literal(word, whole_word=True).search(text) for word in kw["forbidden_words"])


def letter_frequency(text: str, kw: Mapping[str, Any]) -> bool:
    return _compare(text.lower().count(kw["letter"]), kw["let_relation"], kw["let_frequency"])


def _language_is(detected: str | None, wanted: str) -> bool:
    # "zh" asks for Chinese; the detector answers "zh-cn" or "zh-tw".
    return detected is not None and (detected == wanted or detected.split("-")[0] == wanted)


def response_language(text: str, kw: Mapping[str, Any]) -> bool:
    return _language_is(detect_language(text), kw["language"])


def number_sentences(text: str, kw: Mapping[str, Any]) -> bool:
    return _compare(count_sentences(text), kw["relation"], kw["num_sentences"])


_DIVIDER = re.compile(r"\s?\*\*\*\s?")


def number_paragraphs(text: str, kw: Mapping[str, Any]) -> bool:
    parts = _DIVIDER.split(text)
    count = len(parts)
    for index, part in enumerate(parts):
        if not part.strip():
            if index in (0, len(parts) - 1):
                count -= 1  # a divider at the very start or end is not an empty paragraph
            else:
                return False
    return count == int(kw["num_paragraphs"])


def number_words(text: str, kw: Mapping[str, Any]) -> bool:
    return _compare(count_words(text), kw["relation"], kw["num_words"])


_FIRST_WORD_STOP = frozenset(".,?!'\"")


def nth_paragraph_first_word(text: str, kw: Mapping[str, Any]) -> bool:
    # Blank blocks are not paragraphs, so they neither count nor shift which one is nth.
    paragraphs = [p.strip() for p in text.split("\n\n") if p.strip()]
    if len(paragraphs) != kw["num_paragraphs"]:
        return False
    word = paragraphs[kw["nth_paragraph"] - 1].split()[0].lstrip("'").lstrip('"')
    first = []
    for letter in word:
        if letter in _FIRST_WORD_STOP:
            break
        first.append(letter.lower())
    return "".join(first) == str(kw["first_word"])


_PLACEHOLDER = re.compile(r"\[([^\]\n]*)\]")


def number_placeholders(text: str, kw: Mapping[str, Any]) -> bool:
    found = sum(1 for inside in _PLACEHOLDER.findall(text) if inside.strip())
    return found >= int(kw["num_placeholders"])


@lru_cache(maxsize=64)
def _postscript(marker: str) -> re.Pattern[str]:
    if marker == "P.P.S":
        body = r"p\.\s?p\.\s?s"
    elif marker == "P.S.":
        body = r"p\.\s?s\."
    else:
        body = re.escape(marker.lower())
    return re.compile(r"\s*" + body + r"(.*)$", re.MULTILINE | re.DOTALL)


def postscript(text: str, kw: Mapping[str, Any]) -> bool:
    # The marker alone, with nothing after it, is not a postscript.
    return any(has_content(rest) for rest in _postscript(kw["postscript_marker"]).findall(
        text.lower()))


_STAR_BULLET = re.compile(r"^\s*\*[^\*].*$", re.MULTILINE)
_DASH_BULLET = re.compile(r"^\s*-.*$", re.MULTILINE)


def number_bullet_lists(text: str, kw: Mapping[str, Any]) -> bool:
    found = len(_STAR_BULLET.findall(text)) + len(_DASH_BULLET.findall(text))
    return found == int(kw["num_bullets"])


_OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


def constrained_response(text: str, kw: Mapping[str, Any]) -> bool:
    # One of the options, not several glued together to cover every outcome.
    return sum(1 for option in _OPTIONS if option in text) == 1


_SINGLE_HIGHLIGHT = re.compile(r"\*[^\n\*]*\*")
_DOUBLE_HIGHLIGHT = re.compile(r"\*\*[^\n\*]*\*\*")


def number_highlighted_sections(text: str, kw: Mapping[str, Any]) -> bool:
    found = sum(1 for h in _SINGLE_HIGHLIGHT.findall(text) if h.strip("*").strip())
    found += sum(1 for h in _DOUBLE_HIGHLIGHT.findall(text) if h[2:-2].strip())
    return found >= int(kw["num_highlights"])


@lru_cache(maxsize=64)
def _section_splitter(word: str) -> re.Pattern[str]:
    return re.compile(r"\s?" + re.escape(word) + r"\s?\d+\s?")


def multiple_sections(text: str, kw: Mapping[str, Any]) -> bool:
    sections = _section_splitter(kw["section_spliter"]).split(text)[1:]
    # A heading with nothing under it is not a section.
    return sum(1 for s in sections if has_content(s)) >= int(kw["num_sections"])


def json_format(text: str, kw: Mapping[str, Any]) -> bool:
    body = text.strip()
    for fence in ("```json", "```Json", "```JSON", "```"):
        if body.startswith(fence):
            body = body[len(fence):]
            break
    body = body.removesuffix("```").strip()
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


_TITLE = re.compile(r"<<[^\n]+>>")


def title(text: str, kw: Mapping[str, Any]) -> bool:
    return any(t.lstrip("<").rstrip(">").strip() for t in _TITLE.findall(text))


def two_responses(text: str, kw: Mapping[str, Any]) -> bool:
    parts = text.split("******")
    responses = []
    for index, part in enumerate(parts):
        if part.strip():
            responses.append(part.strip())
        elif index not in (0, len(parts) - 1):
            return False
    return len(responses) == 2 and responses[0] != responses[1]


def repeat_prompt(text: str, kw: Mapping[str, Any]) -> bool:
    body = text.strip().lower()
    request = kw["prompt_to_repeat"].lower()
    # The request repeated back is half the task: an answer must follow it.
    return body.startswith(request) and has_content(body[len(request):])


def end_checker(text: str, kw: Mapping[str, Any]) -> bool:
    return text.strip().strip('"').lower().endswith(kw["end_phrase"])


def capital_word_frequency(text: str, kw: Mapping[str, Any]) -> bool:
    return _compare(capital_word_count(text), kw["capital_relation"], kw["capital_frequency"])


def english_capital(text: str, kw: Mapping[str, Any]) -> bool:
    return text.isupper() and detect_language(text) == "en"


def english_lowercase(text: str, kw: Mapping[str, Any]) -> bool:
    return text.islower() and detect_language(text) == "en"


def no_comma(text: str, kw: Mapping[str, Any]) -> bool:
    return "," not in text and "\uff0c" not in text  # the fullwidth comma is a comma too


def quotation(text: str, kw: Mapping[str, Any]) -> bool:
    body = text.strip()
    return len(body) > 1 and body[0] == '"' and body[-1] == '"'


CHECKS: dict[str, Check] = {
    "keywords:existence": keyword_existence,
    "keywords:frequency": keyword_frequency,
    "keywords:forbidden_words": forbidden_words,
    "keywords:letter_frequency": letter_frequency,
    "language:response_language": response_language,
    "length_constraints:number_sentences": number_sentences,
    "length_constraints:number_paragraphs": number_paragraphs,
    "length_constraints:number_words": number_words,
    "length_constraints:nth_paragraph_first_word": nth_paragraph_first_word,
    "detectable_content:number_placeholders": number_placeholders,
    "detectable_content:postscript": postscript,
    "detectable_format:number_bullet_lists": number_bullet_lists,
    "detectable_format:constrained_response": constrained_response,
    "detectable_format:number_highlighted_sections": number_highlighted_sections,
    "detectable_format:multiple_sections": multiple_sections,
    "detectable_format:json_format": json_format,
    "detectable_format:title": title,
    "combination:two_responses": two_responses,
    "combination:repeat_prompt": repeat_prompt,
    "startend:end_checker": end_checker,
    "change_case:capital_word_frequency": capital_word_frequency,
    "change_case:english_capital": english_capital,
    "change_case:english_lowercase": english_lowercase,
    "punctuation:no_comma": no_comma,
    "startend:quotation": quotation,
}
