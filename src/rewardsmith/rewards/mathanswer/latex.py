"""From an answer string (LaTeX or plain text) to a flat list of tokens.

Cosmetic LaTeX is removed first (``$``, ``\\left``, spacing, ``\\dfrac``, degrees, thousands
separators); ``\\text{...}`` becomes a text token the parser can drop as a unit or keep as a word
answer. Everything is linear in the input; inputs longer than ``MAX_CHARS`` are refused.
"""

from __future__ import annotations

import re

__all__ = ["Token", "ParseError", "MAX_CHARS", "clean", "tokenize", "undouble", "decimal_comma"]

MAX_CHARS = 4000

Token = tuple[str, str]  # (kind, text); kinds: num rep id cmd fword text op begin end


class ParseError(ValueError):
    """The answer is not a math expression this parser understands (or is malformed)."""


_UNICODE = {
    "−": "-", "–": "-", "×": "\\times ", "·": "\\cdot ", "÷": "\\div ", "π": "\\pi ",
    "∞": "\\infty ", "√": "\\sqrt ", "≤": "\\le ", "≥": "\\ge ", "≠": "\\ne ", "±": "\\pm ",
    "∓": "\\mp ", "∪": "\\cup ", "°": "^\\circ ", "（": "(", "）": ")", "，": ",", "：": ":",
    "…": "\\ldots ",
    "²": "^2", "³": "^3", "⁻¹": "^{-1}",
}
_UNICODE_RE = re.compile("|".join(map(re.escape, _UNICODE)))

# Removed outright: they change how a formula looks, not what it means.
_COSMETIC = re.compile(
    r"(?<!\\)\\(?:displaystyle|textstyle|scriptstyle|limits|nolimits|!|bigl|bigr|Bigl|Bigr|biggl|biggr"
    r"|big|Big|bigg|Bigg)(?![a-zA-Z])"
    r"|(?<!\\)\\(?:left|right)(?:\.|(?![a-zA-Z]))"
)
# \quad glued to the next word (``\quadx_2``) is still a space: no other command starts so.
_SPACING = re.compile(
    r"(?<!\\)\\q?quad|(?<!\\)\\(?:enspace|thinspace|medspace|thickspace)(?![a-zA-Z])"
    r"|(?<!\\)\\[;: ]|~")
# A degree sign in any spelling; 90^\circ is the number 90.
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\circ(?![a-zA-Z])|\\degree(?![a-zA-Z])")
# Inside a trigonometric function a degree is pi/180: \sin 30^\circ is 1/2.
_TRIG = re.compile(r"(?<![a-zA-Z])(?:sin|cos|tan|cot|sec|csc)(?![a-zA-Z])")
_ANGLE = re.compile(r"(\d+(?:\.\d+)?|\{[^{}]*\}|(?<![\\a-zA-Z])[a-zA-Z])\s*"
                    r"(?:\^\s*\{?\s*\\circ\s*\}?|\\degree(?![a-zA-Z]))")
# A time of day with A.M./P.M. (also in \text{}), read on the 24-hour clock: 8:34 P.M. is 20:34.
_CLOCK = re.compile(
    r"(?<![\d:])(\d{1,2}):(\d{2})(:\d{2})?\s*(?:\\(?:text|mathrm|mbox)\s*\{\s*)?"
    r"([AaPp])\.?\s*[Mm]\.?(?:\s*\})?(?![a-zA-Z])")
# Currency signs other than $ mean what $ means: nothing to the value.
_CURRENCY = re.compile("[€£¥₹₩₽¢]")
_STRAY_BACKSLASH = re.compile(r"(?<!\\)\\$")  # "185\\": a stray backslash at the end
_FRAC_ALIASES = re.compile(r"\\[dtc]frac(?![a-zA-Z])")
_BINOM_ALIASES = re.compile(r"\\[dt]binom(?![a-zA-Z])")
# 1,000 / 1{,}000 / 1\,000 / 1\ 000: a thousands separator only between groups of three digits.
_THOUSANDS = re.compile(
    r"(?<![\d.])[1-9]\d{0,2}(?:(?:,|\s?\{,\s?\}\s?|\\,|,\\!\s?)\d{3})+(?![\d])")
_THOUSANDS_SEP = re.compile(r",\\!\s?|\s?\{,\s?\}\s?|,|\\,")
# Data escaped twice (``\\frac``, ``\\left(``): a doubled backslash before a command name
# that an answer uses is that command, not a line break followed by letters.
_DOUBLED = re.compile(
    r"(?<!\\)\\\\(?=(?:frac|dfrac|tfrac|cfrac|left|right|sqrt|le|leq|ge|geq|lt|gt|ne|neq|pi"
    r"|cdot|times|div|infty|boxed|fbox|text|textbf|mathrm|mathbf|begin|end|pm|mp|cup|cap|in"
    r"|quad|qquad|circ|degree|approx|binom|dbinom|log|ln|sin|cos|tan|theta|alpha|beta|over"
    r"|mbox|emptyset|varnothing|dots|ldots|cdots|angle|triangle|sum|prod|int|lim|vec)(?![a-zA-Z]))"
    r"|(?<!\\)\\\\(?=[(){}\[\]$%,!])")


