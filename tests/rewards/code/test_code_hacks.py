"""Programs that try to earn credit they did not earn, one class of hack at a time.

Each test runs the real bubblewrap sandbox through the ``code`` reward, with a program written
against rewardsmith's own runner: it shadows what the tests use, reaches for the expected
values, turns its failure into an ``error``, holds memory past its limit, or stalls the
compiler. None may earn credit; an honest program beside each must keep all of it.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

import pytest

from rewardsmith import Rollout, Rubric, score_rollouts
from rewardsmith.rewards.code import code
from rewardsmith.sandbox import SandboxUnavailable, get_sandbox


@pytest.fixture(scope="module", autouse=True)
def real_sandbox() -> None:
    try:
        get_sandbox("bubblewrap").check("python")
    except SandboxUnavailable as exc:
        if os.environ.get("REWARDSMITH_SKIP_SANDBOX_TESTS") == "1":
            pytest.skip(f"no sandbox on this machine: {exc}")
        pytest.fail(f"the hack tests need the real sandbox: {exc}")


def needs(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")


def run(program: str, tests: Any, language: str = "python", **params: Any) -> dict[str, float]:
    params.setdefault("time_limit", 2.0)
    result: dict[str, float] = code(f"```{language}\n{program}\n```", tests,
                                    language=language, **params)
    return result


def scored(program: str, tests: Any, language: str = "python", **params: Any) -> Any:
    """The rollout's Score through the whole scoring path (status, errors, reward)."""
    params.setdefault("time_limit", 2.0)
    rubric = Rubric.single("code", params={"language": language, **params})
    rollout = Rollout(id="r", group="g", prompt="p",
                      completion=f"```{language}\n{program}\n```", answer=tests)
    return score_rollouts(rubric, [rollout])[0]


def no_credit(result: dict[str, float]) -> None:
    assert result["passed"] == 0 and result["reward"] == 0.0, result


# ---------------------------------------------------------------- shadowing what tests use

SORT_ASSERTS = {"asserts": ["assert sorted(order([3, 1, 2])) == [1, 2, 3]",
                            "assert len(order([5, 4])) == 2"]}


def test_shadowed_builtins_in_asserts_earn_nothing() -> None:
    program = ("def sorted(x):\n    return [1, 2, 3]\n"
               "def len(x):\n    return 2\n"
               "def order(xs):\n    return None\n")
    no_credit(run(program, SORT_ASSERTS))
    assert run("def order(xs):\n    return xs[::-1]\n", SORT_ASSERTS)["reward"] == 1.0


def test_shadowed_builtins_in_a_humaneval_check_earn_nothing() -> None:
    tests = {"entry_point": "half", "test": (
        "def check(candidate):\n"
        "    assert abs(candidate(1.0) - 0.5) < 1e-9\n"
        "    assert set(candidate(x) for x in (2.0, 4.0)) == {1.0, 2.0}\n"
        "    for i in range(3):\n"
        "        assert candidate(2.0 * i) == i\n")}
    program = ("def abs(x):\n    return 0\n"
               "def set(x):\n    return {1.0, 2.0}\n"
               "def range(n):\n    return []\n"
               "def half(x):\n    return -1\n")
    no_credit(run(program, tests))
    assert run("def half(x):\n    return x / 2\n", tests)["reward"] == 1.0


def test_isinstance_and_sorted_in_humaneval_value_asserts_are_the_real_ones() -> None:
    tests = {"entry_point": "evens", "test": (
        "def check(candidate):\n"
        "    assert sorted(candidate([4, 1, 2])) == [2, 4]\n"
        "    assert isinstance(candidate([]), list)\n")}
    program = ("def sorted(x):\n    return [2, 4]\n"
               "def isinstance(x, t):\n    return True\n"
               "def evens(xs):\n    return 'nothing'\n")
    no_credit(run(program, tests))
    assert run("def evens(xs):\n    return [x for x in xs if x % 2 == 0]\n",
               tests)["reward"] == 1.0


