"""From an answer string to its expression tree: LaTeX commands, environments, words.

It reads LaTeX as it renders: ``\\frac12`` is 1/2, ``\\sqrt 12`` is √1·2, and ``\\sqrt(2)`` is
malformed (LaTeX would draw √( 2)), so it is refused rather than read as 2 or 4. Plain text
(``sqrt(2)``, ``2^10``, ``1/2``) is read the way people type it.
"""

from __future__ import annotations

import re
from fractions import Fraction

from .grammar import FUNCS, GREEK, Grammar, multiply, parse_number_token, symbol
from .latex import ParseError, Token, clean, tokenize
from .nodes import ELLIPSIS, Coll, Const, Div, Func, Inf, Matrix, Neg, Node, Num, Pow, Sym, Text

__all__ = ["parse", "parse_number_token"]

_MATRIX_ENVS = {"matrix", "pmatrix", "bmatrix", "Bmatrix", "vmatrix", "Vmatrix", "smallmatrix",
                "array"}
_ROW_ENVS = {"aligned", "align", "alignat", "gather", "gathered", "cases", "split", "eqnarray"}
_TEXT_KEEP = re.compile(r"[^a-z0-9]")
_PUNCTUATION = {("op", ","), ("op", ";"), ("op", "("), ("op", ")")}
_INVERSE = {"sin": "arcsin", "cos": "arccos", "tan": "arctan"}
# "1, 3, 5, \\ldots, 99": every spelling of the ellipsis is one mark, equal only to itself.
_ELLIPSES = {"ldots", "dots", "cdots", "dotsc", "dotsb", "dotso"}
# Commands that operate on what follows: read as a symbol they would change the meaning.
_OPERATORS = {"int", "iint", "iiint", "oint", "lim", "limsup", "liminf", "max",
              "min", "sup", "inf", "det", "gcd", "lcm", "mod", "pmod", "bmod", "over", "choose",
              "not", "neg", "cap", "setminus", "to", "rightarrow", "Rightarrow", "implies",
              "iff", "mid", "vdots", "ddots", "partial", "nabla",
              "overline", "underbrace", "overbrace", "stackrel", "rangle", "rfloor", "rceil",
              "rvert", "end", "begin", "frac", "sqrt", "binom"}


def parse(answer: str) -> Node:
    """The tree of one answer string; raises ``ParseError`` when it cannot be read."""
    tokens = tokenize(clean(answer))
    words = [t[1] for t in tokens if t[0] == "text"]
    if words:
        if all(t[0] in ("text", "id") or t in _PUNCTUATION for t in tokens):
            # "No solution": short words split into letters are words too, not a product.
            words = [t[1] for t in tokens if t[0] in ("text", "id")]
            tokens = []
        tokens = _drop_words(tokens)
        math = [t for t in tokens if t not in _PUNCTUATION]
        if not math:
            text = _TEXT_KEEP.sub("", " ".join(words).lower())
            if not text:
                raise ParseError("empty answer")
            return Text(text)
    while tokens and tokens[0] in (("op", "="), ("op", ":")):
        tokens = tokens[1:]  # "= 1/4" after a label
    if not tokens:
        raise ParseError("empty answer")
    return _Parser(tokens).top()


def _drop_words(tokens: list[Token]) -> list[Token]:
    """Drop unit and filler words (and a unit's power, as in cm^2); keep the math."""
    kept: list[Token] = []
    index = 0
    while index < len(tokens):
        kind, _ = tokens[index]
        index += 1
        if kind != "text":
            kept.append(tokens[index - 1])
            continue
        if index < len(tokens) and tokens[index] == ("op", "^"):
            following = tokens[index + 1 : index + 4]
            if following[:1] and following[0][0] == "num":
                index += 2
            elif len(following) == 3 and following[0] == ("op", "{") and following[2] == (
                    "op", "}"):
                index += 4
    return kept


