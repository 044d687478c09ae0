"""Seeded IFEval rows for the comparison in ``bench_ifeval.py``: constraints plus a response.

Each row has one primary instruction (the 25 types in turn) with a response written to meet it
or to miss it by a little, often a second instruction of another type, and sometimes IFEval's
loose-mode noise (a preamble line, a closing line, markdown asterisks). A share of rows are the
edge forms where the two checkers are known to differ, so every known difference shows up.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

Row = dict[str, Any]

SENTENCES = [
    "The river bends twice before it reaches the old mill",
    "Bright lanterns hung above the narrow street",
    "Our team finished the report on Tuesday",
    "A quiet morning is the best time to read",
    "Most birds leave the valley when the frost arrives",
    "The museum keeps its oldest maps in a dark room",
    "Fresh bread from the corner bakery sells out by noon",
    "She planted tomatoes and basil along the fence",
    "Heavy rain delayed the train for an hour",
    "The committee will vote on the proposal next week",
    "Children built a small raft from driftwood",
    "Good coffee needs clean water and patience",
]
COMMA_SENTENCES = [
    "After lunch, we walked to the harbor",
    "Apples, pears and plums filled the basket",
    "However, the bridge stayed closed all winter",
]
FOREIGN = {
    "es": "El río pasa junto al viejo molino y los niños juegan en la orilla todas las tardes.",
    "fr": "La rivière passe près du vieux moulin et les enfants jouent sur la rive chaque soir.",
    "de": "Der Fluss fließt an der alten Mühle vorbei und die Kinder spielen jeden Abend am Ufer.",
    "it": "Il fiume scorre accanto al vecchio mulino e i bambini giocano sulla riva ogni sera.",
    "pt": "O rio passa ao lado do velho moinho e as crianças brincam na margem todas as tardes.",
    "ru": "Река течёт мимо старой мельницы, и дети каждый вечер играют на берегу.",
    "ja": "川は古い水車小屋のそばを流れ、子どもたちは毎晩岸辺で遊びます。",
    "hi": "नदी पुरानी चक्की के पास से बहती है और बच्चे हर शाम किनारे पर खेलते हैं।",
}
KEYWORDS = ["harbor", "lantern", "river", "bakery", "committee", "frost", "map", "raft"]
RELATIONS = ("less than", "at least")
PHRASES = ("Any other questions?", "Is there anything else I can help with?")
OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


def _sentences(rng: random.Random, n: int, commas: bool = False) -> str:
    pool = SENTENCES + (COMMA_SENTENCES if commas else [])
    return " ".join(rng.choice(pool) + rng.choice([".", ".", ".", "!", "?"]) for _ in range(n))


def _text(rng: random.Random) -> str:
    return _sentences(rng, rng.randint(2, 5), commas=rng.random() < 0.3)


def _around(rng: random.Random, n: int) -> int:
    return max(0, n + rng.choice([-2, -1, 0, 0, 1, 2]))


def _keywords(rng: random.Random) -> tuple[dict[str, Any], str]:
    words = rng.sample(KEYWORDS, rng.randint(1, 2))
    body = _text(rng)
    if rng.random() < 0.6:
        body += " " + " ".join(f"We saw the {w}." for w in words)
    elif rng.random() < 0.5:
        body += f" We saw the {words[0]}."
    return {"keywords": words}, body


def _frequency(rng: random.Random) -> tuple[dict[str, Any], str]:
    word, n = rng.choice(KEYWORDS), rng.randint(1, 4)
    k = _around(rng, n)
    return ({"keyword": word, "frequency": n, "relation": rng.choice(RELATIONS)},
            _text(rng) + "".join(f" The {word} again." for _ in range(k)))


def _forbidden(rng: random.Random) -> tuple[dict[str, Any], str]:
    words = rng.sample(KEYWORDS, 2)
    body = _text(rng)
    pick = rng.random()
    if pick < 0.35:
        body += f" Then the {words[1]} came."
    elif pick < 0.5:
        body += f" Then the {words[0]}s came."  # only as part of a longer word
    return {"forbidden_words": words}, body


def _letters(rng: random.Random) -> tuple[dict[str, Any], str]:
    body = _text(rng)
    letter = rng.choice("aeinorstlz")
    count = body.lower().count(letter)
    return ({"letter": letter, "let_frequency": _around(rng, max(count, 1)),
             "let_relation": rng.choice(RELATIONS)}, body)


def _language(rng: random.Random) -> tuple[dict[str, Any], str]:
    code = rng.choice([*FOREIGN, "en"])
    said = code if rng.random() < 0.6 else rng.choice([*FOREIGN, "en"])
    body = _text(rng) if said == "en" else FOREIGN[said] + " " + FOREIGN[said]
    if rng.random() < 0.06:
        body = rng.choice(["1234 5678 90", "$$$ 42 %%% 17", "2024-05-01 12:30"])
    return {"language": code}, body


def _sentence_count(rng: random.Random) -> tuple[dict[str, Any], str]:
    n = rng.randint(1, 8)
    body = _sentences(rng, _around(rng, n) or 1)
    if rng.random() < 0.2:
        body = "Dr. Smith met Mr. Jones at 3 p.m. today. " + body
    return {"num_sentences": n, "relation": rng.choice(RELATIONS)}, body


def _paragraphs(rng: random.Random) -> tuple[dict[str, Any], str]:
    n = rng.randint(1, 5)
    parts = [_text(rng) for _ in range(max(1, _around(rng, n)))]
    glue = rng.choice(["\n***\n", "\n\n***\n\n", " *** "])
    body = glue.join(parts)
    pick = rng.random()
    if pick < 0.1:
        body = "***\n" + body + "\n***"
    elif pick < 0.15:
        body = body + "\n***\n\n***\n" + _text(rng)
    return {"num_paragraphs": n}, body


def _words(rng: random.Random) -> tuple[dict[str, Any], str]:
    body = _sentences(rng, rng.randint(2, 12))
    count = len(body.split())
    return {"num_words": _around(rng, count), "relation": rng.choice(RELATIONS)}, body


def _nth_first(rng: random.Random) -> tuple[dict[str, Any], str]:
    n = rng.randint(2, 4)
    nth = rng.randint(1, n)
    word = rng.choice(["Rivers", "Today", "Lanterns", "However"])
    parts = [_text(rng) for _ in range(max(1, _around(rng, n)))]
    if nth <= len(parts) and rng.random() < 0.7:
        parts[nth - 1] = rng.choice([word, f'"{word}', f"{word},"]) + " " + parts[nth - 1]
    body = "\n\n".join(parts)
    if rng.random() < 0.12:
        body = "\n\n" + body  # a blank block before the first paragraph
    return {"num_paragraphs": n, "nth_paragraph": nth, "first_word": word.lower()}, body


def _placeholders(rng: random.Random) -> tuple[dict[str, Any], str]:
    n = rng.randint(1, 4)
    names = ["[name]", "[address]", "[date]", "[company]", "[city]"]
    k = _around(rng, n)
    body = _text(rng) + " " + " ".join(rng.choice(names) for _ in range(k))
    if rng.random() < 0.1:
        body += " [] [ ]"
    return {"num_placeholders": n}, body


def _postscript(rng: random.Random) -> tuple[dict[str, Any], str]:
    marker = rng.choice(["P.S.", "P.P.S"])
    body = _text(rng)
    pick = rng.random()
    if pick < 0.5:
        body += f"\n\n{rng.choice([marker, marker.lower(), 'P. S.'])} {_sentences(rng, 1)}"
    elif pick < 0.6:
        body += f"\n\n{marker}"  # the marker with nothing after it
    return {"postscript_marker": marker}, body


def _bullets(rng: random.Random) -> tuple[dict[str, Any], str]:
    n = rng.randint(1, 5)
    items = [f"{rng.choice(['* ', '- ', '  * '])}{rng.choice(SENTENCES)}"
             for _ in range(_around(rng, n))]
    return {"num_bullets": n}, _text(rng) + "\n" + "\n".join(items)


def _constrained(rng: random.Random) -> tuple[dict[str, Any], str]:
    pick = rng.random()
    if pick < 0.5:
        return {}, f"{_text(rng)} {rng.choice(OPTIONS)}"
    if pick < 0.75:
        return {}, _text(rng) + " My answer is probably yes."
    return {}, " ".join(rng.sample(OPTIONS, rng.randint(2, 3)))


def _highlights(rng: random.Random) -> tuple[dict[str, Any], str]:
    n = rng.randint(1, 4)
    spans = [rng.choice(["*{}*", "**{}**"]).format(rng.choice(KEYWORDS))
             for _ in range(_around(rng, n))]
    return {"num_highlights": n}, _text(rng) + " " + " ".join(spans)


def _sections(rng: random.Random) -> tuple[dict[str, Any], str]:
    word, n = rng.choice(["Section", "SECTION"]), rng.randint(1, 4)
    k = _around(rng, n)
    empty = rng.random() < 0.12
    parts = [f"{word} {i + 1}\n{'' if empty else _text(rng)}" for i in range(k)]
    return {"section_spliter": word, "num_sections": n}, "\n".join(parts)


def _json(rng: random.Random) -> tuple[dict[str, Any], str]:
    value = json.dumps({"summary": _sentences(rng, 1), "items": rng.sample(KEYWORDS, 2)},
                       indent=rng.choice([None, 2]))
    pick = rng.random()
    if pick < 0.35:
        return {}, value
    if pick < 0.65:
        return {}, f"```{rng.choice(['json', 'JSON', ''])}\n{value}\n```"
    if pick < 0.8:
        return {}, rng.choice(["{}", "[]", '{"a": 1,}'])
    return {}, f"Here is the JSON: {value}"


def _title(rng: random.Random) -> tuple[dict[str, Any], str]:
    pick = rng.random()
    head = ("<<The Old Mill>>\n" if pick < 0.5 else "<<>>\n" if pick < 0.6
            else "<< >>\n" if pick < 0.65 else "")
    return {}, head + _text(rng)


def _two(rng: random.Random) -> tuple[dict[str, Any], str]:
    a, b = _text(rng), _text(rng)
    pick = rng.random()
    if pick < 0.5:
        return {}, f"{a}\n******\n{b}"
    if pick < 0.65:
        return {}, f"{a}\n******\n{a}"
    if pick < 0.8:
        return {}, f"{a}\n******\n{b}\n******\n{_text(rng)}"
    return {}, a


def _repeat(rng: random.Random) -> tuple[dict[str, Any], str]:
    request = "Write a short note about " + rng.choice(KEYWORDS) + " for a friend."
    pick = rng.random()
    if pick < 0.55:
        body = request + "\n" + _text(rng)
    elif pick < 0.7:
        body = request  # the request, and no answer
    elif pick < 0.85:
        body = "Sure! " + request + " " + _text(rng)
    else:
        body = _text(rng)
    return {"prompt_to_repeat": request}, body


def _end(rng: random.Random) -> tuple[dict[str, Any], str]:
    phrase = rng.choice(PHRASES)
    body = _text(rng)
    pick = rng.random()
    if pick < 0.5:
        body += " " + phrase
    elif pick < 0.6:
        body += " " + phrase.lower() + '"'
    elif pick < 0.7:
        body += " " + phrase + " Thanks."
    return {"end_phrase": phrase}, body


def _capital_words(rng: random.Random) -> tuple[dict[str, Any], str]:
    n = rng.randint(1, 8)
    loud = ["NOW", "STOP", "NASA", "DON'T", "I", "U.S.", "WELL-KNOWN", "CANNOT", "OK,fine"]
    words = [rng.choice(loud) for _ in range(_around(rng, n))]
    body = _text(rng) + " " + " ".join(words)
    return {"capital_frequency": n, "capital_relation": rng.choice(RELATIONS)}, body


def _capital(rng: random.Random) -> tuple[dict[str, Any], str]:
    body = _text(rng)
    pick = rng.random()
    if pick < 0.5:
        body = body.upper()
    elif pick < 0.6:
        body = FOREIGN[rng.choice(["de", "fr", "es"])].upper()
    elif pick < 0.66:
        body = "1234 5678 !!!"
    return {}, body


def _lower(rng: random.Random) -> tuple[dict[str, Any], str]:
    body = _text(rng)
    pick = rng.random()
    if pick < 0.5:
        body = body.lower()
    elif pick < 0.6:
        body = FOREIGN[rng.choice(["de", "fr", "es"])].lower()
    return {}, body


def _comma(rng: random.Random) -> tuple[dict[str, Any], str]:
    body = _sentences(rng, rng.randint(2, 5), commas=rng.random() < 0.5)
    if rng.random() < 0.05:
        body = "苹果，梨和李子"  # fullwidth commas
    return {}, body


def _quotation(rng: random.Random) -> tuple[dict[str, Any], str]:
    body = _text(rng)
    pick = rng.random()
    if pick < 0.5:
        return {}, f'"{body}"'
    if pick < 0.65:
        return {}, f'"{body}'
    return {}, body


MAKERS: dict[str, Callable[[random.Random], tuple[dict[str, Any], str]]] = {
    "keywords:existence": _keywords,
    "keywords:frequency": _frequency,
    "keywords:forbidden_words": _forbidden,
    "keywords:letter_frequency": _letters,
    "language:response_language": _language,
    "length_constraints:number_sentences": _sentence_count,
    "length_constraints:number_paragraphs": _paragraphs,
    "length_constraints:number_words": _words,
    "length_constraints:nth_paragraph_first_word": _nth_first,
    "detectable_content:number_placeholders": _placeholders,
    "detectable_content:postscript": _postscript,
    "detectable_format:number_bullet_lists": _bullets,
    "detectable_format:constrained_response": _constrained,
    "detectable_format:number_highlighted_sections": _highlights,
    "detectable_format:multiple_sections": _sections,
    "detectable_format:json_format": _json,
    "detectable_format:title": _title,
    "combination:two_responses": _two,
    "combination:repeat_prompt": _repeat,
    "startend:end_checker": _end,
    "change_case:capital_word_frequency": _capital_words,
    "change_case:english_capital": _capital,
    "change_case:english_lowercase": _lower,
    "punctuation:no_comma": _comma,
    "startend:quotation": _quotation,
}
# A second instruction is drawn only from these: their kwargs do not depend on the response.
_SECOND = ["keywords:existence", "keywords:forbidden_words", "punctuation:no_comma",
           "startend:end_checker", "detectable_format:title", "change_case:english_lowercase",
           "length_constraints:number_words", "detectable_content:postscript"]


def _noise(rng: random.Random, body: str) -> str:
    pick = rng.random()
    if pick < 0.1:
        body = "Sure, here is my response:\n" + body
    elif pick < 0.18:
        body = body + "\nHope this helps, friend!"
    elif pick < 0.24:
        body = "**" + body.replace(". ", ".** **", 1) + "**"
    elif pick < 0.27:
        body = rng.choice(["", "   ", "{}", "***", "******"])
    return body


def generate(count: int, seed: int = 0) -> list[Row]:
    """``count`` rows, the 25 instruction types in turn as the primary one."""
    rng = random.Random(seed)
    ids = list(MAKERS)
    rows = []
    for index in range(count):
        primary = ids[index % len(ids)]
        kwargs, body = MAKERS[primary](rng)
        id_list, kwarg_list = [primary], [kwargs]
        if rng.random() < 0.5:
            second = rng.choice([i for i in _SECOND if i != primary])
            extra, _ = MAKERS[second](rng)
            id_list.append(second)
            kwarg_list.append(extra)
        rows.append({"key": index, "prompt": f"Task {index}.", "instruction_id_list": id_list,
                     "kwargs": kwarg_list, "response": _noise(rng, body)})
    return rows
