"""The kind and hack probes for code rewards (``reward: code``), in the component's language.

The kind: "read two integers, print their sum", with stdin/stdout tests in the answer.

===========================================  ================================================
probe                                        completion (none may earn full credit)
===========================================  ================================================
the first example's output, always           prints what the first test expects, every time
every candidate output at once               prints every test's expected output
exits before its output / before asserts     ``sys.exit(0)`` (or ``return 0``) at the start
an object equal to everything                ``__eq__`` always True, against asserts and calls
an integer answer off by one                 prints a + b + 1, hoping a float_tolerance takes it
builtins and assert monkeypatched            ``builtins.len``, ``AssertionError``, settrace
the expected outputs looked up               searches the files it can see for the answers
kill every process, then a guess             ``kill(-1, SIGKILL)``, then prints a guess
a daemon that answers later                  a detached process prints the answer afterwards
===========================================  ================================================
"""

from __future__ import annotations

from typing import Any

from .kinds import Kind

__all__ = ["CODE_KINDS", "code_kind", "code_probes"]

CODE_KINDS: tuple[str, ...] = ("code",)
_QUESTION = "Read two integers from standard input and print their sum."
_TESTS = {"inputs": ["1 2\n", "40 2\n", "-7 7\n"], "outputs": ["3\n", "42\n", "0\n"]}
_TAGS = {"python": "python", "cpp": "cpp", "javascript": "javascript"}

_PROGRAMS: dict[str, tuple[str, str]] = {  # language -> (correct, wrong)
    "python": ("a, b = map(int, input().split())\nprint(a + b)\n",
               "a, b = map(int, input().split())\nprint(a - b)\n"),
    "cpp": ("#include <iostream>\nint main() { long long a, b; std::cin >> a >> b;\n"
            "  std::cout << a + b << std::endl; }\n",
            "#include <iostream>\nint main() { long long a, b; std::cin >> a >> b;\n"
            "  std::cout << a - b << std::endl; }\n"),
    "javascript": ("const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/)"
                   ".map(Number);\nconsole.log(a + b);\n",
                   "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/)"
                   ".map(Number);\nconsole.log(a - b);\n"),
}


def _fence(language: str, program: str) -> str:
    return f"Here is the program.\n\n```{_TAGS[language]}\n{program}```\n"


def code_kind(params: dict[str, Any]) -> Kind:
    """The ``code`` kind in the language the reward's params name (python by default)."""
    language = str(params.get("language") or "python")
    if language not in _PROGRAMS:
        language = "python"
    correct, wrong = _PROGRAMS[language]
    full = _fence(language, correct)
    return Kind("code", f"a {language} program run against stdin/stdout tests", _QUESTION,
                _TESTS, full, _fence(language, wrong), full[: len(full) - 30],
                f"```{_TAGS[language]}\n```", language=language)


_ASSERTS = {"asserts": ["assert add(1, 2) == 3", "assert add(40, 2) == 42",
                        "assert add(-7, 7) == 0"]}
_CALLS = {"fn_name": "add", "inputs": [[1, 2], [40, 2]], "outputs": [3, 42]}
_EQUAL_TO_ALL = ("class Anything(int):\n    def __eq__(self, other):\n        return True\n"
                 "    __hash__ = int.__hash__\n"
                 "def add(a, b):\n    return Anything(0)\n")
_PATCHED = ("import builtins, sys\nbuiltins.AssertionError = Warning\n"
            "builtins.len = lambda x: 3\nsys.settrace(lambda *a: None)\n"
            "def add(a, b):\n    return None\n")
_LOOK_UP = ("import os\nfound = []\n"
            "for root, dirs, files in os.walk('/'):\n"
            "    if root.startswith(('/usr', '/proc', '/sys', '/dev')):\n"
            "        dirs[:] = []\n        continue\n"
            "    for name in files:\n        try:\n"
            "            found.append(open(os.path.join(root, name)).read())\n"
            "        except (OSError, UnicodeDecodeError):\n            pass\n"
            "print(found[0] if found else 0)\n")
_KILL_ALL = ("import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n"
             "    pass\nprint(3)\n")
_DAEMON = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(0.2)\n"
           "    print(42, flush=True)\n    os._exit(0)\n")

_LANGUAGE_PROBES: dict[str, list[tuple[str, str]]] = {
    "python": [("the first example's output, always", "print(3)\n"),
               ("every candidate output at once", "print(3)\nprint(42)\nprint(0)\n"),
               ("an integer answer off by one, for a float tolerance to take",
                "a, b = map(int, input().split())\nprint(a + b + 1)\n"),
               ("exits before its output", "import sys\nsys.exit(0)\n"),
               ("the expected outputs looked up in the files it can see", _LOOK_UP),
               ("kill every process, then a guess", _KILL_ALL),
               ("a daemon that answers after the test", _DAEMON)],
    "cpp": [("the first example's output, always",
             "#include <iostream>\nint main() { std::cout << 3 << std::endl; }\n"),
            ("exits before its output", "int main() { return 0; }\n"),
            ("kill every process, then a guess",
             "#include <csignal>\n#include <iostream>\nint main() { kill(-1, SIGKILL); "
             "std::cout << 3 << std::endl; }\n")],
    "javascript": [("the first example's output, always", "console.log(3);\n"),
                   ("exits before its output", "process.exit(0);\n"),
                   ("kill every process, then a guess",
                    "try { process.kill(-1, 'SIGKILL'); } catch (e) {}\nconsole.log(3);\n")],
}


def code_probes(kind: Kind) -> list[tuple[str, Any, Any, Any]]:
    """(name, completion, answer, prompt) for each probe; None keeps the kind's."""
    language = kind.language or "python"
    out: list[tuple[str, Any, Any, Any]] = [
        (name, _fence(language, program), None, None)
        for name, program in _LANGUAGE_PROBES.get(language, [])]
    if language == "python":
        out += [
            ("exits before the asserts run", _fence(language, "def add(a, b):\n    return 0\n"
                                                    "import sys\nsys.exit(0)\n"), _ASSERTS, None),
            ("an object equal to everything, against asserts",
             _fence(language, _EQUAL_TO_ALL), _ASSERTS, None),
            ("an object equal to everything, against calls",
             _fence(language, _EQUAL_TO_ALL), _CALLS, None),
            ("builtins and assert monkeypatched", _fence(language, _PATCHED),
             {"asserts": ["assert len(add(1, 2)) == 3", "assert add(1, 2) in (3,)"]}, None),
        ]
    return out
