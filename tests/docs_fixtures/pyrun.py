"""Runs one documentation Python block (top-level ``await`` allowed, as in a notebook).

``python pyrun.py PRELUDE BLOCK``: the page's prelude, then the block, in one namespace on one
event loop. A top-level expression whose line ends in a comment that is a Python literal
(``verdict.equal  # True``) must evaluate to that literal: the page shows it as the output.
"""

from __future__ import annotations

import ast
import asyncio
import io
import sys
import tokenize
from typing import Any

_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


def _comments(source: str) -> dict[int, str]:
    found: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = token.string[1:].strip()
    return found


def _shown(comment: str) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(comment)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def _matches(expected: Any, value: Any) -> bool:
    """`...` in what the page shows stands for any value; a dict with an elided value may
    leave out keys too."""
    if expected is Ellipsis:
        return True
    if isinstance(expected, dict) and isinstance(value, dict):
        elided = any(item is Ellipsis for item in expected.values())
        if not (set(expected) <= set(value) if elided else set(expected) == set(value)):
            return False
        return all(_matches(item, value[key]) for key, item in expected.items())
    if isinstance(expected, (list, tuple)) and isinstance(value, (list, tuple)):
        return type(expected) is type(value) and len(expected) == len(value) and all(
            _matches(a, b) for a, b in zip(expected, value))
    return bool(expected == value)


def _printed(statement: ast.Expr) -> ast.expr | None:
    """The argument of `print(x)`: the page's comment shows what it prints."""
    call = statement.value
    if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
            and call.func.id == "print" and len(call.args) == 1 and not call.keywords):
        return call.args[0]
    return None


def run(path: str, namespace: dict[str, Any], loop: asyncio.AbstractEventLoop) -> None:
    source = open(path, encoding="utf-8").read()
    comments = _comments(source)
    for statement in ast.parse(source, path).body:
        printed = _printed(statement) if isinstance(statement, ast.Expr) else None
        if printed is not None:
            code = compile(ast.Expression(printed), path, "eval", flags=_FLAGS)
        elif isinstance(statement, ast.Expr):
            code = compile(ast.Expression(statement.value), path, "eval", flags=_FLAGS)
        else:
            code = compile(ast.Module([statement], type_ignores=[]), path, "exec", flags=_FLAGS)
        value = eval(code, namespace)
        if asyncio.iscoroutine(value):
            value = loop.run_until_complete(value)
        if printed is not None:
            print(value)
        if isinstance(statement, ast.Expr) and statement.end_lineno in comments:
            literal, expected = _shown(comments[statement.end_lineno])
            if literal and not _matches(expected, value):
                raise AssertionError(f"{path}:{statement.lineno}: the page shows {expected!r}, "
                                     f"the code gives {value!r}")


def main() -> None:
    namespace: dict[str, Any] = {"__name__": "__main__"}
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        for path in sys.argv[1:]:
            run(path, namespace, loop)
    finally:
        loop.close()


if __name__ == "__main__":
    main()