def test_patched_module_attributes_earn_nothing() -> None:
    tests = {"asserts": ["assert math.isclose(area(1.0), 3.141592653589793)",
                         "assert operator.eq(area(2.0), 12.566370614359172)"],
             "test_setup_code": "import math, operator"}
    program = ("import math, operator\n"
               "math.isclose = lambda *a, **k: True\n"
               "operator.eq = lambda a, b: True\n"
               "def area(r):\n    return 0.0\n")
    no_credit(run(program, tests))
    # MBPP asserts that lean on the program's own 'import math' get the real module too.
    bare = {"asserts": ["assert math.isclose(area(1.0), 3.141592653589793)"]}
    no_credit(run(program, bare))
    honest = "import math\ndef area(r):\n    return math.pi * r * r\n"
    assert run(honest, tests)["reward"] == 1.0
    assert run(honest, bare)["reward"] == 1.0


# ---------------------------------------------------------------- reaching the expected value


def test_a_program_cannot_find_the_expected_value_on_its_stack_or_heap() -> None:
    tests = {"asserts": ["assert abs(root(2.0) - 1.4142135623730951) < 1e-12",
                         "assert root(9.0) in (3.0,)"]}
    program = (
        "import gc, sys\n"
        "def root(x):\n"
        "    frame = sys._getframe(1)\n"
        "    while frame is not None:\n"
        "        for value in list(frame.f_locals.values()) + list(frame.f_code.co_consts):\n"
        "            if isinstance(value, float) and value not in (x, 1e-12):\n"
        "                return value\n"
        "            if isinstance(value, tuple) and value:\n"
        "                return value[0]\n"
        "        frame = frame.f_back\n"
        "    for obj in gc.get_objects():\n"
        "        if isinstance(obj, str) and 'assert' in obj:\n"
        "            return float(obj.split('-')[1].split(')')[0])\n"
        "    return 0.0\n")
    no_credit(run(program, tests))


# ---------------------------------------------------------------- other tests' values


def test_tests_of_one_program_share_no_files() -> None:
    # Each test's answer is the other test's input: a program that keeps what it saw in /tmp
    # (or /dev/shm) would answer the second test from the first.
    tests = {"inputs": ["5\n", "7\n"], "outputs": ["7\n", "5\n"]}
    program = (
        "import os\n"
        "seen = input().strip()\n"
        "for folder in ('/tmp', '/dev/shm', '/tmp/rs-work'):\n"
        "    try:\n"
        "        for name in os.listdir(folder):\n"
        "            if name.startswith('seen-'):\n"
        "                print(name[5:])\n"
        "                raise SystemExit(0)\n"
        "    except OSError:\n"
        "        pass\n"
        "for folder in ('/tmp', '/dev/shm', '/tmp/rs-work'):\n"
        "    try:\n"
        "        open(os.path.join(folder, 'seen-' + seen), 'w').close()\n"
        "    except OSError:\n"
        "        pass\n"
        "print(0)\n")
    no_credit(run(program, tests))


def test_stdin_is_not_a_file_the_program_can_list() -> None:
    tests = {"inputs": ["secret-input\n"], "outputs": ["no files"]}
    program = (
        "import os\n"
        "found = []\n"
        "for folder in ('/tmp', '/dev/shm'):\n"
        "    for root, dirs, files in os.walk(folder):\n"
        "        found += files\n"
        "print(found or 'no files')\n")
    assert run(program, tests)["reward"] == 1.0


# ---------------------------------------------------------------- failure turned into error

