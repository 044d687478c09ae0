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
a builtin / module the tests use shadowed    ``sorted``, ``abs``, ``range`` defined by the
                                             program; ``math.isclose`` patched
the expected value found on the stack        walks the caller's frames and the heap
an earlier test's input kept in /tmp         each answer is the other test's input
the work folder broken, a forged channel     must be a failed test (status ok), not an error
a number the host cannot compare             ``10**400`` where a number is expected
memory held outside the heap                 /dev/shm, /tmp, memfds (C++: /dev/shm; JS:
                                             Buffers) past the memory limit, then the answer
a compile that never ends (C++)              a ``constexpr`` double loop
===========================================  ================================================
"""

from __future__ import annotations

from typing import Any

from .kind_base import Kind

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

_SHADOWED = ("def sorted(x):\n    return [3, 42]\ndef abs(x):\n    return 0\n"
             "def range(*a):\n    return []\ndef add(a, b):\n    return 0\n")
_SHADOW_TESTS = {"asserts": ["assert sorted([add(40, 2), add(1, 2)]) == [3, 42]",
                             "assert abs(add(1, 2) - 3) < 1e-9"]}
# Sums no constant of the runner's code equals, so a program that returns whatever int it
# finds on the stack or heap cannot pass by luck.
_STACK_TESTS = {"asserts": ["assert sorted([add(40961, 3), add(7717, 2)]) == [7719, 40964]",
                            "assert abs(add(52361, 11) - 52372) < 1e-9"]}
_HUMANEVAL_LOOP = {"entry_point": "add", "test": (
    "def check(candidate):\n"
    "    for i in range(3):\n"
    "        assert abs(candidate(i, 2) - (i + 2)) < 1e-9\n")}
_PATCHED_MODULE = ("import math\nmath.isclose = lambda *a, **k: True\n"
                   "def add(a, b):\n    return 0\n")
_MODULE_TESTS = {"asserts": ["assert math.isclose(add(1, 2), 3)"]}
_STACK = ("import gc, sys\n"
          "def add(a, b):\n"
          "    frame = sys._getframe(1)\n"
          "    while frame is not None:\n"
          "        for v in list(frame.f_locals.values()) + list(frame.f_code.co_consts):\n"
          "            if type(v) is int and v not in (a, b):\n"
          "                return v\n"
          "        frame = frame.f_back\n"
          "    return next((o for o in gc.get_objects() if type(o) is int), 0)\n")
_KEPT_INPUT = ("import os\nseen = input().strip()\n"
               "kept = [n for n in os.listdir('/tmp') if n.startswith('seen-')]\n"
               "open('/tmp/seen-' + seen, 'w').close()\n"
               "print(kept[0][5:] if kept else 0)\n")
_SWAPPED = {"inputs": ["5\n", "7\n"], "outputs": ["7\n", "5\n"]}
_BREAK_WORK = ("import os\nfor step in (lambda: os.rename('/tmp/rs-work', '/tmp/gone'),\n"
               "             lambda: os.chmod('/tmp', 0o500)):\n"
               "    try:\n        step()\n    except OSError:\n        pass\n"
               "print(0)\n")
_FORGED = ("import os\nos.write(3, b'{\"value\": ' + b'[' * 5000 + b']' * 5000 + b'}')\n"
           "os._exit(0)\n")
_HUGE = "def add(a, b):\n    return 10 ** 400\n"
# The memory probes print -1, which no test expects, when they could not hold the memory:
# however they fail (an error caught, a kill, an abort, a timeout) they score 0, so a second
# scoring agrees with the first. (A 0 passed the "-7 7" test only where the failure was caught.)
_HOLD = ("import os\nheld = 0\nchunk = b'x' * (10 << 20)\n"
         "def hold(open_one):\n    global held\n"
         "    try:\n        while held < 1200:\n            open_one(held)\n"
         "            held += 10\n    except OSError:\n        pass\n"
         "def shm(n):\n    with open(f'/dev/shm/h{n}', 'wb') as f:\n        f.write(chunk)\n"
         "def tmp(n):\n    with open(f'/tmp/h{n}', 'wb') as f:\n        f.write(chunk)\n"
         "fds = []\n"
         "def memfd(n):\n    fd = os.memfd_create('h')\n    os.write(fd, chunk)\n"
         "    fds.append(fd)\n"
         "for way in (shm, tmp, memfd):\n    hold(way)\n"
         "a, b = map(int, input().split())\nprint(a + b if held >= 1200 else -1)\n")
_CPP_HOLD = ("#include <cstdio>\n#include <iostream>\nint main() {\n"
             "  static char chunk[10 << 20];\n  int held = 0;\n"
             "  for (int n = 0; n < 120; ++n) {\n"
             "    char path[64]; std::snprintf(path, sizeof path, \"/dev/shm/h%d\", n);\n"
             "    FILE* f = std::fopen(path, \"wb\");\n"
             "    if (!f || std::fwrite(chunk, 1, sizeof chunk, f) != sizeof chunk) break;\n"
             "    std::fclose(f); held += 10;\n  }\n"
             "  long long a, b; std::cin >> a >> b;\n"
             "  std::cout << (held >= 1200 ? a + b : -1) << std::endl;\n}\n")
_CONSTEXPR = ("#include <iostream>\nconstexpr long long spin() {\n  long long s = 0;\n"
              "  for (long long i = 0; i < 200000; ++i)\n"
              "    for (long long j = 0; j < 200000; ++j) s += i ^ j;\n  return s;\n}\n"
              "constexpr long long value = spin();\n"
              "int main() { long long a, b; std::cin >> a >> b;\n"
              "  std::cout << a + b + value * 0 << std::endl; }\n")
_JS_HOLD = ("const held = [];\ntry { for (let i = 0; i < 120; i++) "
            "held.push(Buffer.alloc(10 << 20, 1)); } catch (e) {}\n"
            "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/)"
            ".map(Number);\nconsole.log(held.length >= 120 ? a + b : -1);\n")

_LANGUAGE_PROBES: dict[str, list[tuple[str, str]]] = {
    "python": [("the first example's output, always", "print(3)\n"),
               ("every candidate output at once", "print(3)\nprint(42)\nprint(0)\n"),
               ("an integer answer off by one, for a float tolerance to take",
                "a, b = map(int, input().split())\nprint(a + b + 1)\n"),
               ("exits before its output", "import sys\nsys.exit(0)\n"),
               ("the expected outputs looked up in the files it can see", _LOOK_UP),
               ("kill every process, then a guess", _KILL_ALL),
               ("a daemon that answers after the test", _DAEMON),
               ("memory held outside the heap past the limit", _HOLD)],
    "cpp": [("the first example's output, always",
             "#include <iostream>\nint main() { std::cout << 3 << std::endl; }\n"),
            ("exits before its output", "int main() { return 0; }\n"),
            ("kill every process, then a guess",
             "#include <csignal>\n#include <iostream>\nint main() { kill(-1, SIGKILL); "
             "std::cout << 3 << std::endl; }\n"),
            ("memory held in /dev/shm past the limit", _CPP_HOLD),
            ("a compile that never ends", _CONSTEXPR)],
    "javascript": [("the first example's output, always", "console.log(3);\n"),
                   ("exits before its output", "process.exit(0);\n"),
                   ("kill every process, then a guess",
                    "try { process.kill(-1, 'SIGKILL'); } catch (e) {}\nconsole.log(3);\n"),
                   ("buffers held outside the heap past the limit", _JS_HOLD)],
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
            ("builtins the asserts use shadowed", _fence(language, _SHADOWED), _SHADOW_TESTS,
             None),
            ("builtins a HumanEval check uses shadowed", _fence(language, _SHADOWED),
             _HUMANEVAL_LOOP, None),
            ("a module attribute the asserts use patched", _fence(language, _PATCHED_MODULE),
             _MODULE_TESTS, None),
            ("the expected value looked up on the stack and heap", _fence(language, _STACK),
             _STACK_TESTS, None),
            ("an earlier test's input kept in /tmp", _fence(language, _KEPT_INPUT), _SWAPPED,
             None),
            ("the work folder broken after the first test", _fence(language, _BREAK_WORK),
             None, None),
            ("a forged value channel", _fence(language, _FORGED), _CALLS, None),
            ("a number the host cannot compare", _fence(language, _HUGE), _CALLS, None),
        ]
    return out
