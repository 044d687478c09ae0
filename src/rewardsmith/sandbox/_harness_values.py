"""Plain values across the sandbox's pipes: encoded from exact built-in types only.

Part of the in-sandbox runner (see ``_harness.py``): the parts are sent as one text, in the
order of ``_process.HARNESS_PARTS``, so this file imports nothing of rewardsmith.
"""

from __future__ import annotations

import builtins
import json
import math
import os
from typing import Any

_EXACT = (type(None), bool, int, str)
_BUILTINS = dict(builtins.__dict__)
_exit = os._exit
_write = os.write
_type = type
_isfinite = math.isfinite


class _Unencodable(Exception):
    pass


def _plain(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON of exact built-in types (tuples and sets as lists); else refused."""
    if depth > 200:
        raise _Unencodable("nested too deeply")
    kind = _type(value)
    if kind in _EXACT:
        return value
    if kind is float:
        return value if _isfinite(value) else {"__float__": repr(value)}
    if kind is list or kind is tuple:
        return [_plain(v, depth + 1) for v in value]
    if kind is dict:
        out = {}
        for key, item in value.items():
            if _type(key) is not str:
                raise _Unencodable(f"a dict key of type {_type(key).__name__}")
            out[key] = _plain(item, depth + 1)
        return out
    if kind is set or kind is frozenset:
        items = [_plain(v, depth + 1) for v in value]
        try:
            return sorted(items)
        except TypeError as exc:
            raise _Unencodable("a set of unorderable values") from exc
    raise _Unencodable(f"a value of type {kind.__name__}")


def _typed(value: Any, depth: int = 0) -> Any:
    """``value`` with its exact built-in types kept: lists as lists, every other container
    tagged ({"t": tuple}, {"s": set}, {"d": dict pairs}, {"f": non-finite float})."""
    if depth > 200:
        raise _Unencodable("nested too deeply")
    kind = _type(value)
    if kind in _EXACT:
        return value
    if kind is float:
        return value if _isfinite(value) else {"f": repr(value)}
    if kind is list:
        return [_typed(v, depth + 1) for v in value]
    if kind is tuple:
        return {"t": [_typed(v, depth + 1) for v in value]}
    if kind is set or kind is frozenset:
        return {"s": [_typed(v, depth + 1) for v in value]}
    if kind is dict:
        return {"d": [[_typed(k, depth + 1), _typed(v, depth + 1)] for k, v in value.items()]}
    raise _Unencodable(f"a value of type {kind.__name__}")


def _untyped(data: Any, depth: int = 0) -> Any:
    """The inverse of ``_typed``."""
    if depth > 210:
        raise ValueError("nested too deeply")
    if data is None or _type(data) in (bool, int, float, str):
        return data
    if _type(data) is list:
        return [_untyped(v, depth + 1) for v in data]
    if _type(data) is dict and len(data) == 1:
        ((tag, inner),) = data.items()
        if tag == "f":
            return float(inner)
        if tag == "t":
            return tuple(_untyped(v, depth + 1) for v in inner)
        if tag == "s":
            return {_untyped(v, depth + 1) for v in inner}
        if tag == "d":
            return {_untyped(k, depth + 1): _untyped(v, depth + 1) for k, v in inner}
    raise ValueError("not a typed value")


class _Lines:
    """JSON lines over a pair of pipe ends."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.reader = os.fdopen(read_fd, "rb")
        self.write_fd = write_fd

    def send(self, message: Any) -> None:
        data = (json.dumps(message, allow_nan=False) + "\n").encode()
        while data:
            data = data[_write(self.write_fd, data):]

    def receive(self) -> Any:
        line = self.reader.readline()
        if not line:
            raise RuntimeError("the program ended before answering")
        return json.loads(line)