def clean(text: str) -> str:
    """Remove what does not change an answer's meaning; the result is still LaTeX."""
    if len(text) > MAX_CHARS:
        raise ParseError(f"answer longer than {MAX_CHARS} characters")
    text = undouble(_UNICODE_RE.sub(lambda m: _UNICODE[m.group(0)], text))
    text = text.replace("\\$", "").replace("$", "")
    text = _CURRENCY.sub("", text)
    text = _THOUSANDS.sub(_join_thousands, text)
    text = text.replace("\\,", " ").replace("{,}", ",")
    text = _CLOCK.sub(_twenty_four_hour, text)
    if _TRIG.search(text):
        text = _ANGLE.sub(r"(\1\\cdot\\frac{\\pi}{180})", text)
    text = _DEGREES.sub("", text)
    text = _COSMETIC.sub("", text)
    text = _SPACING.sub(" ", text)
    text = _FRAC_ALIASES.sub("\\\\frac", text)
    text = _BINOM_ALIASES.sub("\\\\binom", text)
    text = text.replace("\\%", "%")
    text = text.strip()
    # \( ... \) and \[ ... \] around the whole answer.
    for opening, closing in (("\\(", "\\)"), ("\\[", "\\]")):
        if text.startswith(opening) and text.endswith(closing):
            text = text[2:-2].strip()
    return _STRAY_BACKSLASH.sub("", text.rstrip(". ")).rstrip(". ")


_DECIMAL_COMMA = re.compile(r"\s*\$?\s*(-?(?:0|[1-9]\d*)),(\d+)\s*\$?\s*")


def decimal_comma(text: str) -> str | None:
    """``1000,99`` -> ``1000.99`` when a comma can only be a decimal comma; else None.

    The comma must sit between digits with no space, and what follows it must not be a
    thousands group (exactly three digits after a nonzero integer part): ``1,000`` stays a
    thousand, ``0,111`` and ``1,22`` are decimals. Used only against a single number.
    """
    match = _DECIMAL_COMMA.fullmatch(text)
    if match is None:
        return None
    whole, fraction = match.groups()
    if len(fraction) == 3 and whole.lstrip("-") != "0":
        return None
    return f"{whole}.{fraction}"


def undouble(text: str) -> str:
    """``\\\\frac{1}{2}`` (escaped twice in the data) as ``\\frac{1}{2}``."""
    return _DOUBLED.sub(lambda _: "\\", text) if "\\\\" in text else text


def _twenty_four_hour(match: re.Match[str]) -> str:
    hour, minutes, seconds, half = match.groups()
    if not 1 <= int(hour) <= 12:
        return match.group(0)  # 13:00 P.M. is not a time: left for the parser to refuse
    hour24 = int(hour) % 12 + (12 if half in "Pp" else 0)
    return f"{hour24}:{minutes}{seconds or ''}"


def _join_thousands(match: re.Match[str]) -> str:
    number = match.group(0)
    if "{" not in number and "\\" not in number:
        # [1,100] and (0,250) are pairs, not numbers: a bare comma inside brackets is a list.
        before = match.string[: match.start()].rstrip()[-1:]
        after = match.string[match.end() :].lstrip()[:1]
        if before in ("(", "[", "{") and after in (")", "]", "}", "\\"):
            return number
    return _THOUSANDS_SEP.sub("", number)


_TOKEN = re.compile(
    r"(?P<ws>\s+)"
    r"|(?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
    r"|(?P<cmd>\\(?:[a-zA-Z]+|.))"
    r"|(?P<word>[a-zA-Z]+)"
    r"|(?P<op>[-+*/^_()\[\]{},;:=<>!|&%'])"
    r"|(?P<other>.)",
    re.DOTALL,
)

# Plain-text words that mean math.
_FWORDS = {
    "sqrt", "sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "sinh",
    "cosh", "tanh", "log", "ln", "exp", "pi", "inf", "infty", "infinity", "oo",
}
# Two-letter unit words, dropped like \text{cm}; longer unknown words are always text.
_UNIT_WORDS = {"cm", "mm", "km", "kg", "mg", "ml", "ft", "yd", "mi", "oz", "lb", "hr", "in"}
_TEXT_COMMANDS = {"text", "textbf", "textit", "textrm", "textnormal", "textup", "mbox",
                  "hbox", "mathrm", "operatorname", "textsf", "texttt"}
