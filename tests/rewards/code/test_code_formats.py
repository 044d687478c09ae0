"""Dataset formats as they ship, each with a converted example in tests/data/code_formats/:
a correct program scores 1, a wrong one below 1, an integer answer off by 6,999 fails under
any tolerance, and a format that cannot be read is an error naming it, never a 0."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import Rollout, Rubric, score_rollouts
from rewardsmith.rewards.code import code
from rewardsmith.rewards.code.testspec import parse_suite, parse_tests
from rewardsmith.sandbox import SandboxUnavailable, get_sandbox

DATA = Path(__file__).parent.parent.parent / "data" / "code_formats"
EXAMPLES = {path.stem: json.loads(path.read_text()) for path in sorted(DATA.glob("*.json"))}


@pytest.fixture(scope="module")
def sandbox() -> None:
    try:
        get_sandbox("bubblewrap").check("python")
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox on this machine: {exc}")


def fenced(source: str) -> str:
    return f"My solution:\n\n```python\n{source}```\n"


def test_every_example_is_read() -> None:
    assert len(EXAMPLES) >= 10
    for name, example in EXAMPLES.items():
        tests = parse_tests(example["answer"], example["language"])
        assert len(tests) >= 2, name
        # Expected outputs never go into the sandbox.
        for test in tests:
            assert "output" not in test.spec and "expected" not in test.spec, name


@pytest.mark.usefixtures("sandbox")
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_a_correct_program_scores_one_and_a_wrong_one_less(name: str) -> None:
    example = EXAMPLES[name]
    right = code(fenced(example["right"]), example["answer"], language=example["language"])
    assert right["reward"] == 1.0, right
    wrong = code(fenced(example["wrong"]), example["answer"], language=example["language"])
    assert wrong["reward"] < 1.0 and wrong["compile_error"] == 0.0, wrong
    assert wrong["wrong"] + wrong["runtime_errors"] > 0, wrong


@pytest.mark.usefixtures("sandbox")
@pytest.mark.parametrize("name", sorted(n for n, e in EXAMPLES.items() if e["off_by_6999"]))
def test_an_integer_off_by_6999_fails_whatever_the_tolerance(name: str) -> None:
    example = EXAMPLES[name]
    # The widest tolerance is enough: integers compare exactly under any (unit-tested).
    result = code(fenced(example["off_by_6999"]), example["answer"],
                  language=example["language"], float_tolerance=1e4)
    assert result["reward"] == 0.0, result


def test_livecodebench_fields_as_shipped() -> None:
    answer = EXAMPLES["livecodebench_functional"]["answer"]
    tests = parse_tests(answer, "python")
    assert [t.spec for t in tests] == [
        {"kind": "call", "fn": "kLargestSum", "args": [[3, 1, 4, 1, 5], 2]},
        {"kind": "call", "fn": "kLargestSum", "args": [[7000000], 1]},
        {"kind": "call", "fn": "kLargestSum", "args": [[-2, -8, 0], 2]},
        {"kind": "call", "fn": "kLargestSum", "args": [[10, 20, 30], 3]}]
    assert [t.expected for t in tests] == [9, 7000000, -2, 60]
    assert {t.check for t in tests} == {"value"}
    # The whole row may also come as one JSON string, and the public tests as a list.
    as_list = dict(answer, public_test_cases=json.loads(answer["public_test_cases"]))
    assert parse_tests(json.dumps(as_list), "python") == tests


def test_livecodebench_in_apps_shape_reads_json_lines_but_apps_lists_stay_arguments() -> None:
    sample = parse_tests(EXAMPLES["livecodebench_sample"]["answer"], "python")
    assert sample[0].spec["args"] == [[3, 1, 4, 1, 5], 2] and sample[0].expected == 9
    assert sample[0].check == "value"
    apps = parse_tests({"fn_name": "f", "inputs": [["[1]\n2"]], "outputs": [["x"]]}, "python")
    assert apps[0].spec["args"] == ["[1]\n2"] and apps[0].check == "json"
    # Strings that are not JSON lines are APPS's single arguments, as before.
    bare = parse_tests({"fn_name": "f", "inputs": ["hello world"], "outputs": ["x"]}, "python")
    assert bare[0].spec["args"] == ["hello world"] and bare[0].check == "json"


@pytest.mark.usefixtures("sandbox")
def test_livecodebench_output_is_not_unwrapped_like_apps() -> None:
    # APPS wraps a call's return value in a one-item list; LiveCodeBench does not, so a
    # program returning 9 where [9] is expected must fail.
    answer = {"public_test_cases": [{"input": "[9]", "output": "[9]", "testtype": "functional"}],
              "metadata": {"func_name": "f"}}
    assert code(fenced("def f(xs):\n    return xs[0]\n"), answer)["reward"] == 0.0
    assert code(fenced("def f(xs):\n    return tuple(xs)\n"), answer)["reward"] == 1.0


def _compressed(payload: Any) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(payload))).decode()


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_livecodebench_compressed_tests_at_every_pickle_protocol(protocol: int) -> None:
    rows = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]
    packed = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(rows), protocol))).decode()
    tests = parse_tests({"public_test_cases": "[]", "private_test_cases": packed}, "python")
    assert [(t.spec["input"], t.expected) for t in tests] == [("1 2\n", "3\n")]


class _Boom:
    def __reduce__(self) -> tuple[Any, ...]:
        return (print, ("ran on the host",))


@pytest.mark.parametrize(("answer", "message"), [
    ({"public_test_cases": [{"input": "1", "output": "1", "testtype": "interactive"}],
      "metadata": "{}"}, "testtype 'interactive'"),
    ({"public_test_cases": [{"input": "1", "output": "1", "testtype": "functional"}],
      "metadata": "{}"}, "func_name"),
    ({"public_test_cases": [{"input": "[1,\n2", "output": "1", "testtype": "functional"}],
      "metadata": {"func_name": "f"}}, "input line 1 is not a JSON value"),
    ({"public_test_cases": [{"input": "1", "output": "nope", "testtype": "functional"}],
      "metadata": {"func_name": "f"}}, "output is not a JSON value"),
    ({"public_test_cases": "[]", "private_test_cases": "not base64 or json!"},
     "neither JSON nor LiveCodeBench's compressed"),
    ({"public_test_cases": "[]", "private_test_cases": _compressed(_Boom())},
     "not one string"),
    ({"public_test_cases": "[]", "private_test_cases": _compressed(42)}, "not one string"),
    ({"public_test_cases": "[]", "private_test_cases": _compressed(["[]"])}, "not one string"),
    ({"public_tests": {"input": ["1"], "output": []}}, "'input' has 1 items"),
    ({"public_tests": {"input": ["1"], "output": ["1"]}, "time_limit": "2s"}, "time_limit"),
    ({"public_tests": {"input": ["1"], "output": ["1"]}, "memory_limit_bytes": -1},
     "memory_limit_bytes"),
    ({"public_tests": {"input": [], "output": []}}, "no tests"),
    ({"test": "def check(candidate):\n    inputs = [[1]]\n    results = [1, 2]\n"
              "    for inp, exp in zip(inputs, results):\n"
              "        assertion(candidate(*inp), exp, 0)\n", "entry_point": "f"},
     "1 inputs but 2 results"),
    ({"test": "inputs = [[1]]\nresults = [g()]\nfor inp, exp in zip(inputs, results):\n"
              "    assertion(f(*inp), exp, 0)\n"}, "results is not a literal"),
    ({"base_input": [[1]], "entry_point": "f"}, "canonical_solution"),
    ({"plus_input": [1], "entry_point": "f", "canonical_solution": "def f(x): return x"},
     "list of argument lists"),
    ({"test_cases": [{"input": "1", "output": "1", "type": "checker"}]}, "type 'checker'"),
    ({"test_cases": [{"input": [1], "output": [1], "type": "function_call"}]}, "fn_name"),
    ({"verification_info": "{not json"}, "'verification_info' is not JSON"),
    ({"test": "from solution import f\n\ndef test_f():\n    assert f(1) == 1\n"},
     "pytest-style test functions"),
    ({"tests": [1, 2]}, "unknown test format"),
])
def test_a_format_that_cannot_be_read_is_an_error_naming_it(answer: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_tests(answer, "python")


def test_an_unreadable_format_makes_an_error_status_not_a_zero() -> None:
    rollouts = [Rollout(id="bad", group="g", prompt="p", completion="print(1)",
                        answer={"public_test_cases": [{"input": "1", "output": "1",
                                                       "testtype": "interactive"}]})]
    scores = score_rollouts(Rubric.single("code"), rollouts, workers=0)
    assert scores[0].status.value == "error" and "interactive" in scores[0].errors["code"]


def test_code_contests_limits_are_read() -> None:
    suite = parse_suite(EXAMPLES["code_contests"]["answer"], "python")
    assert len(suite.tests) == 4 and suite.time_limit == 2.0 and suite.memory_mb == 245
    nanos = parse_suite({"public_tests": {"input": ["1"], "output": ["1"]},
                         "time_limit": {"seconds": 1, "nanos": 500000000}}, "python")
    assert nanos.time_limit == 1.5 and nanos.memory_mb is None
    none = parse_suite({"public_tests": {"input": ["1"], "output": ["1"]},
                        "time_limit": None, "memory_limit_bytes": 0}, "python")
    assert none.time_limit is None and none.memory_mb is None


@pytest.mark.usefixtures("sandbox")
def test_code_contests_time_limit_applies_unless_problem_limits_is_off() -> None:
    answer = {"public_tests": {"input": [""], "output": ["done\n"]},
              "time_limit": {"seconds": 0, "nanos": 300000000}}
    slow = fenced("import time\ntime.sleep(0.8)\nprint('done')\n")
    assert code(slow, answer, time_limit=2.0)["timeouts"] == 1.0
    assert code(slow, answer, time_limit=2.0, problem_limits=False)["reward"] == 1.0


@pytest.mark.usefixtures("sandbox")
def test_a_problem_cannot_loosen_the_rubric_limits() -> None:
    # The rubric's limits are ceilings: a row asking for 5 s and 8 GB gets the rubric's.
    answer = {"public_tests": {"input": [""], "output": ["done\n"]},
              "time_limit": {"seconds": 5, "nanos": 0}, "memory_limit_bytes": 8 << 30}
    slow = fenced("import time\ntime.sleep(0.8)\nprint('done')\n")
    assert code(slow, answer, time_limit=0.4)["timeouts"] == 1.0
    big = fenced("block = bytearray(400 << 20)\nprint('done')\n")
    assert code(big, answer, memory_limit=128)["reward"] == 0.0
    assert code(fenced("print('done')\n"), answer, memory_limit=128)["reward"] == 1.0


def test_evalplus_tests_become_value_tests_with_atol() -> None:
    tests = parse_tests(EXAMPLES["mbppplus"]["answer"], "python")
    assert [t.spec["expr"] for t in tests] == [
        "average(*[[1, 2, 3]])", "average(*[[1, 2]])", "average(*[[0.1, 0.2, 0.4]])",
        "average(*[[1e309, 1.0]])"]
    assert [t.tolerance for t in tests] == [1e-6] * 4  # atol 0 and float results: 1e-6
    human = parse_tests(EXAMPLES["humanevalplus"]["answer"], "python")
    assert human[0].spec["expr"] == "triple_sum(*[1, 2, 3])" and human[0].tolerance == 0.0
    assert all(t.check == "equal" for t in human)


@pytest.mark.usefixtures("sandbox")
def test_evalplus_compares_floats_within_atol_and_tuples_exactly() -> None:
    test = ("inputs = [[1.0], [2.0]]\nresults = [0.5, (1, 2)]\n"
            "for i, (inp, exp) in enumerate(zip(inputs, results)):\n"
            "    assertion(f(*inp), exp, 1e-3)\n")
    near = fenced("def f(x):\n    return 0.5004 if x == 1.0 else (1, 2)\n")
    assert code(near, {"test": test})["reward"] == 1.0
    far = fenced("def f(x):\n    return 0.502 if x == 1.0 else [1, 2]\n")
    assert code(far, {"test": test})["reward"] == 0.0
    # atol 0 on a mixed list is exact, whatever the rubric's float_tolerance.
    mixed = ("inputs = [[1.0]]\nresults = [[0.5, 1]]\n"
             "for i, (inp, exp) in enumerate(zip(inputs, results)):\n"
             "    assertion(f(*inp), exp, 0)\n")
    close = fenced("def f(x):\n    return [0.5000001, 1]\n")
    assert code(close, {"test": mixed}, float_tolerance=1e-3)["reward"] == 0.0


def test_evalplus_raw_rows_use_their_inputs_not_the_original_humaneval_test() -> None:
    answer = dict(EXAMPLES["evalplus_raw"]["answer"],
                  test="def check(candidate):\n    assert candidate([1], 2) == [2]\n")
    suite = parse_suite(answer, "python")
    assert len(suite.tests) == 4 and suite.reference is not None
    assert suite.tests[2].spec["expr"] == "scale(*[[0.1, 0.2], 3])"


@pytest.mark.usefixtures("sandbox")
def test_evalplus_raw_rows_take_outputs_from_the_canonical_solution() -> None:
    answer = EXAMPLES["evalplus_raw"]["answer"]
    from rewardsmith.rewards.code import reference

    before = len(reference._cache)
    for _ in range(2):
        assert code(fenced(EXAMPLES["evalplus_raw"]["right"]), answer)["reward"] == 1.0
    assert len(reference._cache) <= before + 1  # the reference ran once for both programs
    broken = dict(answer, canonical_solution="    return [x / 0 for x in xs]\n")
    with pytest.raises(ValueError, match="reference solution fails test 0"):
        code(fenced(EXAMPLES["evalplus_raw"]["right"]), broken)


def test_mbpp_setup_code_and_imports_run_with_each_assert() -> None:
    tests = parse_tests({"test_list": ["assert f(1) == 2"], "test_imports": ["import math"]},
                        "python")
    assert tests[0].check == "script" and tests[0].spec["code"].startswith("import math\n")
    assert parse_tests({"test_list": ["assert f(1) == 2"]}, "python")[0].check == "equal"
