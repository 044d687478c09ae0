"""The program's side of a Python script test: load it, answer calls with plain values.

Part of the in-sandbox runner (see ``_harness.py``), and also run alone: the runner starts a
fresh interpreter on ``_harness_values.py`` and this file (``_process.serve_source``), so the
program's process holds nothing of the runner, the job or the test.
"""

from __future__ import annotations

import builtins
import os
import sys
from typing import Any

from ._harness_values import _exit, _Lines, _type, _typed, _Unencodable, _untyped  # inlined


def _serve() -> None:
    """The program's side of a script test: load it, then answer calls with plain values."""
    sys.stdin = open(os.devnull, encoding="utf-8")
    runner = _Lines(3, 4)
    source = runner.receive()["source"]
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(compile(source, "<program>", "exec"), namespace)
    except BaseException as exc:
        runner.send({"error": f"{_type(exc).__name__}: {exc}"})
        _exit(1)
    runner.send({"ready": True})
    while True:
        request = runner.receive()
        try:
            func = _program_function(namespace, request["fn"])
            args = _untyped(request["args"])
            kwargs = {k: _untyped(v) for k, v in request["kwargs"].items()}
            reply: dict[str, Any] = {"value": _typed(func(*args, **kwargs))}
        except _Unencodable as exc:
            reply = {"error": f"the program returned {exc}", "type": "TypeError"}
        except BaseException as exc:  # the program's error, passed on to the test
            reply = {"error": str(exc)[:500], "type": _type(exc).__name__}
        runner.send(reply)


def _program_function(namespace: dict[str, Any], name: str) -> Any:
    func = namespace.get(name)
    if func is None and "Solution" in namespace:  # LeetCode style: a method of Solution
        func = getattr(namespace["Solution"](), name, None)
    if not callable(func):
        raise NameError(f"the program defines no function {name!r}")
    return func