class _Parser(Grammar):
    """The grammar plus LaTeX: arguments, commands, functions, environments."""

    def latex_arg(self) -> Node:
        """One argument of \\frac, \\sqrt, \\binom: a braced group, one digit, or one symbol."""
        tok = self.peek()
        if tok is None:
            raise ParseError("missing argument")
        kind, text = tok
        if tok == ("op", "{"):
            self.i += 1
            self.enter()
            node = self.relation()
            self.expect("op", "}")
            self.depth -= 1
            return node
        if kind == "num":
            if len(text) > 1:
                self.toks[self.i] = ("num", text[1:])
            else:
                self.i += 1
            if not text[0].isdigit():
                raise ParseError("malformed argument")
            return Num(Fraction(int(text[0])))
        if kind == "id":
            self.i += 1
            return symbol(text)
        if kind == "cmd" and text not in ("{", "}"):
            return self.primary()
        raise ParseError(f"LaTeX argument must be braced, not {text!r}")

    def subscripted(self, name: str) -> Node:
        if not self.accept("op", "_"):
            return symbol(name)
        tok = self.take()
        if tok == ("op", "{"):
            parts = []
            while (inner := self.take()) != ("op", "}"):
                parts.append(inner[1])
            return Sym(f"{name}_{''.join(parts)}")
        return Sym(f"{name}_{tok[1]}")

    def word(self, text: str) -> Node:
        if text == "pi":
            return Const("pi")
        if text in ("inf", "infty", "infinity", "oo"):
            return Inf(1)
        if text == "sqrt":
            self.expect("op", "(")
            return Func("sqrt", (self.group(")"),))
        return self.function(text)

    def function(self, name: str) -> Node:
        base: Node | None = None
        if name == "lg":
            name, base = "log", Num(Fraction(10))
        if self.accept("op", "_"):
            base = self.latex_arg()
        power = self.exponent() if self.accept("op", "^") else None
        if name in _INVERSE and power == Neg(Num(Fraction(1))):
            name, power = _INVERSE[name], None  # \sin^{-1} is arcsin
        if self.accept("op", "("):
            arg = self.group(")")
        elif self.peek() == ("op", "{"):
            arg = self.latex_arg()
        else:
            arg = self.power()
            while (tok := self.peek()) is not None and self.starts_operand(tok) and not (
                    tok[0] in ("cmd", "fword") and tok[1] in FUNCS):
                arg = multiply(arg, self.power())
        node: Node = Func(name, (arg,) if base is None else (arg, base))
        return node if power is None else Pow(node, power)

    def command(self, name: str) -> Node:
        if name == "frac":
            return Div(self.latex_arg(), self.latex_arg())
        if name == "binom":
            return Func("binom", (self.latex_arg(), self.latex_arg()))
        if name == "sqrt":
            index: Node | None = None
            if self.accept("op", "["):
                index = self.group("]")
            if self.peek() == ("op", "("):
                raise ParseError("\\sqrt needs braces: \\sqrt(2) is malformed")
            arg = self.latex_arg()
            return Func("sqrt", (arg,) if index is None else (arg, index))
        if name in ("sum", "prod"):
            return self.big_operator(name)
        if name == "pi":
            return Const("pi")
        if name == "infty":
            return Inf(1)
        if name in _ELLIPSES:
            return ELLIPSIS
        if name in ("emptyset", "varnothing"):
            return Coll("set", ())
        if name in GREEK:
            return Sym(name)
        if name in FUNCS:
            return self.function(name)
        if name == "{":
            items: list[Node] = [] if self.peek() == ("cmd", "}") else self.items()
            self.expect("cmd", "}")
            return Coll("set", tuple(items))
        if name == "langle":
            items = self.items()
            self.expect("cmd", "rangle")
            return Coll("delim", tuple(items), "(", ")")
        if name in ("lfloor", "lceil", "lvert"):
            closer = {"lfloor": "rfloor", "lceil": "rceil", "lvert": "rvert"}[name]
            node = self.additive()
            self.expect("cmd", closer)
            return Func({"lfloor": "floor", "lceil": "ceil", "lvert": "abs"}[name], (node,))
        if name.isalpha() and name not in _OPERATORS:
            # An unknown name (\\zzz, \\angle) is a symbol: it can still be a label in
            # ``\\angle A = 30``, and it never equals a number.
            return Sym(f"\\{name}")
        raise ParseError(f"unsupported LaTeX command \\{name}")

    def big_operator(self, name: str) -> Node:
        """``\\sum_{k=0}^{n-1} F_k F_{n-k-1}``: kept whole, as (body, index range, upper bound).
        Two are equal when their ranges are and their bodies are the same function."""
        lower: Node | None = None
        upper: Node | None = None
        for _ in range(2):
            if self.accept("op", "_"):
                lower = self.latex_arg()
            elif self.accept("op", "^"):
                upper = self.latex_arg()
        if lower is None or upper is None:
            raise ParseError(f"\\{name} needs both of its limits")
        body = self.power()
        while (tok := self.peek()) is not None and self.starts_operand(tok):
            body = multiply(body, self.power())
        return Func(name, (body, lower, upper))

    def environment(self, env: str) -> Node:
        if env == "array" and self.accept("op", "{"):
            while self.take() != ("op", "}"):
                pass  # the column spec
        if env in _ROW_ENVS:
            # Alignment marks (x &= 2) carry no meaning here.
            end = self.toks.index(("end", env), self.i) if ("end", env) in self.toks else -1
            if end < 0:
                raise ParseError(f"unclosed environment {env!r}")
            self.toks[self.i : end] = [t for t in self.toks[self.i : end] if t != ("op", "&")]
        rows: list[list[Node]] = []
        row: list[Node] = []
        while True:
            if self.accept("end", env):
                if row:
                    rows.append(row)
                break
            if self.accept("op", "\\\\"):
                if row:
                    rows.append(row)
                row = []
                continue
            if row and not self.accept("op", "&"):
                raise ParseError("expected '&' between matrix cells")
            row.append(self.relation())
        if env in _MATRIX_ENVS:
            if not rows or any(len(r) != len(rows[0]) for r in rows):
                raise ParseError("ragged or empty matrix")
            return Matrix(tuple(tuple(r) for r in rows))
        if env in _ROW_ENVS:
            flat = [cell for r in rows for cell in r]
            if not flat:
                raise ParseError("empty environment")
            return flat[0] if len(flat) == 1 else Coll("list", tuple(flat))
        raise ParseError(f"unsupported environment {env!r}")