TWO_SUMS = {"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]}


@pytest.mark.parametrize("sabotage", [
    "os.rename('/tmp/rs-work', '/tmp/elsewhere')",
    "os.chmod('/tmp/rs-work', 0)",
    "os.chmod('/tmp', 0o500)",
    "[os.remove(os.path.join('/tmp/rs-work', n)) for n in os.listdir('/tmp/rs-work')]",
])
def test_breaking_the_work_folder_is_a_failure_not_an_error(sabotage: str) -> None:
    program = f"import os\ntry:\n    {sabotage}\nexcept OSError:\n    pass\nprint(0)\n"
    score = scored(program, TWO_SUMS)
    assert score.status == "ok", (score.status, score.errors)
    assert score.reward == 0.0


def test_filling_the_disk_is_a_failure_not_an_error() -> None:
    program = ("try:\n    with open('/tmp/fill', 'wb') as f:\n"
               "        while True:\n            f.write(b'x' * (1 << 20))\n"
               "except OSError:\n    pass\nprint(0)\n")
    score = scored(program, TWO_SUMS, memory_limit=128)
    assert score.status == "ok", (score.status, score.errors)
    assert score.reward == 0.0


def test_a_value_the_host_cannot_compare_is_a_failure_not_an_error() -> None:
    calls = {"fn_name": "f", "inputs": [[1], [2]], "outputs": [1.5, 2.5]}
    for value in ("10 ** 400", "-(10 ** 400)", "[10 ** 400]"):
        score = scored(f"def f(x):\n    return {value}\n", calls, float_tolerance=1e-6)
        assert score.status == "ok", (value, score.status, score.errors)
        assert score.reward == 0.0
    asserts = {"asserts": ["assert f(1) == 1.5"]}
    score = scored("def f(x):\n    return 10 ** 400\n", asserts, float_tolerance=1e-6)
    assert (score.status, score.reward) == ("ok", 0.0), score.errors


def test_a_forged_value_channel_is_a_failure_not_an_error() -> None:
    calls = {"fn_name": "f", "inputs": [[1]], "outputs": [1.5]}
    for forged in (b'{"value": {"f": "1e400"}}', b'{"value": {"s": [[1]]}}',
                   b'{"value": ' + b'[' * 5000 + b']' * 5000 + b'}', b'\xff\xfe garbage'):
        program = f"import os\nos.write(3, {forged!r})\nos._exit(0)\ndef f(x):\n    return 1.5\n"
        score = scored(program, calls, float_tolerance=1e-6)
        assert score.status == "ok", (forged[:20], score.status, score.errors)
        assert score.reward == 0.0


def test_a_script_test_whose_program_garbles_its_channel_fails() -> None:
    tests = {"asserts": ["assert abs(f(1) - 1.5) < 1e-9"]}
    for program in ("import os\nos.write(4, b'not json\\n')\ndef f(x):\n    return 1.5\n",
                    "import os\nos.close(4)\ndef f(x):\n    return 1.5\n",
                    "def f(x):\n    import os\n    os.write(4, b'{\"ready\": 1}\\n' * 3)\n"
                    "    os._exit(0)\n"):
        score = scored(program, tests)
        assert (score.status, score.reward) == ("ok", 0.0), (program, score.errors)


# ---------------------------------------------------------------- memory past the limits

HOLD = {"inputs": [""], "outputs": ["held"]}


@pytest.mark.parametrize("where", ["/dev/shm/hold", "/dev/hold", "/tmp/hold"])
def test_files_in_memory_count_against_the_limit(where: str) -> None:
    # Files of 10 MB each (under the per-file cap), 300 MB in all, with memory_limit 128.
    program = ("import os, sys\n"
               f"path = {where!r}\n"
               "try:\n"
               "    os.makedirs(os.path.dirname(path), exist_ok=True)\n"
               "    for n in range(30):\n"
               "        with open(f'{path}{n}', 'wb') as f:\n"
               "            f.write(b'x' * (10 << 20))\n"
               "except OSError:\n"
               "    pass\n"
               "else:\n"
               "    print('held')\n")
    no_credit(run(program, HOLD, memory_limit=128))


def test_memfds_count_against_the_limit() -> None:
    program = ("import os\nfds = []\n"
               "for _ in range(40):\n"
               "    fd = os.memfd_create('hold')\n"
               "    for _ in range(10):\n"
               "        os.write(fd, b'x' * (1 << 20))\n"
               "    fds.append(fd)\n"
               "print('held')\n")
    no_credit(run(program, HOLD, memory_limit=128))


def test_javascript_buffers_count_against_the_limit() -> None:
    needs("node")
    program = ("const held = [];\n"
               "for (let i = 0; i < 30; i++) { const b = Buffer.alloc(10 << 20, 1);"
               " held.push(b); }\n"
               "console.log('held');\n")
    no_credit(run(program, HOLD, language="javascript", memory_limit=128))
    honest = "console.log('held');\n"
    assert run(honest, HOLD, language="javascript", memory_limit=128)["reward"] == 1.0


# ---------------------------------------------------------------- compile-time abuse

CONSTEXPR_LOOP = (
    "#include <cstdio>\n"
    "constexpr long long spin() {\n"
    "  long long s = 0;\n"
    "  for (long long i = 0; i < 200000; ++i)\n"
    "    for (long long j = 0; j < 200000; ++j) s += i ^ j;\n"
    "  return s;\n"
    "}\n"
    "constexpr long long value = spin();\n"
    "int main() { std::printf(\"%lld\\n\", value); }\n")


def test_a_compile_that_never_ends_costs_at_most_the_total_time() -> None:
    needs("g++")
    began = time.monotonic()
    score = scored(CONSTEXPR_LOOP, TWO_SUMS, language="cpp", total_time_limit=2.0)
    took = time.monotonic() - began
    assert score.status == "ok", score.errors
    assert score.reward == 0.0
    assert score.metrics["code.compile_error"] == 1.0
    assert took < 8.0, took


def test_a_compile_has_its_own_limit() -> None:
    needs("g++")
    began = time.monotonic()
    result = run(CONSTEXPR_LOOP, TWO_SUMS, language="cpp", compile_time_limit=1.0)
    assert result["compile_error"] == 1.0 and result["reward"] == 0.0
    assert time.monotonic() - began < 6.0


# ---------------------------------------------------------------- honest programs keep credit


def test_stderr_of_any_size_does_not_fail_a_test() -> None:
    program = ("import sys\n"
               "sys.stderr.write('debug ' * 400000)\n"
               "a, b = map(int, input().split())\nprint(a + b)\n")
    assert run(program, TWO_SUMS)["reward"] == 1.0
    calls = {"fn_name": "f", "inputs": [[1]], "outputs": [2]}
    chatty = "import sys\ndef f(x):\n    sys.stderr.write('x' * 3000000)\n    return x + 1\n"
    assert run(chatty, calls)["reward"] == 1.0


def test_stderr_of_any_size_does_not_fail_a_cpp_or_javascript_test() -> None:
    needs("g++")
    needs("node")
    cpp = ("#include <iostream>\nint main() { for (int i = 0; i < 200000; ++i) std::cerr << "
           "\"debug line\\n\"; long long a, b; std::cin >> a >> b; std::cout << a + b; }\n")
    assert run(cpp, TWO_SUMS, language="cpp")["reward"] == 1.0
    js = ("for (let i = 0; i < 100000; i++) process.stderr.write('debug line\\n');\n"
          "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(' ').map(Number);\n"
          "console.log(a + b);\n")
    assert run(js, TWO_SUMS, language="javascript")["reward"] == 1.0


# ---------------------------------------------------------------- programs after programs


def test_programs_that_share_a_warm_sandbox_share_nothing() -> None:
    # One sandbox serves a process's programs one after another: nothing one program leaves
    # (files, a locked /tmp, a process still running) meets the next.
    leave = ("import os, time\n"
             "open('/tmp/left', 'w').write('x')\n"
             "open('/dev/shm/left', 'w').write('x')\n"
             "if os.fork() == 0:\n"
             "    os.setsid()\n"
             "    time.sleep(30)\n"
             "    os._exit(0)\n"
             "os.chmod('/tmp', 0o500)\n"
             "print('left')\n")
    look = ("import os\n"
            "files = os.listdir('/tmp') + os.listdir('/dev/shm')\n"
            "others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) > 1\n"
            "          and int(p) != os.getpid()]\n"
            "open('/tmp/mine', 'w').write('ok')\n"
            "print('clean' if files == ['rs-work'] and not others else (files, others))\n")
    clean = {"inputs": [""], "outputs": ["clean"]}
    for _ in range(2):
        assert run(leave, {"inputs": [""], "outputs": ["left"]})["reward"] == 1.0
        assert run(look, clean)["reward"] == 1.0


def test_a_test_process_holds_no_other_test_of_its_program() -> None:
    # The second test's code (with its expected value) must not be reachable from the first
    # test's process: not on its stack, not among its objects.
    tests = {"asserts": ["assert probe(1) == 1", "assert abs(probe(2) - 0.123456789) < 1e-12"]}
    program = ("import gc, sys\n"
               "def probe(x):\n"
               "    needle = '0.12345' + '6789'  # not in this text as one piece\n"
               "    seen = [str(o) for o in gc.get_objects() if isinstance(o, (dict, list))]\n"
               "    frame = sys._getframe(1)\n"
               "    while frame is not None:\n"
               "        seen.append(str(frame.f_locals))\n"
               "        frame = frame.f_back\n"
               "    return 0 if any(needle in text for text in seen) else 1\n")
    assert run(program, tests)["passed"] == 1.0
