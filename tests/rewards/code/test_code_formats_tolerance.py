"""``float_tolerance`` loosens only expected floats: integers and words compare exactly.

A policy that prints 7006999 where 7000000 is expected must fail whatever the tolerance, in
every test format; a float within the tolerance passes.
"""

from __future__ import annotations

from typing import Any

import pytest

from rewardsmith.rewards.code import code
from rewardsmith.rewards.code.compare import outputs_match, values_match
from rewardsmith.sandbox import SandboxUnavailable, get_sandbox

TOLERANCES = [1e-3, 0.5, 10.0]


@pytest.fixture(scope="module")
def sandbox() -> None:
    try:
        get_sandbox("bubblewrap").check("python")
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox on this machine: {exc}")


def fenced(source: str) -> str:
    return f"```python\n{source}\n```\n"


@pytest.mark.parametrize("tolerance", TOLERANCES)
def test_printed_integers_and_words_compare_exactly(tolerance: float) -> None:
    assert not outputs_match("7006999\n", "7000000\n", tolerance)
    assert not outputs_match("7000000.0\n", "7000000\n", tolerance)
    assert not outputs_match("YES 2\n", "NO 2\n", tolerance)
    assert not outputs_match("1 3\n", "1 2\n", tolerance)
    # A float in the expected output is loosened, integers beside it are not.
    assert outputs_match("0.33333 12\n", "0.3333333 12\n", tolerance)
    assert not outputs_match("0.3333333 13\n", "0.3333333 12\n", tolerance)
    assert outputs_match("7000001\n", "7.0e6\n", tolerance)


@pytest.mark.parametrize("tolerance", TOLERANCES)
def test_returned_integers_compare_exactly(tolerance: float) -> None:
    assert not values_match(7006999, 7000000, tolerance)
    assert not values_match(7006999.0, 7000000, tolerance)
    assert not values_match([1, 7006999], [1, 7000000], tolerance)
    assert not values_match({"a": 7006999}, {"a": 7000000}, tolerance)
    assert values_match(7000000.0, 7000000, tolerance)  # equal, as Python compares them
    assert values_match(7000001, 7000000.0, tolerance)
    assert values_match((0.33333, 2), (1 / 3, 2), tolerance)
    assert not values_match((0.33333, 3), (1 / 3, 2), tolerance)


def test_values_past_the_float_range_are_unequal_not_an_error() -> None:
    assert not values_match(10 ** 400, 1.5, 1e-6)
    assert not values_match(1.5, 10 ** 400, 1e-6)
    assert values_match(float("inf"), float("inf"), 1e-6)
    assert not outputs_match("1" * 400 + ".0", "1.5", 1e-6)


def test_without_a_tolerance_floats_compare_exactly() -> None:
    assert not values_match(0.30000000000000004, 0.3, None)
    assert not outputs_match("0.30000000000000004", "0.3", None)


# (format, tests, program printing/returning 7006999, program answering 1/3 for the float)
OFF_BY_6999 = "7006999"
FORMATS: list[tuple[str, Any, str, Any, str]] = [
    ("stdin", {"inputs": [""], "outputs": ["7000000\n"]}, f"print({OFF_BY_6999})",
     {"inputs": [""], "outputs": ["0.333333\n"]}, "print(1 / 3)"),
    ("fn_name", {"fn_name": "f", "inputs": [[]], "outputs": [7000000]},
     f"def f():\n    return {OFF_BY_6999}",
     {"fn_name": "f", "inputs": [[]], "outputs": [0.333333]}, "def f():\n    return 1 / 3"),
    ("asserts", {"asserts": ["assert f() == 7000000"]}, f"def f():\n    return {OFF_BY_6999}",
     {"asserts": ["assert f() == 0.333333"]}, "def f():\n    return 1 / 3"),
    ("humaneval", {"test": "def check(candidate):\n    assert candidate() == 7000000\n",
                   "entry_point": "f"}, f"def f():\n    return {OFF_BY_6999}.0",
     {"test": "def check(candidate):\n    assert candidate() == 0.333333\n",
      "entry_point": "f"}, "def f():\n    return 1 / 3"),
]


@pytest.mark.usefixtures("sandbox")
@pytest.mark.parametrize(("tests", "off", "float_tests", "float_program"),
                         [pytest.param(*case[1:], id=case[0]) for case in FORMATS])
def test_in_every_format_an_integer_off_by_6999_fails(tests: Any, off: str, float_tests: Any,
                                                      float_program: str) -> None:
    result = code(fenced(off), tests, float_tolerance=max(TOLERANCES))
    assert result["reward"] == 0.0 and result["wrong"] == 1.0, result
    assert code(fenced(float_program), float_tests)["reward"] == 0.0
    assert code(fenced(float_program), float_tests, float_tolerance=1e-5)["reward"] == 1.0


@pytest.mark.usefixtures("sandbox")
@pytest.mark.parametrize(("language", "program"), [
    ("cpp", "#include <iostream>\nint main() { std::cout << 7006999 << std::endl; }"),
    ("javascript", "console.log(7006999);"),
])
def test_other_languages_printing_an_integer_off_by_6999_fail(language: str,
                                                              program: str) -> None:
    import shutil

    if shutil.which({"cpp": "g++", "javascript": "node"}[language]) is None:
        pytest.skip(f"no toolchain for {language}")
    tests = {"inputs": [""], "outputs": ["7000000\n"]}
    result = code(f"```{language}\n{program}\n```", tests, language=language,
                  float_tolerance=max(TOLERANCES))
    assert result["reward"] == 0.0 and result["wrong"] == 1.0, result


@pytest.mark.usefixtures("sandbox")
def test_the_off_by_one_probe_earns_nothing_under_a_wide_tolerance() -> None:
    from rewardsmith.testing.code_kinds import code_kind, code_probes

    kind = code_kind({})
    probes = {name: completion for name, completion, *_ in code_probes(kind)}
    probe = [completion for name, completion in probes.items() if "off by one" in name]
    assert len(probe) == 1, sorted(probes)
    assert code(kind.correct, kind.label, float_tolerance=10.0)["reward"] == 1.0
    result = code(probe[0], kind.label, float_tolerance=10.0)
    assert result["reward"] == 0.0 and result["wrong"] == 3.0, result
