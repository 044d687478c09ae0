"""The ``code`` reward against hand-labeled programs: each test format, each language."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from rewardsmith import Rollout, Rubric, score_rollouts
from rewardsmith.errors import RubricError
from rewardsmith.rewards.code import code
from rewardsmith.rewards.code.compare import outputs_match
from rewardsmith.rewards.code.program import extract_program
from rewardsmith.rewards.code.testspec import parse_tests
from rewardsmith.sandbox import SandboxUnavailable, get_sandbox

needs_gpp = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


@pytest.fixture(scope="module", autouse=True)
def real_sandbox() -> None:
    try:
        get_sandbox("bubblewrap").check("python")
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox on this machine: {exc}")


def fenced(language: str, source: str) -> str:
    return f"Here is my solution.\n\n```{language}\n{source}\n```\n"


SUM_IO = {"inputs": ["1 2\n", "3 4\n", "-5 5\n", "1500000000 1500000000\n"],
          "outputs": ["3\n", "7\n", "0\n", "3000000000\n"]}
SUM_PAIRS = [{"input": i, "output": o} for i, o in zip(SUM_IO["inputs"], SUM_IO["outputs"])]

# (label, language, program, tests, expected reward, metric that must be > 0 or None)
CASES: list[tuple[str, str, str, Any, float, str | None]] = [
    # -------- python, stdin/stdout
    ("py stdin right", "python", "a, b = map(int, input().split())\nprint(a + b)",
     SUM_IO, 1.0, None),
    ("py stdin right, as pairs", "python", "import sys\na, b = map(int, sys.stdin.read().split())"
     "\nprint(a + b)", SUM_PAIRS, 1.0, None),
    ("py stdin right, APPS json string", "python",
     "a, b = map(int, input().split())\nprint(a + b)   ",
     json.dumps({"input_output": json.dumps(SUM_IO)}), 1.0, None),
    ("py stdin wrong on negatives", "python",
     "a, b = map(int, input().split())\nprint(abs(a) + abs(b))", SUM_IO, 0.75, "wrong"),
    ("py stdin crashes", "python", "a, b = map(int, input().split())\nprint(a / 0)",
     SUM_IO, 0.0, "runtime_errors"),
    ("py stdin syntax error", "python", "def main(:\n    pass", SUM_IO, 0.0, "compile_error"),
    ("py stdin loops", "python", "while True:\n    pass", SUM_IO, 0.0, "timeouts"),
    ("py stdin right output, then a crash", "python",
     "a, b = map(int, input().split())\nprint(a + b)\nraise SystemExit(3)",
     SUM_IO, 0.0, "runtime_errors"),
    # -------- python, function calls
    ("py call right", "python", "def add(a, b):\n    return a + b",
     {"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [3, [7]]}, 1.0, None),
    ("py call, LeetCode Solution class", "python",
     "class Solution:\n    def twoSum(self, nums, target):\n"
     "        seen = {}\n        for i, n in enumerate(nums):\n"
     "            if target - n in seen:\n                return [seen[target - n], i]\n"
     "            seen[n] = i\n",
     {"fn_name": "twoSum", "inputs": [[[2, 7, 11, 15], 9], [[3, 2, 4], 6]],
      "outputs": [[0, 1], [1, 2]]}, 1.0, None),
    ("py call tuple equals list (APPS)", "python", "def pair(x):\n    return (x, x)",
     {"fn_name": "pair", "inputs": [[1]], "outputs": [[1, 1]]}, 1.0, None),
    ("py call wrong", "python", "def add(a, b):\n    return a - b",
     {"fn_name": "add", "inputs": [[1, 2], [3, 0]], "outputs": [3, 3]}, 0.5, "wrong"),
    ("py call missing function", "python", "def plus(a, b):\n    return a + b",
     {"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]}, 0.0, "runtime_errors"),
    # -------- python, HumanEval check(candidate)
    ("py humaneval right", "python",
     "def has_close(numbers, threshold):\n"
     "    return any(abs(a - b) < threshold for i, a in enumerate(numbers)"
     " for b in numbers[i + 1:])",
     {"test": "METADATA = {'author': 'x'}\n\n\ndef check(candidate):\n"
              "    assert candidate([1.0, 2.0, 3.9], 0.3) == False\n"
              "    assert candidate([1.0, 2.8, 3.0], 0.3) == True\n"
              "    assert candidate([], 1.0) is False\n",
      "entry_point": "has_close"}, 1.0, None),
    ("py humaneval half right", "python", "def has_close(numbers, threshold):\n    return True",
     {"test": "def check(candidate):\n"
              "    assert candidate([1.0, 2.0, 3.9], 0.3) == False\n"
              "    assert candidate([1.0, 2.8, 3.0], 0.3) == True\n",
      "entry_point": "has_close"}, 0.5, "wrong"),
    ("py humaneval loop (runs as a script)", "python", "def double(x):\n    return 2 * x",
     {"test": "def check(candidate):\n    for x in range(5):\n"
              "        assert candidate(x) == x + x\n", "entry_point": "double"}, 1.0, None),
    ("py humaneval loop, wrong", "python", "def double(x):\n    return x * x",
     {"test": "def check(candidate):\n    for x in range(5):\n"
              "        assert candidate(x) == x + x\n", "entry_point": "double"}, 0.0,
     "runtime_errors"),
    # -------- python, assert lists
    ("py asserts right", "python", "def rev(s):\n    return s[::-1]",
     {"asserts": ["assert rev('abc') == 'cba'", "assert rev('') == ''",
                  "assert not rev('')", "assert rev('a')"]}, 1.0, None),
    ("py asserts tuple is not list", "python", "def pair(x):\n    return [x, x]",
     {"asserts": ["assert pair(1) == (1, 1)", "assert pair(1) == [1, 1]"]}, 0.5, "wrong"),
    ("py MBPP test_list with setup", "python", "import math\ndef area(r):\n"
     "    return math.pi * r * r",
     {"test_list": ["assert math.isclose(area(1), math.pi)", "assert round(area(2), 2) == 12.57"],
      "test_setup_code": "import math"}, 1.0, None),
    # -------- C++
    ("cpp stdin right", "cpp", "#include <iostream>\nint main(){long long a,b;"
     "std::cin>>a>>b;std::cout<<a+b<<\"\\n\";}", SUM_IO, 1.0, None),
    ("cpp stdin overflow", "cpp", "#include <iostream>\nint main(){int a,b;"
     "std::cin>>a>>b;std::cout<<a+b<<\"\\n\";}", SUM_IO, 0.75, "wrong"),
    ("cpp compile error", "cpp", "int main( { return 0; }", SUM_IO, 0.0, "compile_error"),
    ("cpp segfault", "cpp", "int main(){ int *p = nullptr; return *p; }", SUM_IO, 0.0,
     "runtime_errors"),
    ("cpp loops", "cpp", "int main(){ volatile long x = 0; while (true) x++; }", SUM_IO, 0.0,
     "timeouts"),
    # -------- JavaScript
    ("js stdin right", "javascript",
     "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
     "console.log(a + b);", SUM_IO, 1.0, None),
    ("js call right", "javascript", "function add(a, b) { return a + b; }",
     {"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [3, 7]}, 1.0, None),
    ("js call arrow function, wrong", "javascript", "const add = (a, b) => a * b;",
     {"fn_name": "add", "inputs": [[1, 2], [2, 2]], "outputs": [3, 4]}, 0.5, "wrong"),
    ("js test script", "javascript", "function add(a, b) { return a + b; }",
     {"test": "const assert = require('assert');\nassert.deepStrictEqual(add(1, 2), 3);",
      "entry_point": "add"}, 1.0, None),
    ("js test script, wrong", "javascript", "function add(a, b) { return a - b; }",
     {"test": "const assert = require('assert');\nassert.deepStrictEqual(add(1, 2), 3);",
      "entry_point": "add"}, 0.0, "runtime_errors"),
]


def _marks(language: str) -> list[Any]:
    return [needs_gpp] if language == "cpp" else [needs_node] if language == "javascript" else []


@pytest.mark.parametrize(
    ("language", "program", "tests", "expected", "metric"),
    [pytest.param(*case[1:], id=case[0], marks=_marks(case[1])) for case in CASES],
)
def test_hand_labeled(language: str, program: str, tests: Any, expected: float,
                      metric: str | None) -> None:
    scripts = "test" in tests if isinstance(tests, dict) else False
    result = code(fenced({"python": "python", "cpp": "cpp", "javascript": "js"}[language],
                         program), tests, language=language, time_limit=1.0,
                  script_tests=scripts and language == "javascript")
    assert result["reward"] == expected, result
    if metric is not None:
        assert result[metric] > 0, result
    assert result["total"] == len(parse_tests(tests, language, script_tests=True))


def test_javascript_test_scripts_are_refused_unless_their_risk_is_accepted() -> None:
    tests = {"asserts": ["if (add(1, 2) !== 3) throw new Error('no');"]}
    with pytest.raises(ValueError, match="forge a pass"):
        code(fenced("js", "function add(a, b) { return a + b; }"), tests,
             language="javascript")
    assert parse_tests(tests, "javascript", script_tests=True)[0].check == "script"


def test_mode_all_is_zero_unless_every_test_passes() -> None:
    program = fenced("python", "a, b = map(int, input().split())\nprint(abs(a) + abs(b))")
    assert code(program, SUM_IO, mode="all")["reward"] == 0.0
    assert code(fenced("python", "print(sum(map(int, input().split())))"), SUM_IO,
                mode="all")["reward"] == 1.0


def test_float_tolerance() -> None:
    tests = {"inputs": [""], "outputs": ["0.3333333 2\n"]}
    program = fenced("python", "print(1 / 3, 2)")
    assert code(program, tests)["reward"] == 0.0
    assert code(program, tests, float_tolerance=1e-6)["reward"] == 1.0
    assert not outputs_match("0.3334 2", "0.3333333 2", 1e-6)
    assert not outputs_match("0.3333333 2 extra", "0.3333333 2", 1e-6)
    assert outputs_match("1 2  \r\n3\n\n", "1 2\n3", None)


def test_a_loop_costs_one_time_limit_not_one_per_test() -> None:
    import time

    tests = {"inputs": [""] * 10, "outputs": ["x"] * 10}
    began = time.monotonic()
    result = code(fenced("python", "while True:\n    pass"), tests, time_limit=0.5)
    assert time.monotonic() - began < 3.0
    assert result["timeouts"] == 1 and result["skipped"] == 9


def test_extract_program() -> None:
    text = ("First an example:\n```text\n1 2\n```\nThen the code:\n```python\nprint(1)\n```\n"
            "And a note.\n```\nprint(2)\n```\n")
    assert extract_program(text, "python") == "print(2)\n"
    assert extract_program("```py\nx = 1\n```\n```cpp\nint x;\n```", "python") == "x = 1\n"
    assert extract_program("print(3)", "python") == "print(3)"
    assert extract_program("```c++\nint main(){}\n```", "cpp") == "int main(){}\n"


@pytest.mark.parametrize(("answer", "message"), [
    (None, "missing"),
    ("not json", "not JSON"),
    ({"inputs": ["1"], "outputs": []}, "'inputs' has 1 items"),
    ({"inputs": [], "outputs": []}, "no tests"),
    ({"fn_name": "1x", "inputs": [[1]], "outputs": [1]}, "fn_name"),
    ({"test": "def check(candidate):\n    assert candidate(1) == 1"}, "entry_point"),
    ({"asserts": ["assert f(1) =="]}, "not valid Python"),
    ({"something": 1}, "unknown test format"),
    ([{"input": "1"}], "'input' and 'output'"),
])
def test_unreadable_tests_are_errors_naming_the_problem(answer: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        code("print(1)", answer)


def test_unreadable_tests_make_an_error_status_not_a_zero() -> None:
    rollouts = [Rollout(id="bad", group="g", prompt="p", completion="print(1)",
                        answer="not json"),
                Rollout(id="good", group="g", prompt="p", completion="print(3)",
                        answer={"inputs": [""], "outputs": ["3"]})]
    scores = score_rollouts(Rubric.single("code"), rollouts, workers=0)
    assert scores[0].status.value == "error" and "not JSON" in scores[0].errors["code"]
    assert scores[1].status.value == "ok" and scores[1].reward == 1.0
    assert scores[1].metrics["code.passed"] == 1.0


def test_rubric_refuses_bad_params_and_a_sandbox_that_cannot_start() -> None:
    with pytest.raises(RubricError, match="language 'rust'"):
        Rubric.from_dict({"components": {"c": {"reward": "code",
                                               "params": {"language": "rust"}}}})
    with pytest.raises(RubricError, match="mode"):
        Rubric.from_dict({"components": {"c": {"reward": "code", "params": {"mode": "most"}}}})
    with pytest.raises(RubricError, match="time"):
        Rubric.from_dict({"components": {"c": {"reward": "code",
                                               "params": {"time_limit": -1}}}})
    with pytest.raises(RubricError, match="sandbox 'docker' is unknown"):
        Rubric.from_dict({"components": {"c": {"reward": "code",
                                               "params": {"sandbox": "docker"}}}})
    rubric = Rubric.from_dict({"components": {"c": {"reward": "code"}}})
    assert rubric.components[0].timeout is not None and rubric.components[0].timeout >= 60


def test_from_the_command_line(tmp_path: Any) -> None:
    import subprocess
    import sys
    from pathlib import Path

    rubric = Path(tmp_path) / "rubric.yaml"
    rubric.write_text("name: code-v1\ncomponents:\n"
                      "  tests: {reward: code, params: {time_limit: 2}}\n")
    rollouts = Path(tmp_path) / "rollouts.jsonl"
    rows = [{"id": "right", "group": "g", "prompt": "sum",
             "completion": fenced("python", "print(sum(map(int, input().split())))"),
             "answer": json.dumps(SUM_IO)},
            {"id": "loops", "group": "g", "prompt": "sum",
             "completion": fenced("python", "while True:\n    pass"), "answer": SUM_IO}]
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = Path(tmp_path) / "scored.jsonl"
    done = subprocess.run([sys.executable, "-m", "rewardsmith", "score", str(rollouts),
                           "--rubric", str(rubric), "-o", str(out)],
                          capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)  # its default store lands there, not in the checkout
    assert done.returncode == 0, done.stderr[-2000:]
    scored = {s["id"]: s for s in map(json.loads, out.read_text().splitlines())}
    assert scored["right"]["reward"] == 1.0 and scored["right"]["status"] == "ok"
    assert scored["loops"]["reward"] == 0.0
    assert scored["loops"]["metrics"]["tests.timeouts"] == 1.0
