"""Programs that try to leave the sandbox, or to earn credit they did not earn.

Every test runs the real bubblewrap sandbox through the ``code`` reward. For each escape:
the host is untouched, nothing the program started is left running, the program gets no
credit it did not earn, and the next test (or rollout) still runs.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import Rollout, Rubric, score_rollouts
from rewardsmith.rewards.code import code
from rewardsmith.sandbox import SandboxUnavailable, get_sandbox

SUM_TESTS = {"inputs": ["1 2\n", "3 4\n", "10 20\n"], "outputs": ["3\n", "7\n", "30\n"]}
HONEST = "a, b = map(int, input().split())\nprint(a + b)\n"


@pytest.fixture(scope="module", autouse=True)
def real_sandbox() -> None:
    # These tests are the evidence that the sandbox holds: without one they fail (with what
    # to install), unless REWARDSMITH_SKIP_SANDBOX_TESTS=1 says this machine cannot have one.
    try:
        get_sandbox("bubblewrap").check("python")
    except SandboxUnavailable as exc:
        if os.environ.get("REWARDSMITH_SKIP_SANDBOX_TESTS") == "1":
            pytest.skip(f"no sandbox on this machine: {exc}")
        pytest.fail(f"the escape tests need the real sandbox: {exc}")


def _pid_namespace(pid: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _is_sandbox_runner(pid: str) -> bool:
    # A warm sandbox's runner is PID 1 of its namespace and waits for the next program.
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("NSpid:"):
                    return line.split()[-1] == "1"
    except OSError:
        pass
    return False


def _describe(pids: set[str]) -> list[str]:
    found = []
    for pid in sorted(pids):
        try:
            with open(f"/proc/{pid}/status", encoding="utf-8") as handle:
                fields = dict(line.split(":", 1) for line in handle if ":" in line)
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                command = handle.read()[:60].replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        found.append(f"{pid} {fields.get('State', '').strip()} "
                     f"NSpid {fields.get('NSpid', '').strip()} {command}")
    return found


def sandboxed_processes() -> set[str]:
    """Processes living in a PID namespace other than this one's, but for warm sandboxes'
    runners: what sandboxed programs left."""
    mine = _pid_namespace("self")
    found = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            space = _pid_namespace(pid)
            if space is not None and space != mine and not _is_sandbox_runner(pid):
                found.add(pid)
    return found


@pytest.fixture(autouse=True)
def nothing_left_running() -> Iterator[None]:
    before = sandboxed_processes()
    yield
    deadline = time.monotonic() + 5
    left = sandboxed_processes() - before
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = sandboxed_processes() - before
    assert not left, f"processes left running after the test: {_describe(left)}"


def run(program: str, tests: Any = None, **params: Any) -> dict[str, float]:
    params.setdefault("time_limit", 2.0)
    result: dict[str, float] = code(f"```python\n{program}\n```",
                                    SUM_TESTS if tests is None else tests, **params)
    return result


def assert_no_credit(result: dict[str, float]) -> None:
    assert result["passed"] == 0, result
    assert result["reward"] == 0.0, result


def test_honest_program_passes_so_the_checks_below_mean_something() -> None:
    assert run(HONEST)["reward"] == 1.0


# ---------------------------------------------------------------- network


def test_cannot_connect_to_a_port_the_host_listens_on() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted: list[Any] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                accepted.append(server.accept())
            except OSError:
                continue

    thread = threading.Thread(target=serve)
    thread.start()
    program = (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'hi')\n"
        "    print('connected')\n"
        "except OSError as exc:\n"
        "    print('blocked', exc)\n")
    tests = {"inputs": [""], "outputs": ["connected"]}
    try:
        result = run(program, tests)
    finally:
        done.set()
        thread.join()
        server.close()
    assert_no_credit(result)
    assert accepted == []


def test_no_network_interface_but_its_own_loopback() -> None:
    program = "import socket\nprint(sorted(n for _, n in socket.if_nameindex()))"
    assert run(program, {"inputs": [""], "outputs": ["['lo']"]})["reward"] == 1.0


# ---------------------------------------------------------------- host files and secrets


def test_cannot_read_host_files(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2\n")
    store = tmp_path / "runs.sqlite"
    store.write_text("stored-secret\n")
    readme = Path(__file__).resolve().parent.parents[1] / "README.md"
    home = Path.home()
    program = (
        "import os\n"
        f"for path in {[str(secret), str(store), str(readme)]!r}:\n"
        "    try:\n"
        "        print(open(path).read().strip())\n"
        "    except OSError:\n"
        "        pass\n"
        f"print(os.path.exists({str(home)!r}) and os.listdir({str(home)!r}))\n")
    tests = {"inputs": [""], "outputs": ["hunter2\nstored-secret"]}
    assert_no_credit(run(program, tests))
    # What it can see: /usr read-only, its own /proc, /dev and /tmp.
    listing = "import os\nprint(sorted(os.listdir('/')))"
    visible = {"inputs": [""], "outputs": ["['bin', 'dev', 'lib', 'lib64', 'proc', 'sbin', "
                                           "'tmp', 'usr']"]}
    if all(os.path.islink(p) for p in ("/bin", "/lib", "/lib64", "/sbin")):
        assert run(listing, visible)["reward"] == 1.0


def test_cannot_read_an_api_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    program = ("import os\n"
               "print(os.environ.get('OPENAI_API_KEY'))\n"
               "print(open('/proc/1/environ', 'rb').read() if os.path.exists('/proc/1/environ') "
               "else '')\n")
    result = run(program, {"inputs": [""], "outputs": ["sk-test-secret"]})
    assert_no_credit(result)
    shown = run("import os\nprint(sorted(os.environ))",
                {"inputs": [""], "outputs": ["['HOME', 'LANG', 'PATH', 'PWD']"]})
    assert shown["reward"] == 1.0


def test_cannot_write_outside(tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    program = (
        "import os\n"
        f"for path in [{str(target)!r}, '/usr/pwned', '/pwned']:\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        print('wrote', path)\n"
        "    except OSError:\n"
        "        pass\n"
        "open('/tmp/mine', 'w').write('ok')\n"
        "print(open('/tmp/mine').read())\n")
    result = run(program, {"inputs": [""], "outputs": ["ok"]})
    assert result["reward"] == 1.0  # only its own tmpfs was writable
    assert not target.exists()
    assert not Path("/usr/pwned").exists() and not Path("/pwned").exists()


# ---------------------------------------------------------------- resources


def test_fork_bomb_is_contained_and_the_next_test_runs() -> None:
    bomb = ("import os, sys\n"
            "if input().strip() == 'bomb':\n"
            "    while True:\n"
            "        try:\n"
            "            os.fork()\n"
            "        except OSError:\n"
            "            pass\n"
            "print('ok')\n")
    tests = {"inputs": ["calm\n", "bomb\n"], "outputs": ["ok", "ok"]}
    began = time.monotonic()
    result = run(bomb, tests, time_limit=1.0)
    assert result["passed"] == 1 and result["timeouts"] == 1
    assert time.monotonic() - began < 8
    assert run(HONEST)["reward"] == 1.0  # the next program runs as usual


def test_allocating_8_gb_fails_inside_and_the_host_is_fine() -> None:
    program = "x = bytearray(8 << 30)\nprint(len(x))"
    result = run(program, {"inputs": [""], "outputs": [str(8 << 30)]})
    assert_no_credit(result)
    assert result["runtime_errors"] == 1


def test_printing_1_gb_is_cut_at_the_output_limit() -> None:
    program = ("import sys\nchunk = 'x' * (1 << 20)\n"
               "for _ in range(1024):\n    sys.stdout.write(chunk)\n")
    began = time.monotonic()
    result = run(program, {"inputs": [""], "outputs": ["x"]}, time_limit=10.0)
    assert_no_credit(result)
    assert result["runtime_errors"] == 1
    assert time.monotonic() - began < 8


def test_a_daemon_does_not_outlive_its_test(tmp_path: Path) -> None:
    # The daemon would print into the next test's output if it survived.
    program = (
        "import os, sys, time\n"
        "if input().strip() == 'spawn':\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            for _ in range(100):\n"
        "                open('/tmp/alive', 'a').write('x')\n"
        "                time.sleep(0.05)\n"
        "        os._exit(0)\n"
        "    print('spawned')\n"
        "else:\n"
        "    time.sleep(0.3)\n"
        "    print('clean' if not os.path.exists('/tmp/alive') or "
        "len(open('/tmp/alive').read()) < 3 else 'alive')\n")
    tests = {"inputs": ["spawn\n", "check\n"], "outputs": ["spawned", "clean"]}
    assert run(program, tests)["reward"] == 1.0


def test_kill_all_spares_the_runner_and_the_host() -> None:
    sentinel = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        program = ("import os, signal\n"
                   "try:\n"
                   "    os.kill(-1, signal.SIGKILL)\n"
                   "except OSError:\n"
                   "    pass\n" + HONEST)
        result = run(program)
        assert result["reward"] == 1.0  # every test ran: the runner survived each kill
        assert sentinel.poll() is None  # the host's process was never reachable
    finally:
        sentinel.send_signal(signal.SIGKILL)
        sentinel.wait()


def test_the_runner_cannot_be_inspected_through_proc() -> None:
    program = ("import os\n"
               "for what in ('fd', 'mem', 'environ'):\n"
               "    try:\n"
               "        print(what, os.listdir('/proc/1/fd') if what == 'fd' else "
               "len(open('/proc/1/' + what, 'rb').read(10)))\n"
               "    except OSError:\n"
               "        print(what, 'denied')\n")
    expected = "fd denied\nmem denied\nenviron denied"
    assert run(program, {"inputs": [""], "outputs": [expected]})["reward"] == 1.0


# ---------------------------------------------------------------- unearned credit


ADD_ASSERTS = {"asserts": ["assert add(1, 2) == 3", "assert add(2, 2) == 4",
                           "assert add(-1, 1) == 0"]}


def test_exit_before_the_asserts_run_earns_nothing() -> None:
    for exit_call in ("import sys\nsys.exit(0)", "import os\nos._exit(0)",
                      "raise SystemExit"):
        program = f"def add(a, b):\n    return 0\n{exit_call}\n"
        assert_no_credit(run(program, ADD_ASSERTS))
        script_asserts = {"asserts": ["assert add(1, 2) in (3,)"]}
        assert_no_credit(run(program, script_asserts))


def test_an_object_equal_to_everything_earns_nothing() -> None:
    program = ("class Anything(int):\n"
               "    def __eq__(self, other):\n        return True\n"
               "    __hash__ = int.__hash__\n"
               "    def __bool__(self):\n        return True\n"
               "def add(a, b):\n    return Anything(7)\n")
    assert_no_credit(run(program, ADD_ASSERTS))
    calls = {"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [3, 7]}
    assert_no_credit(run(program, calls))
    humaneval = {"test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"
                         "    assert candidate(2, 5) == 7\n", "entry_point": "add"}
    assert_no_credit(run(program, humaneval))


def test_the_expected_outputs_are_not_in_the_sandbox() -> None:
    # The program searches every file it can read and its own memory for the expected text.
    token = "expected-7c1e9a"
    program = (
        "import gc, os\n"
        "found = None\n"
        "paths = ['/proc/1/cmdline', '/proc/1/environ', '/proc/1/fd/0', '/proc/self/cmdline']\n"
        "for root, dirs, files in os.walk('/', onerror=lambda e: None):\n"
        "    if root.startswith(('/usr', '/proc', '/sys', '/dev')):\n"
        "        dirs[:] = []\n"
        "        continue\n"
        "    paths += [os.path.join(root, name) for name in files]\n"
        "for path in paths:\n"
        "    try:\n"
        "        with open(path, 'rb') as handle:\n"
        "            if b'expected-' in handle.read(1 << 20):\n"
        "                found = path\n"
        "    except OSError:\n"
        "        pass\n"
        "for thing in gc.get_objects():\n"
        "    if isinstance(thing, dict):\n"
        "        for value in list(thing.values()):\n"
        "            if isinstance(value, str) and value.startswith('expected-'):\n"
        "                found = value\n"
        "print(found)\n")
    result = run(program, {"inputs": [""], "outputs": [token]})
    assert_no_credit(result)
    call_program = ("import gc\n"
                    "def f():\n"
                    "    for thing in gc.get_objects():\n"
                    "        if isinstance(thing, str) and thing.startswith('expected-'):\n"
                    "            return thing\n"
                    "    return None\n")
    assert_no_credit(run(call_program, {"fn_name": "f", "inputs": [[]], "outputs": [token]}))
    assert_no_credit(run(call_program, {"asserts": [f"assert f() == {token!r}"]}))


def test_monkeypatching_builtins_and_assert_earns_nothing() -> None:
    program = ("import builtins, sys\n"
               "builtins.AssertionError = type('Quiet', (Exception,), {})\n"
               "builtins.len = lambda x: 3\n"
               "builtins.sorted = lambda x, **k: [1, 2, 3]\n"
               "sys.settrace(lambda *a: None)\n"
               "def add(a, b):\n    return [0]\n")
    tests = {"asserts": ["assert len(add(1, 2)) == 3", "assert sorted(add(1, 2)) == [1, 2, 3]",
                         "assert add(1, 2) in ([3],)"]}
    assert_no_credit(run(program, tests))


# ---------------------------------------------------------------- the run goes on


def test_a_run_of_escapes_scores_every_rollout() -> None:
    cheats = ["import os\nwhile True:\n    os.fork()",
              "import os, signal\nos.kill(-1, signal.SIGKILL)",
              "x = bytearray(8 << 30)",
              "import sys\nsys.exit(0)"]
    rollouts = [Rollout(id=f"r{i}", group="g", prompt="add", completion=f"```python\n{c}\n```",
                        answer=SUM_TESTS) for i, c in enumerate([*cheats, HONEST])]
    rubric = Rubric.single("code", params={"time_limit": 1.0})
    scores = score_rollouts(rubric, rollouts, workers=1)
    assert [s.status.value for s in scores] == ["ok"] * 5
    assert [s.reward for s in scores] == [0.0, 0.0, 0.0, 0.0, 1.0]


def test_a_program_written_against_the_runner_cannot_forge_a_script_pass() -> None:
    # Script tests (asserts that are not 'expression == literal') run in a process the
    # program never runs in; the program answers calls from a separate, fresh process.
    forge = ("import gc, os, sys\n"
             "for fd in range(3, 64):\n"
             "    try:\n"
             "        os.write(fd, b'done')\n"
             "    except OSError:\n"
             "        pass\n"
             "leaked = [o for o in gc.get_objects() if isinstance(o, str) and 'assert' in o]\n"
             "def double(x):\n"
             "    return len(leaked) + 99\n"
             "os._exit(0)\n")
    loop_check = {"test": "def check(candidate):\n    for x in range(3):\n"
                          "        assert candidate(x) == 2 * x\n", "entry_point": "double"}
    assert_no_credit(run(forge, loop_check))
    assert_no_credit(run(forge.replace("os._exit(0)\n", ""), loop_check))
    patcher = ("import builtins, sys\n"
               "builtins.range = lambda *a: []\n"
               "sys.settrace(lambda *a: None)\n"
               "def double(x):\n    return -1\n")
    assert_no_credit(run(patcher, loop_check))
    honest = "def double(x):\n    return 2 * x\n"
    assert run(honest, loop_check)["reward"] == 1.0
