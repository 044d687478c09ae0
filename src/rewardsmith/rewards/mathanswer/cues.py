"""The words that introduce a final answer, in English and other languages, and sentence rules.

Solutions written in Chinese, French, Arabic, Hindi and other languages state their answer
after their own words: ``答案是 12``, ``Réponse : 220 €``, ``الجواب: 92``, ``उत्तर: 67``. Two
kinds of cue are read here:

- **answer words** ("answer", ``答案``, ``réponse``, ``respuesta``, ``Antwort``, ``ответ``,
  ``الجواب``, ``उत्तर``...) followed by a verb or a colon (``是``, ``est``, ``:``, ``：``), or
  directly by a number: they state the answer wherever they are, as "Answer:" does;
- **conclusion words** (``所以``, ``因此``, ``donc``, ``لذا``, ``इसलिए``, "therefore"...): weaker,
  since reasoning uses them at every step; one counts only in the last sentence that holds a
  number.

Every pattern is linear in the text's length.
"""

from __future__ import annotations

import re

__all__ = ["ANSWER_CUE", "CONCLUSION_CUE", "SENTENCE_END", "SCRIPT_LETTER", "LEADING_MARKS",
           "offers_alternatives", "stated_first"]

# Written after an answer word: a verb ("est") or a colon, in the languages the words are from.
_VERBS = (r"(?:est|es|é|è|ist|lautet|是|为|為|は|은|는|이다|هو|هي|है|हैं|:|：|=|—)"
          r"\s*[:：]?")
ANSWER_CUE = re.compile(
    r"\banswer\s*(?:is|:|=)\s*:?"
    r"|(?:答案|答え|解答|정답|(?<!\w)答(?=\s*[：:])"
    r"|\b(?:réponse|reponse)(?:\s+finale)?|\brespuesta(?:\s+final)?|\bresposta(?:\s+final)?"
    r"|\brisposta(?:\s+finale)?|\b(?:endgültige\s+)?antwort|\bответ|\bcevap"
    r"|الجواب|الإجابة|الاجابة|الناتج|उत्तर)"
    rf"\s*(?:{_VERBS}|(?=[-−\d$\\]))",
    re.IGNORECASE)
CONCLUSION_CUE = re.compile(
    r"所以|因此|故而|综上所述|綜上所述|したがって|よって|따라서"
    r"|\b(?:therefore|thus|hence|donc|ainsi|por\s+lo\s+tanto|por\s+tanto|portanto|daher"
    r"|somit|quindi|dunque|поэтому|итак|следовательно|bu\s+yüzden)\b"
    r"|لذا|لذلك|إذن|اذن|इसलिए|अतः",
    re.IGNORECASE)
# The end of a sentence: a period before a space, the CJK, Arabic and Devanagari stops, or an
# English clause that follows the answer ("... 5, which is prime").
SENTENCE_END = re.compile(
    r"\.(?:\s|$)|[。！？!?؟।]|\s+(?:I hope|which|so|because|since)\b")
# What may follow a cue before the answer itself: spaces, emphasis, colons and commas of any
# script ("所以，", "Donc, ", "لذا، ").
LEADING_MARKS = " \t*:：,，、،"
# A letter of any script but Latin a-z and Greek (read as math), and not a superscript digit
# or a vulgar fraction (which Unicode also counts as alphanumeric).
SCRIPT_LETTER = re.compile(
    r"[^\W\d_A-Za-z\u0370-\u03ff\u00b2\u00b3\u00b9\u00bc-\u00be\u2070-\u209f\u2150-\u218f]")

# After a number, what makes it a quantity: a currency sign, or a word in any script...
_UNIT_AFTER = re.compile(r"\s*(?:[$€£¥₹₩₽¢%]|[^\W\d_])")
# ... unless that word is an operator or joins it to another number.
_NOT_A_UNIT = re.compile(
    r"\s*(?:(?:times|plus|minus|divided|multiplied|over|or|and|x|fois|mal|por|ou|et|oder|und"
    r"|y|o|или|и)\b|乘|除|加|减|或|和|还是|أو|و\s|या|और)",
    re.IGNORECASE)
# Between two numbers, words that offer the second as an alternative to the first (a hedge),
# or join them into one compound answer.
# Arabic and Hindi words stand between spaces (``لا`` is also inside ``ريالاً``, ``या`` inside
# ``किया``); Chinese has no spaces, so its words are found anywhere.
_ALTERNATIVE = re.compile(
    r"\b(?:or|nor|not|and|ou|ni|pas|non|et|oder|nicht|und|o|y|no|или|не|ни|и)\b"
    r"|或|还是|不是|和|以及"
    r"|(?<!\S)(?:أو|ليس|لا|या|नहीं|और|अथवा)(?![^\s,.،;])",
    re.IGNORECASE)


def stated_first(text: str, spans: list[tuple[int, int]]) -> bool:
    """Does a sentence with several values (``spans``, in order) state the first as its answer?

    Yes when the first is a quantity (a currency sign or a unit word right after it: ``12 个``,
    ``220 €``, ``67 कमीजें``) and no later value is offered beside it ("12 or 13", "3, not 4",
    "2 cats and 3 dogs"): "Réponse : 220 € à payer d'ici 12 mois" states 220.
    """
    first_end = spans[0][1]
    if not _UNIT_AFTER.match(text, first_end) or _NOT_A_UNIT.match(text, first_end):
        return False
    return not offers_alternatives(text, spans)


def offers_alternatives(text: str, spans: list[tuple[int, int]]) -> bool:
    """Are values (``spans``, in order) offered side by side: a word such as "or", "not",
    "and", ``或``, ``أو``, ``या`` between two of them, or nothing but a comma?"""
    for (_, previous_end), (start, _) in zip(spans, spans[1:]):
        gap = text[previous_end:start]
        if _ALTERNATIVE.search(gap) or not gap.strip(" ,;，；、،"):
            return True
    return False
