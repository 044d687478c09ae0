"""Start-up cost: `rewardsmith --help` and the start of `score` import only what they need.

Import time is measured with ``python -X importtime`` in a fresh process, bytecode cached as
for installed code (the best of five runs, the first of which writes the cache, so that a busy
moment on a shared machine does not fail the test); which modules load is checked exactly. The
time budgets hold for this project's machine at its usual speed; on a slower machine, or a
shared one having a slow hour, they grow in proportion to a fixed pure-Python workload timed in
the same way (never shrink), so that the test catches what we import, not the host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.speed import speed_factor

IMPORT_BUDGET_S = 0.25
# The start of ``score`` measures 0.25 s on a quiet machine, about 0.09 s of it pydantic, which
# typer imports to parse the options: a little room, so that a slower machine does not fail.
# Since the identity of a component covers its code, rewards get read-only views and calls are
# isolated (code_identity, frozen, reuse_reasons, isolation, deadline on the start path), the
# start measured 0.31 s inside the full suite of a clean clone: the budget has that room.
SCORE_START_BUDGET_S = 0.35
# Loaded only when a run needs them: judges and HTTP, Parquet, the server, numpy, sympy, Ray.
HEAVY = ("httpx", "rewardsmith.judge", "pyarrow", "fastapi", "uvicorn", "numpy", "sympy",
         "ray", "langdetect", "jsonschema", "rewardsmith.sandbox")


def _imports(args: list[str], cwd: Path, until: bytes | None = None) -> tuple[float, set[str]]:
    """Seconds of top-level imports and the modules imported, for one run of ``args`` (up to
    the line ``until`` on stderr, when given)."""
    # As installed code runs: bytecode cached (here in a private folder) and read back, not
    # compiled again on every start (PYTHONDONTWRITEBYTECODE would compile each time).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cwd / "pycache")
    done = subprocess.run([sys.executable, "-X", "importtime", *args], cwd=cwd,
                          capture_output=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    stderr = done.stderr
    if until is not None:
        assert until in stderr, stderr[-2000:]
        stderr = stderr[: stderr.index(until)]
    total_us, names = 0, set()
    for line in stderr.decode().splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.split("|")
        names.add(name.strip())
        if not name.startswith("  "):  # a top-level import: its cumulative time counts once
            total_us += int(cumulative)
    return total_us / 1e6, names


def _best_of_five(args: list[str], cwd: Path, until: bytes | None = None,
                  first: int = 0) -> tuple[float, set[str]]:
    runs = [_imports([a.replace("{run}", str(n)) for a in args], cwd, until)
            for n in range(first, first + 5)]
    return min(seconds for seconds, _ in runs), runs[0][1]


def _timed(args: list[str], cwd: Path, budget_s: float,
           until: bytes | None = None) -> tuple[float, float, set[str]]:
    """(seconds, budget, modules): measured twice when the first measure is over budget, with
    the machine's speed read again, so that a busy moment of a shared machine (which the
    speed reading taken beside it can miss) does not fail the test; a real regression fails
    both."""
    seconds, names = _best_of_five(args, cwd, until=until)
    budget = budget_s * speed_factor()
    if seconds >= budget:  # runs 5-9: each run keeps its own store, none replays another
        seconds, names = _best_of_five(args, cwd, until=until, first=5)
        budget = budget_s * speed_factor()
    return seconds, budget, names


def test_help_imports_little(tmp_path: Path) -> None:
    seconds, budget, names = _timed(["-m", "rewardsmith", "--help"], tmp_path, IMPORT_BUDGET_S)
    assert not {h for h in HEAVY if h in names}, "help imported heavy modules"
    assert seconds < budget, f"--help spent {seconds:.3f} s importing (budget {budget:.3f} s)"


def test_score_start_imports_little(tmp_path: Path) -> None:
    """Imports until the first reward call of a run (in-process with -w 0, so that only the
    CLI's own imports are counted): the store, the rubric and the engine, nothing heavy."""
    rollouts = tmp_path / "r.jsonl"
    rollouts.write_text(json.dumps({"id": "a", "group": "g", "prompt": "p",
                                    "completion": "#### 4", "answer": "4"}) + "\n")
    (tmp_path / "first_call.py").write_text(
        "import os\n\ndef reward(completion, answer):\n"
        "    os.write(2, b'FIRST-CALL\\n')\n    return 1.0\n")
    args = ["-m", "rewardsmith", "score", str(rollouts), "--reward", "first_call.py:reward",
            "-o", str(tmp_path / "o.jsonl"), "-w", "0", "--store", str(tmp_path / "s{run}.db"), "-q"]
    seconds, budget, names = _timed(args, tmp_path, SCORE_START_BUDGET_S, until=b"FIRST-CALL")
    assert not {h for h in HEAVY if h in names}, "the start of score imported heavy modules"
    assert seconds < budget, (f"the start of score spent {seconds:.3f} s importing "
                              f"(budget {budget:.3f} s)")


@pytest.mark.parametrize("name", ["gsm8k", "math", "boxed_math", "ifeval", "code", "json_match",
                                  "length", "boxed_number"])
def test_registry_loads_only_the_home_module(name: str, tmp_path: Path) -> None:
    code = (f"import sys; from rewardsmith.rewards import get_builtin; "
            f"assert get_builtin({name!r}) is not None; "
            f"print(sorted(m for m in sys.modules if m.startswith('rewardsmith.rewards.') "
            f"and m.count('.') == 2))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    loaded = {m.rsplit(".", 1)[1] for m in eval(done.stdout)} - {"_registry", "extract"}
    from rewardsmith.rewards._registry import HOMES

    assert loaded == {HOMES[name.removeprefix("boxed_")]}


def test_homes_table_matches_what_modules_register() -> None:
    from rewardsmith.rewards import _registry

    _registry._ensure_loaded()
    registered = set(_registry._REGISTRY) - {n for n in _registry._REGISTRY
                                             if n.startswith("boxed_") and n != "boxed_math"}
    assert registered == set(_registry.HOMES)
    for name, home in _registry.HOMES.items():
        assert _registry._REGISTRY[name].func.__module__.startswith(
            f"rewardsmith.rewards.{home}"), name


def test_names_repeated_for_fast_help_match_their_sources() -> None:
    from rewardsmith.advantages import trainer_names
    from rewardsmith.cli.advantages_cmd import TRAINER_NAMES
    from rewardsmith.cli.score_cmd import DEFAULT_STORE_PATH
    from rewardsmith.store import DEFAULT_STORE_PATH as STORE_DEFAULT

    assert TRAINER_NAMES == trainer_names()
    assert DEFAULT_STORE_PATH == STORE_DEFAULT