# Decorations whose argument is kept as is.
_UNWRAP = {"mathbf", "boldsymbol", "bm", "mathit", "mathnormal", "pmb", "vec", "hat", "bar",
           "mathbb", "mathcal", "mathsf", "tilde", "widehat", "underline", "overrightarrow"}
_GLUED_SEPARATOR = re.compile(r"(?:or|and)([A-Z][A-Za-z]*)")
_SEPARATOR_WORDS = {"or", "and", ",", "and/or", ";"}
_SINGLE_LETTER = re.compile(r"^\(?\s*([A-Za-z])\s*\)?\.?$")
_MATHLIKE = re.compile(r"^[\d\s.,+\-/^()*=]+$")


def _braced(text: str, start: int) -> tuple[str, int] | None:
    """The content of the ``{...}`` group opening at or after ``start`` and the index after it."""
    index = start
    while index < len(text) and text[index] in " \t\n":
        index += 1
    if index >= len(text) or text[index] != "{":
        return None
    depth = 0
    for end in range(index, len(text)):
        if text[end] == "{":
            depth += 1
        elif text[end] == "}":
            depth -= 1
            if depth == 0:
                return text[index + 1 : end], end + 1
    raise ParseError("unbalanced braces")


def _text_tokens(content: str) -> list[Token]:
    content = content.replace("\\$", "").replace("~", " ").strip()
    if not content:
        return []
    if content.lower() in _SEPARATOR_WORDS:
        return [("op", ",")]
    if content.lower() in ("infinity", "inf", "infty"):
        return [("fword", "infinity")]
    letter = _SINGLE_LETTER.match(content)
    if letter:
        return [("id", letter.group(1))]
    if _MATHLIKE.match(content):
        return tokenize(content)
    return [("text", content)]


def tokenize(text: str) -> list[Token]:
    """Tokens of a cleaned answer. Raises ``ParseError`` on what can never be math."""
    tokens: list[Token] = []
    pos = 0
    length = len(text)
    while pos < length:
        match = _TOKEN.match(text, pos)
        assert match is not None  # the pattern matches any character
        kind = match.lastgroup or "other"
        value = match.group(0)
        pos = match.end()
        if kind == "ws":
            continue
        if kind == "num":
            if value.endswith(".") and text.startswith("\\overline", pos):
                pos = _repeating(text, pos + len("\\overline"), value, tokens)
                continue
            tokens.append(("num", value))
        elif kind == "word":
            glued = _GLUED_SEPARATOR.match(value)
            if glued and tokens and (tokens[-1][0] == "num" or tokens[-1] == ("op", ")")):
                # "W(x)=1orW(x)=-1": a separator word run into the next name.
                tokens.append(("op", ","))
                value = glued.group(1)
                pos -= len(value)
                continue
            lower = value.lower()
            if value in _FWORDS or lower in ("infinity", "inf"):
                tokens.append(("fword", lower))
            elif lower in _SEPARATOR_WORDS:
                tokens.append(("op", ","))
            elif len(value) >= 3 or (lower in _UNIT_WORDS and not _glued(text, match.start())):
                tokens.append(("text", value))
            else:
                tokens.extend(("id", letter) for letter in value)
        elif kind == "cmd":
            name = value[1:]
            if name in _TEXT_COMMANDS:
                group = _braced(text, pos)
                if group is None:
                    raise ParseError(f"\\{name} without braces")
                content, pos = group
                tokens.extend(_text_tokens(content))
            elif name in _UNWRAP:
                continue  # the braced argument that follows stays a group
            elif name in ("begin", "end"):
                group = _braced(text, pos)
                if group is None:
                    raise ParseError(f"\\{name} without an environment name")
                env, pos = group
                tokens.append((name, env.strip().rstrip("*")))
            elif name == "\\":
                tokens.append(("op", "\\\\"))
            elif name == "overline" and tokens and tokens[-1][0] == "num" and "." in tokens[-1][1]:
                pos = _repeating(text, pos, tokens.pop()[1], tokens)
            else:
                tokens.append(("cmd", name))
        elif kind == "op":
            tokens.append(("op", value))
        else:
            raise ParseError(f"unexpected character {value!r}")
    return tokens


def _glued(text: str, start: int) -> bool:
    """Is the word at ``start`` written right after a digit (``10cm``)? Then its one or two
    letters are variables, as in ``10m`` = 10·m; a unit is written apart (``10 cm``) or spelled
    out (``10weeks``)."""
    return start > 0 and text[start - 1].isdigit()


def _repeating(text: str, start: int, head: str, tokens: list[Token]) -> int:
    """``0.1\\overline{6}``: a repeating decimal, kept as one token ``0.1|6``.

    ``start`` is just after ``\\overline``; returns the index after its group.
    """
    group = _braced(text, start)
    if group is None or not group[0].strip().isdigit():
        raise ParseError("\\overline must hold the repeating digits")
    tokens.append(("rep", f"{head}|{group[0].strip()}"))
    return group[1]
