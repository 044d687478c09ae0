"""The expression grammar: operator precedence over answer tokens.

Lowest to highest: lists (``,``), relations (``= < \\le``...), unions (``\\cup``), sums
(``+ - \\pm``), products (``* / \\cdot``, implicit as in ``2x``), unary signs, powers
(right-associative), postfix ``!`` and ``%``, then primaries. LaTeX commands and environments
are read by the subclass in ``parser``.
"""

from __future__ import annotations

from fractions import Fraction

from .latex import ParseError, Token
from .nodes import (
    Add,
    Coll,
    Const,
    Div,
    Func,
    Matrix,
    Mul,
    Neg,
    Node,
    Num,
    Percent,
    PlusMinus,
    Pow,
    Rel,
    Sym,
    Union_,
)

__all__ = ["Grammar", "FUNCS", "GREEK", "symbol", "multiply", "integer_literal",
           "parse_number_token"]

_MAX_DEPTH = 60
GREEK = {
    "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta",
    "vartheta", "iota", "kappa", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "upsilon",
    "phi", "varphi", "chi", "psi", "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Sigma",
    "Phi", "Psi", "Omega",
}
FUNCS = {"sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "sinh", "cosh",
         "tanh", "log", "ln", "exp", "lg"}
_RELATIONS = {
    "le": "<=", "leq": "<=", "leqslant": "<=", "ge": ">=", "geq": ">=", "geqslant": ">=",
    "lt": "<", "gt": ">", "ne": "!=", "neq": "!=", "simeq": "=", "equiv": "=",
    "cong": "=", "in": "in", "approx": "~",
}
_MULTIPLY = {"cdot", "times", "ast"}
_SEPARATORS = {("op", ","), ("op", ";")}
_TOP_SEPARATORS = _SEPARATORS | {("op", "\\\\")}
_OPERAND_CMDS = {"frac", "sqrt", "binom", "pi", "infty", "lfloor", "lceil", "langle", "lvert"}


def parse_number_token(text: str) -> Num:
    """``1.50`` -> 3/2 with 2 places and 3 significant digits; ``1e3`` -> 1000 (exact)."""
    mantissa, _, exponent = text.lower().partition("e")
    exp = int(exponent) if exponent else 0
    if abs(exp) > 4000:
        raise ParseError("exponent too large")
    value = Fraction(mantissa + ("0" if mantissa.endswith(".") else "")) * Fraction(10) ** exp
    whole, dot, frac = mantissa.partition(".")
    places = len(frac) - exp if dot and frac else None
    digits = len((whole + frac).lstrip("0")) if dot and frac else 0
    return Num(value, places if places is not None and places > 0 else None, digits)


def _repeating(text: str) -> Num:
    head, repeat = text.split("|")
    whole, _, frac = head.partition(".")
    value = Fraction(whole or "0") + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)
    value += Fraction(int(repeat), 10 ** len(frac) * (10 ** len(repeat) - 1))
    return Num(value)

