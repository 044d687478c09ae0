"""``rewardsmith.mathcheck``: the same verdict from any thread, a hard timeout, no signals."""

from __future__ import annotations

import asyncio
import multiprocessing
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import rewardsmith.mathcheck as mathcheck
from rewardsmith.errors import ConfigError
from rewardsmith.mathcheck import MathVerdict, math_equal, math_equal_async

SRC = Path(mathcheck.__file__).parent
# Numeric probing cannot evaluate 0^0 at any point, so this pair needs the sympy fallback.
NEEDS_SYMPY = ("(x-x)^0", "1")


def test_fast_path_verdicts() -> None:
    verdict = math_equal("so the answer is $\\boxed{\\frac12}$", "0.5")
    assert verdict == MathVerdict(True, "ok", "\\frac12", verdict.reason)
    assert bool(verdict) is True
    assert not math_equal("0.6", "0.5")
    assert math_equal("0.6", "0.5").status == "ok"
    error = math_equal("1", "\\frac{1}{")
    assert (error.equal, error.status) == (False, "error")
    assert "unparseable reference" in error.reason


def test_the_symbolic_fallback_runs_in_a_worker() -> None:
    verdict = math_equal(*NEEDS_SYMPY, timeout=10)
    assert (verdict.equal, verdict.status) == (True, "ok")
    assert not math_equal("(x-x)^0", "2", timeout=10).equal


def test_same_verdicts_from_threads_and_asyncio() -> None:
    pairs = [("\\frac{1}{2}", "0.5"), ("x^2-1", "(x-1)(x+1)"), ("(1,2)", "[1,2]"), NEEDS_SYMPY]
    expected = [math_equal(a, b, timeout=10) for a, b in pairs]
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(lambda p: math_equal(p[0], p[1], timeout=10), pairs))

    async def gather() -> list[MathVerdict]:
        return list(await asyncio.gather(*(math_equal_async(a, b, timeout=10) for a, b in pairs)))

    assert threaded == expected
    assert asyncio.run(gather()) == expected
    # A plain thread with no event loop, as in a Ray or trainer worker thread.
    box: list[MathVerdict] = []
    thread = threading.Thread(target=lambda: box.append(math_equal(*NEEDS_SYMPY, timeout=10)))
    thread.start()
    thread.join(30)
    assert box == [expected[-1]]


def test_a_call_never_outlives_its_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    # A fresh pool and a limit no symbolic check can meet: starting a worker alone takes longer.
    monkeypatch.setattr(mathcheck, "_pool", None)
    start = time.perf_counter()
    verdict = math_equal("(y-y)^0", "1", timeout=0.002)
    elapsed = time.perf_counter() - start
    assert elapsed < 0.002 + 0.5
    assert (verdict.equal, verdict.status) == (False, "timeout")
    assert "not decided within 0.002 s" in verdict.reason
    pool = mathcheck._pool
    assert pool is not None
    pool.close()


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), True, "5"])
def test_bad_timeouts_are_refused(timeout: object) -> None:
    with pytest.raises(ConfigError):
        math_equal("1", "1", timeout=timeout)  # type: ignore[arg-type]


def test_no_signal_anywhere() -> None:
    files = [SRC / "mathcheck.py", *sorted((SRC / "rewards" / "mathanswer").glob("*.py"))]
    for path in files:
        assert not re.search(r"import signal|from signal|signal\.\w+", path.read_text()), path


def test_the_fast_path_never_imports_sympy() -> None:
    code = (
        "import sys\n"
        "from rewardsmith.mathcheck import math_equal\n"
        "pairs = [('1,000', '1000'), ('\\\\frac12', '0.5'), ('x^2+2x+1', '(x+1)^2'),\n"
        "         ('\\\\sqrt{8}', '2\\\\sqrt2'), ('y=2x+1', '2x-y+1=0'), ('(1,2]', 'x>1')]\n"
        "assert all(math_equal(a, b).status == 'ok' for a, b in pairs)\n"
        "assert 'sympy' not in sys.modules, 'sympy was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def _in_daemon(queue: object) -> None:
    queue.put(math_equal(*NEEDS_SYMPY, timeout=10))  # type: ignore[attr-defined]


def test_inside_a_daemonic_worker_the_fallback_runs_in_place() -> None:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    process = ctx.Process(target=_in_daemon, args=(queue,), daemon=True)
    process.start()
    verdict = queue.get(timeout=60)
    process.join(10)
    assert (verdict.equal, verdict.status) == (True, "ok")
