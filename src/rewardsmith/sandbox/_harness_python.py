"""Running a Python program's tests: forked children for stdin, call and value tests; for
script tests, a runner that never runs the program and a fresh interpreter that does.

Part of the in-sandbox runner (see ``_harness.py``).
"""

from __future__ import annotations

import builtins
import json
import os
import sys
from importlib import import_module
from typing import Any

from ._harness_serve import _program_function  # inlined
from ._harness_values import (  # inlined
    _BUILTINS,  # inlined
    _exit,  # inlined
    _Lines,  # inlined
    _plain,  # inlined
    _type,  # inlined
    _typed,  # inlined
    _Unencodable,  # inlined
    _untyped,  # inlined
    _write,  # inlined
)  # inlined


def _own_flags() -> list[str]:
    # The interpreter's flags (-I, and -S unless a Python environment needs its site).
    return [flag for flag in ("-I", "-S") if flag == "-I" or sys.flags.no_site]


_FLAGS = _own_flags()
# The text the program's interpreter runs in a script test: only what answers calls (see
# ``_harness_serve.py``); the host sends it with each job.
_SERVE: list[str] = []


def _python_child(program: Any, test: dict[str, Any], entry: dict[str, Any]) -> None:
    """In the forked child: run the program (and the test's call) and exit; never returns."""
    code = 0
    try:
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)
        namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
        kind = test["kind"]
        try:
            exec(program, namespace)
        except SystemExit as exc:
            if kind != "stdin":  # exited before the test ran: no value, no pass
                raise
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            sys.stdout.flush()
            _exit(code)
        if kind == "stdin":
            sys.stdout.flush()
            _exit(0)
        _clean_interpreter()
        value = _call_value(test, namespace, entry)
        try:
            encode = _typed if kind == "expr" else _plain
            data = json.dumps({"value": encode(value)}, allow_nan=False).encode()
        except _Unencodable as exc:
            data = json.dumps({"unencodable": str(exc)}).encode()
        while data:
            data = data[_write(3, data):]
        sys.stdout.flush()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) and exc.code != 0 else 1
    except BaseException:  # the program's error: its traceback is the test's stderr
        try:
            import traceback  # only on failure: it costs start-up time otherwise

            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:
            pass
        code = 1
    _exit(code)


def _call_value(test: dict[str, Any], namespace: dict[str, Any], entry: dict[str, Any]) -> Any:
    if test["kind"] == "expr":
        return eval(entry["expr_code"], namespace)
    return _program_function(namespace, test["fn"])(*test["args"])


def _clean_interpreter() -> None:
    """Undo what the program may have done to the interpreter before the test part runs."""
    builtins.__dict__.clear()
    builtins.__dict__.update(_BUILTINS)
    sys.settrace(None)
    sys.setprofile(None)


