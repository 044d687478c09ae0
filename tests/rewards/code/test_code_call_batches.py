"""A Python program's call tests share one process (a session): what that may and may not change.

Consecutive function-call tests, and asserts that are a plain call of the program's name, run
in one forked child that loaded the program once. Each test still has its own deadline; a call
that dies, raises, loops or floods its output fails only its own test; the child sees a test's
arguments only when that test starts; and nothing it does turns a failure into an ``error``.
Real bubblewrap sandbox (and ``sandbox: none`` for the host's own process handling).
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from rewardsmith import Rollout, Rubric, score_rollouts
from rewardsmith.rewards.code import code
from rewardsmith.sandbox import Job, Limits, SandboxUnavailable, get_sandbox


@pytest.fixture(scope="module", autouse=True)
def real_sandbox() -> None:
    try:
        get_sandbox("bubblewrap").check("python")
    except SandboxUnavailable as exc:
        if os.environ.get("REWARDSMITH_SKIP_SANDBOX_TESTS") == "1":
            pytest.skip(f"no sandbox on this machine: {exc}")
        pytest.fail(f"these tests need the real sandbox: {exc}")


def run(program: str, tests: Any, **params: Any) -> dict[str, float]:
    params.setdefault("time_limit", 2.0)
    result: dict[str, float] = code(f"```python\n{program}\n```", tests, **params)
    return result


def scored(program: str, tests: Any, **params: Any) -> Any:
    params.setdefault("time_limit", 2.0)
    rubric = Rubric.single("code", params=params)
    rollout = Rollout(id="r", group="g", prompt="p", completion=f"```python\n{program}\n```",
                      answer=tests)
    return score_rollouts(rubric, [rollout])[0]


DOUBLES = {"fn_name": "f", "inputs": [[1], [2], [3], [4]], "outputs": [2, 4, 6, 8]}


@pytest.mark.parametrize("sandbox", ["bubblewrap", "none"])
def test_an_honest_program_passes_every_call(sandbox: str) -> None:
    program = "calls = 0\ndef f(x):\n    global calls\n    calls += 1\n    return 2 * x\n"
    assert run(program, DOUBLES, sandbox=sandbox)["reward"] == 1.0


@pytest.mark.parametrize("sandbox", ["bubblewrap", "none"])
@pytest.mark.parametrize("failure", [
    "os._exit(0)",
    "os.kill(os.getpid(), 9)",
    "sys.exit(0)",
    "raise ValueError('no')",
    "sys.stdout.write('x' * (3 << 20)); sys.stdout.flush()",
])
def test_a_call_that_fails_fails_only_its_own_test(sandbox: str, failure: str) -> None:
    program = ("import os, sys\n"
               "def f(x):\n"
               f"    if x == 2:\n        {failure}\n"
               "    print('debug', x)\n"
               "    return 2 * x\n")
    result = run(program, DOUBLES, sandbox=sandbox)
    assert (result["passed"], result["runtime_errors"]) == (3.0, 1.0), result


def test_a_program_that_fails_on_load_fails_every_call_and_is_no_error() -> None:
    for top in ("import os\nos._exit(0)\n", "raise SystemExit(0)\n", "1 / 0\n"):
        score = scored(top + "def f(x):\n    return 2 * x\n", DOUBLES)
        assert (score.status, score.reward) == ("ok", 0.0), (top, score.errors)


def test_a_looping_call_costs_one_time_limit() -> None:
    tests = {"fn_name": "f", "inputs": [[1], [2]] + [[n] for n in range(3, 11)],
             "outputs": [2 * n for n in range(1, 11)]}
    program = "def f(x):\n    while x == 2:\n        pass\n    return 2 * x\n"
    began = time.monotonic()
    result = run(program, tests, time_limit=0.5)
    assert time.monotonic() - began < 3.0
    assert (result["passed"], result["timeouts"], result["skipped"]) == (1.0, 1.0, 8.0), result


def test_calls_in_one_process_spend_one_total_time() -> None:
    tests = {"fn_name": "f", "inputs": [[n] for n in range(10)],
             "outputs": [2 * n for n in range(10)]}
    program = ("import time\n"
               "def f(x):\n"
               "    end = time.monotonic() + 0.6\n"
               "    while time.monotonic() < end:\n"
               "        pass\n"
               "    return 2 * x\n")
    began = time.monotonic()
    result = run(program, tests, total_time_limit=1.0)
    assert time.monotonic() - began < 4.0
    # The second call gets what is left of the total (0.4 s), not its own 2 s: it times out.
    assert result["passed"] <= 1.0 and result["timeouts"] == 1.0, result
    assert result["passed"] + result["skipped"] == 9.0, result


def test_a_call_sees_no_later_test() -> None:
    # Each call looks for the next tests' arguments among every object and frame of its
    # process and in its request channel; it answers right only when it finds none.
    tests = {"fn_name": "f", "inputs": [[7000001], [7000011], [7000021]],
             "outputs": [14000002, 14000022, 14000042]}
    program = (
        "import fcntl, gc, os, sys\n"
        "def f(x):\n"
        "    needles = [str(x + 10), str(x + 20)]\n"
        "    texts = []\n"
        "    for o in gc.get_objects():\n"
        "        if o is needles or o is texts or not isinstance(o, (dict, list, tuple)):\n"
        "            continue\n"
        "        try:\n"
        "            texts.append(repr(o)[:20000])\n"
        "        except Exception:\n"
        "            pass\n"
        "    frame = sys._getframe(1)\n"
        "    while frame is not None:\n"
        "        texts.append(repr(frame.f_locals)[:20000])\n"
        "        frame = frame.f_back\n"
        "    flags = fcntl.fcntl(4, fcntl.F_GETFL)\n"
        "    fcntl.fcntl(4, fcntl.F_SETFL, flags | os.O_NONBLOCK)\n"
        "    try:\n"
        "        texts.append(os.read(4, 1 << 16).decode('utf-8', 'replace'))\n"
        "    except OSError:\n"
        "        pass\n"
        "    fcntl.fcntl(4, fcntl.F_SETFL, flags)\n"
        "    seen = any(n in t for n in needles for t in texts)\n"
        "    return -1 if seen else 2 * x\n")
    assert run(program, tests)["reward"] == 1.0


def test_forged_replies_fail_the_forger_and_are_no_error() -> None:
    for forged in (b"garbage\n" * 5, b"\xff\xfe\n", b'{"raised": true}\n' * 4,
                   b'{"value": ' + b"[" * 5000 + b"]" * 5000 + b"}\n"):
        program = (f"import os\nos.write(3, {forged!r})\n"
                   "def f(x):\n    return 2 * x\n")
        score = scored(program, DOUBLES)
        assert score.status == "ok", (forged[:20], score.errors)
        assert score.reward < 1.0


def test_the_request_channel_is_one_way() -> None:
    program = ("import os, signal\n"
               "signal.signal(signal.SIGPIPE, signal.SIG_IGN)\n"
               "try:\n"
               "    os.write(4, b'{\"value\": 2}\\n' * 100000)\n"
               "    wrote = True\n"
               "except OSError:\n"
               "    wrote = False\n"
               "def f(x):\n"
               "    return -1 if wrote else 2 * x\n")
    assert run(program, DOUBLES)["reward"] == 1.0


def test_a_call_that_breaks_the_harness_fails_only_itself() -> None:
    # Patching what the session's loop uses (json, the builtins) is the program's own loss.
    program = ("import json, builtins\n"
               "def f(x):\n"
               "    if x == 2:\n"
               "        json.loads = None\n"
               "        builtins.compile = None\n"
               "    return 2 * x\n")
    score = scored(program, DOUBLES)
    assert score.status == "ok", score.errors
    assert score.metrics["code.passed"] == 2.0  # 1 and 2 answered; 3 and 4 were not read


def test_large_arguments_and_values_cross_the_channel() -> None:
    big = list(range(200_000))  # a request far past a pipe's buffer
    tests = {"fn_name": "f", "inputs": [[big], [[1, 2]]],
             "outputs": [[sum(big), list(range(50_000))], [3, list(range(50_000))]]}
    program = "def f(xs):\n    return [sum(xs), list(range(50_000))]\n"
    assert run(program, tests)["reward"] == 1.0


def test_stderr_of_any_size_in_a_call_does_not_fail_it() -> None:
    program = ("import sys\n"
               "def f(x):\n"
               "    sys.stderr.write('e' * (4 << 20))\n"
               "    return 2 * x\n")
    assert run(program, DOUBLES)["reward"] == 1.0


def test_value_asserts_and_script_asserts_interleaved() -> None:
    asserts = {"asserts": ["assert f(1) == 2", "assert f(2) == 4",
                           "assert abs(f(3) - 6) < 1e-9", "assert f(4) == 8",
                           "assert sorted([f(5)]) == [10]", "assert f(6) == 12"]}
    assert run("def f(x):\n    return 2 * x\n", asserts)["reward"] == 1.0
    wrong = run("def f(x):\n    return 2 * x if x % 2 else 0\n", asserts)
    assert (wrong["passed"], wrong["wrong"]) == (3.0, 3.0), wrong


def test_a_process_started_by_a_call_ends_with_its_program() -> None:
    sandbox = get_sandbox("bubblewrap")
    limits = Limits(time=2.0)
    leave = ("import os, time\n"
             "def f(x):\n"
             "    if os.fork() == 0:\n"
             "        os.setsid()\n"
             "        time.sleep(30)\n"
             "        os._exit(0)\n"
             "    open('/tmp/left', 'w').write('x')\n"
             "    return x\n")
    look = ("import os\n"
            "def f(x):\n"
            "    others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) > 1\n"
            "              and int(p) != os.getpid()]\n"
            "    return [others, os.listdir('/tmp')]\n")
    for _ in range(2):
        left = sandbox.run(Job("python", leave, ({"kind": "call", "fn": "f", "args": [1]},),
                               limits))
        assert left.runs[0].value == '{"value": 1}', left
        clean = sandbox.run(Job("python", look, ({"kind": "call", "fn": "f", "args": [1]},),
                                limits))
        assert clean.runs[0].value == '{"value": [[], ["rs-work"]]}', clean


KEEPER = ("seen = []\n"
          "def f(x):\n"
          "    seen.append(x)\n"
          "    return seen[-2] if len(seen) > 1 else -1\n")
# Each test's answer is the other test's argument.
SWAPPED = {"fn_name": "f", "inputs": [[5], [7]], "outputs": [7, 5]}


def test_calls_that_share_a_process_see_earlier_arguments() -> None:
    # The price of sharing: a program may answer from what an earlier call was given, where a
    # dataset's answers are other tests' arguments (as LiveCodeBench's grader allows too).
    assert run(KEEPER, SWAPPED)["passed"] == 1.0


@pytest.mark.parametrize("sandbox", ["bubblewrap", "none"])
def test_isolate_tests_gives_each_call_a_fresh_process(sandbox: str) -> None:
    assert run(KEEPER, SWAPPED, isolate_tests=True, sandbox=sandbox)["passed"] == 0.0
    asserts = {"asserts": ["assert f(5) == 7", "assert f(7) == 5"]}
    assert run(KEEPER, asserts, isolate_tests=True, sandbox=sandbox)["passed"] == 0.0
    honest = "def f(x):\n    return 2 * x\n"
    assert run(honest, DOUBLES, isolate_tests=True, sandbox=sandbox)["reward"] == 1.0


def test_isolate_tests_must_be_a_boolean() -> None:
    with pytest.raises(Exception, match="isolate_tests"):
        Rubric.single("code", params={"isolate_tests": "yes"})