class Grammar:
    """A token cursor and the precedence levels; subclasses read commands and environments."""

    def __init__(self, tokens: list[Token]):
        self.toks = tokens
        self.i = 0
        self.depth = 0

    # -- hooks for LaTeX commands (see parser._Parser)

    def command(self, name: str) -> Node:
        raise ParseError(f"unsupported LaTeX command \\{name}")

    def word(self, text: str) -> Node:
        raise ParseError(f"unsupported word {text!r}")

    def environment(self, env: str) -> Node:
        raise ParseError(f"unsupported environment {env!r}")

    def subscripted(self, name: str) -> Node:
        return symbol(name)

    # -- cursor

    def peek(self, ahead: int = 0) -> Token | None:
        index = self.i + ahead
        return self.toks[index] if index < len(self.toks) else None

    def take(self) -> Token:
        tok = self.peek()
        if tok is None:
            raise ParseError("unexpected end of answer")
        self.i += 1
        return tok

    def accept(self, kind: str, text: str) -> bool:
        if self.peek() == (kind, text):
            self.i += 1
            return True
        return False

    def expect(self, kind: str, text: str) -> None:
        if not self.accept(kind, text):
            raise ParseError(f"expected {text!r}, found {self.peek()!r}")

    def enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise ParseError("answer nested too deeply")

    # -- grammar

    def top(self) -> Node:
        """The whole answer. ``;`` between groups of ``,`` items makes each group a tuple:
        ``p=5,q=2;p=7,q=2`` is two pairs. Separators in a row (``19, 46, and 82``) are one."""
        groups: list[list[Node]] = [[self.relation()]]
        while (tok := self.peek()) in _TOP_SEPARATORS:
            self.skip_separators()
            if self.peek() is None:
                break  # a trailing separator
            if tok == ("op", ";"):
                groups.append([])
            groups[-1].append(self.relation())
        if self.peek() is not None:
            raise ParseError(f"unexpected {self.peek()!r}")
        if len(groups) > 1 and any(len(group) > 1 for group in groups):
            items = [g[0] if len(g) == 1 else Coll("delim", tuple(g), "(", ")") for g in groups]
        else:
            items = [item for group in groups for item in group]
        return items[0] if len(items) == 1 else Coll("list", tuple(items))

    def skip_separators(self) -> None:
        while self.peek() in _TOP_SEPARATORS:
            self.i += 1

    def items(self) -> list[Node]:
        out = [self.relation()]
        while self.peek() in _SEPARATORS:
            while self.peek() in _SEPARATORS:
                self.i += 1
            out.append(self.relation())
        return out

    def relop(self) -> str | None:
        tok = self.peek()
        if tok is None:
            return None
        kind, text = tok
        if kind == "op" and text in ("=", "<", ">"):
            if text != "=" and self.peek(1) == ("op", "="):
                self.i += 1
                text += "="
            self.i += 1
            return text
        if kind == "op" and text == "!" and self.peek(1) == ("op", "="):
            self.i += 2
            return "!="
        if kind == "cmd" and text in _RELATIONS:
            self.i += 1
            return _RELATIONS[text]
        return None

    def relation(self) -> Node:
        sides = [self.ratio()]
        ops: list[str] = []
        while (op := self.relop()) is not None:
            ops.append(op)
            sides.append(self.ratio())
        return sides[0] if not ops else Rel(tuple(sides), tuple(ops))

    def ratio(self) -> Node:
        """``7:32`` (a ratio) and ``12:00`` (a time): ordered parts, compared part by part."""
        parts = [self.union()]
        while self.accept("op", ":"):
            parts.append(self.union())
        return parts[0] if len(parts) == 1 else Coll("delim", tuple(parts), ":", ":")

    def union(self) -> Node:
        parts = [self.additive()]
        while self.peek() in (("cmd", "cup"), ("id", "U")):
            self.i += 1
            parts.append(self.additive())
        return parts[0] if len(parts) == 1 else Union_(tuple(parts))

    def additive(self) -> Node:
        terms = [self.unary()]
        while True:
            tok = self.peek()
            if tok == ("op", "+"):
                self.i += 1
                terms.append(self.unary())
            elif tok == ("op", "-"):
                self.i += 1
                terms.append(Neg(self.unary()))
            elif tok in (("cmd", "pm"), ("cmd", "mp")):
                self.i += 1
                left = terms[0] if len(terms) == 1 else Add(tuple(terms))
                terms = [PlusMinus(left, self.term(), 1 if tok[1] == "pm" else -1)]
            else:
                break
        return terms[0] if len(terms) == 1 else Add(tuple(terms))

    def unary(self) -> Node:
        tok = self.peek()
        if tok == ("op", "-"):
            self.i += 1
            return Neg(self.unary())
        if tok == ("op", "+"):
            self.i += 1
            return self.unary()
        if tok in (("cmd", "pm"), ("cmd", "mp")):
            self.i += 1
            return PlusMinus(None, self.unary(), 1 if tok[1] == "pm" else -1)
        return self.term()

    def term(self) -> Node:
        node = self.power()
        while True:
            tok = self.peek()
            if tok is None or isinstance(node, Coll):
                return node
            if isinstance(node, Matrix):
                # A product of matrices (A B, A \\cdot B) is kept; anything else ends the term.
                if tok[0] == "begin":
                    node = multiply(node, self.power())
                    continue
                if not (tok == ("op", "*") or (tok[0] == "cmd" and tok[1] in _MULTIPLY)):
                    return node
            if tok == ("op", "*") or (tok[0] == "cmd" and tok[1] in _MULTIPLY):
                self.i += 1
                node = multiply(node, self.signed_power())
            elif tok == ("op", "/") or tok == ("cmd", "div"):
                self.i += 1
                node = Div(node, self.signed_power())
            elif tok == ("cmd", "frac") and integer_literal(node):
                node = self.mixed_number(node)
            elif tok[0] == "num" and self.peek(1) == ("op", "^") and _ends_in_power(node):
                node = multiply(node, self.power())  # 2^6 3^5 5^4: powers side by side
            elif tok[0] == "num" and self.peek(1) == ("op", "/") and integer_literal(node) \
                    and not isinstance(node, Pow):
                node = self.spaced_mixed_number(node)
            elif self.starts_operand(tok):
                node = multiply(node, self.power())
            else:
                return node

    def signed_power(self) -> Node:
        if self.accept("op", "-"):
            return Neg(self.signed_power())
        self.accept("op", "+")
        return self.power()

    def mixed_number(self, whole: Node) -> Node:
        """``2\\frac{1}{2}`` is two and a half, as in school books; ``2\\frac{x}{2}`` is a product."""
        frac = self.power()
        if isinstance(frac, Div) and integer_literal(frac.num) and integer_literal(frac.den):
            if isinstance(whole, Neg):
                return Neg(Add((whole.arg, frac)))
            return Add((whole, frac))
        return multiply(whole, frac)

    def spaced_mixed_number(self, whole: Node) -> Node:
        """``1 1/2`` is one and a half: a whole number, a space, a proper fraction of whole
        numbers (the tokens after a number are another number only across a space)."""
        numerator = self.take()
        self.expect("op", "/")
        denominator = self.take()
        if numerator[0] != "num" or denominator[0] != "num" or not (
                numerator[1].isdigit() and denominator[1].isdigit()) or \
                not 0 < int(numerator[1]) < int(denominator[1]):
            raise ParseError(f"a number then {numerator[1]}/{denominator[1]} is not a mixed number")
        frac = Div(parse_number_token(numerator[1]), parse_number_token(denominator[1]))
        if isinstance(whole, Neg):
            return Neg(Add((whole.arg, frac)))
        return Add((whole, frac))

    def starts_operand(self, tok: Token) -> bool:
        kind, text = tok
        if kind in ("id", "fword", "rep"):
            return True
        if kind == "cmd":
            return text in _OPERAND_CMDS or text in FUNCS or text in GREEK
        return kind == "op" and text in ("(", "{")

    def power(self) -> Node:
        base = self.postfix(self.primary())
        if self.accept("op", "^"):
            return Pow(base, self.exponent())
        return base

    def exponent(self) -> Node:
        self.enter()
        tok = self.take()
        kind, text = tok
        node: Node
        if tok == ("op", "{"):
            node = self.group("}")
        elif tok == ("op", "("):
            node = self.group(")")
        elif tok in (("op", "-"), ("op", "+")):
            inner = self.exponent()
            node = Neg(inner) if text == "-" else inner
        elif kind == "num":
            node = parse_number_token(text)
        elif kind == "id":
            node = symbol(text)
        elif kind in ("cmd", "fword"):
            self.i -= 1
            node = self.primary()
        else:
            raise ParseError(f"bad exponent {text!r}")
        self.depth -= 1
        if self.accept("op", "^"):
            node = Pow(node, self.exponent())
        return node

    def postfix(self, node: Node) -> Node:
        while True:
            if self.peek() == ("op", "!") and self.peek(1) != ("op", "="):
                self.i += 1
                node = Func("factorial", (node,))
            elif self.accept("op", "%"):
                node = Percent(node)
            else:
                return node

    def group(self, closer: str) -> Node:
        items = self.items()
        self.expect("op", closer)
        return items[0] if len(items) == 1 else Coll("list", tuple(items))

    def primary(self) -> Node:
        self.enter()
        try:
            return self._primary()
        finally:
            self.depth -= 1

    def _primary(self) -> Node:
        kind, text = self.take()
        if kind == "num":
            if self.peek() == ("op", "_") and text.isdigit():
                return self.based_number(text)
            return parse_number_token(text)
        if kind == "rep":
            return _repeating(text)
        if kind == "id":
            return self.subscripted(text)
        if kind == "fword":
            return self.word(text)
        if kind == "begin":
            return self.environment(text)
        if kind == "op":
            if text == "(":
                return self.delimited("(", (")", "]"))
            if text == "[":
                return self.delimited("[", (")", "]"))
            if text == "{":
                return self.group("}")
            if text == "|":
                node = self.additive()
                self.expect("op", "|")
                return Func("abs", (node,))
            raise ParseError(f"unexpected {text!r}")
        if kind == "cmd":
            return self.command(text)
        raise ParseError(f"unexpected {text!r}")

    def based_number(self, digits: str) -> Node:
        """``1112112_3`` or ``101_{2}``: digits in a base from 2 to 10, read as their value."""
        self.expect("op", "_")
        braced = self.accept("op", "{")
        kind, base_text = self.take()
        if braced:
            self.expect("op", "}")
        if kind != "num" or not base_text.isdigit() or not 2 <= int(base_text) <= 10:
            raise ParseError(f"bad base subscript {base_text!r}")
        base = int(base_text)
        if len(digits) > 4000 or any(int(d) >= base for d in digits):
            raise ParseError(f"{digits} is not a number in base {base}")
        return Num(Fraction(int(digits, base)))

    def delimited(self, left: str, closers: tuple[str, ...]) -> Node:
        items = self.items()
        close = self.take()
        if close[0] != "op" or close[1] not in closers:
            raise ParseError(f"unclosed {left!r}")
        if len(items) == 1 and (left, close[1]) in (("(", ")"), ("[", "]")):
            return items[0]
        return Coll("delim", tuple(items), left, close[1])


def symbol(name: str) -> Node:
    if name == "e":
        return Const("e")
    if name == "i":
        return Const("i")
    return Sym(name)


def multiply(left: Node, right: Node) -> Node:
    if isinstance(left, Mul):
        return Mul((*left.factors, right))
    return Mul((left, right))


def _ends_in_power(node: Node) -> bool:
    last = node.factors[-1] if isinstance(node, Mul) else node
    return isinstance(last, Pow)


def integer_literal(node: Node) -> bool:
    if isinstance(node, Neg):
        node = node.arg
    return isinstance(node, Num) and node.places is None and node.value.denominator == 1