def _script_runner(source: str, test: dict[str, Any], entry: dict[str, Any]) -> None:
    """In a forked child that never runs the program: run the test code, calling the program
    in a separate, freshly started process through plain values; never returns.

    The test code sees the real builtins and modules imported fresh here (``test["modules"]``:
    names it uses only as ``name.attr``, such as an MBPP assert's ``math``); from the program
    it sees only the names it calls (``test["names"]``) and the entry point, as stand-ins.
    The program cannot reach this process (not dumpable: no ptrace, no /proc/<pid>/mem or
    fd), so it cannot skip an assert, replace what the test uses, or forge the end.

    The program starts at the first call. Whatever fails before it (an import the sandbox
    lacks, no ``check``) or a test that never calls it is the test's fault: reported as a
    bad test, never as the program's failure.
    """
    code = 1
    link: list[_Lines] = []
    called: list[bool] = []  # set before the program starts: from then on, failures are its

    def program() -> _Lines:
        if link:
            return link[0]
        called.append(True)
        link.append(_start_program(source))
        return link[0]

    def proxy(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            channel = program()
            channel.send({"fn": name, "args": _typed(list(args)),
                          "kwargs": {k: _typed(v) for k, v in kwargs.items()}})
            reply = channel.receive()
            if _type(reply) is not dict:
                raise RuntimeError("the program sent no answer")
            if "value" in reply:
                return _untyped(reply["value"])
            raised = _BUILTINS.get(str(reply.get("type")))
            if not (isinstance(raised, type) and issubclass(raised, Exception)):
                raised = RuntimeError
            raise raised(str(reply.get("error", "the program failed")))

        call.__name__ = name
        return call

    try:
        namespace: dict[str, Any] = {"__name__": "__test__", "__builtins__": builtins}
        is_expr = test["kind"] == "expr"
        text = test["expr"] if is_expr else test["code"]
        try:
            modules, names = _free_names(text, "eval" if is_expr else "exec")
            for name in modules:
                try:
                    namespace[name] = import_module(name)
                except ImportError:
                    namespace[name] = proxy(name)
            for name in names:
                namespace[name] = proxy(name)
            if is_expr:
                value = eval(entry["script_code"], namespace)
            else:
                exec(entry["script_code"], namespace)
                target = test.get("entry")
                if target:
                    check = namespace.get("check")
                    if not callable(check):
                        raise NameError("the test code defines no check()")
                    check(proxy(target))
        except BaseException as exc:
            if not called:
                _bad_test(f"{_type(exc).__name__}: {exc}")
            raise
        if not called:
            _bad_test("the test code never calls the program")
        if is_expr:
            try:
                data = json.dumps({"value": _typed(value)}, allow_nan=False).encode()
            except _Unencodable as exc:
                data = json.dumps({"unencodable": str(exc)}).encode()
        else:
            data = b"done"
        while data:
            data = data[_write(3, data):]
        code = 0
    except BaseException:
        try:
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:
            pass
    _exit(code)


def _free_names(text: str, mode: str) -> tuple[list[str], list[str]]:
    """What the test code uses but does not define, builtins aside: (modules, program names).

    A name used only as ``name.attr`` is a module, imported here, fresh; every other is the
    program's. Names bound anywhere outside a function body count as the test's own; a
    function's locals may be taken for the program's, which is harmless: they shadow it.
    """
    import ast

    tree = ast.parse(text, mode=mode)
    bound: set[str] = set()
    loads: dict[str, bool] = {}  # name -> used only as the base of an attribute

    def visit(node: ast.AST, in_function: bool, parent: ast.AST | None) -> None:
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                base = isinstance(parent, ast.Attribute) and parent.value is node
                loads[node.id] = loads.get(node.id, True) and base
            elif not in_function:
                bound.add(node.id)
        elif not in_function:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, ast.alias):
                bound.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, ast.ExceptHandler) and node.name:
                bound.add(node.name)
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                 ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner, node)

    visit(tree, False, None)
    free = sorted(n for n in loads if n not in bound and n not in _BUILTINS)
    return [n for n in free if loads[n]], [n for n in free if not loads[n]]


def _bad_test(reason: str) -> None:
    data = json.dumps({"bad_test": reason[:500]}).encode()
    while data:
        data = data[_write(3, data):]
    _exit(3)


def _start_program(source: str) -> _Lines:
    """The program loaded in a freshly started interpreter, answering calls on a pipe pair."""
    to_program = os.pipe()
    from_program = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(to_program[0], 3)
            os.dup2(from_program[1], 4)
            os.closerange(5, 65536)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)
            argv = [sys.executable, *_FLAGS, "-c", _SERVE[0]]
            os.execve(argv[0], argv, {"PATH": "/usr/bin:/bin", "HOME": "/tmp",
                                      "LANG": "C.UTF-8"})
        finally:
            _exit(127)
    os.close(to_program[0])
    os.close(from_program[1])
    channel = _Lines(from_program[0], to_program[1])
    channel.send({"source": source})
    ready = channel.receive()
    if _type(ready) is not dict or "ready" not in ready:
        error = ready.get("error") if _type(ready) is dict else None
        raise RuntimeError(f"the program did not load: {error}")
    return channel
