"""How much slower than the machine the time budgets were set on this one runs now.

Wall-clock bounds in tests hold on this project's machine at its usual speed. On a slower
machine, or a shared one having a busy hour, they grow in proportion to a fixed pure-Python
workload timed the same way (never shrink), so that a test catches what the code does, not the
host's load.
"""

from __future__ import annotations

import functools
import subprocess
import sys

__all__ = ["REFERENCE_WORK_S", "speed_factor"]

# The best of five runs of ``sum(i * i for i in range(300_000))`` on the machine the budgets
# were set on, quiet.
REFERENCE_WORK_S = 0.036


def speed_factor() -> float:
    """How much slower than the reference machine this one runs pure Python now (>= 1)."""
    code = ("import time\nbest = 9.0\nfor _ in range(5):\n    t = time.perf_counter()\n"
            "    sum(i * i for i in range(300_000))\n    best = min(best, time.perf_counter() - t)\n"
            "print(best)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    return max(1.0, float(done.stdout) / REFERENCE_WORK_S)


@functools.lru_cache(maxsize=1)
def session_speed_factor() -> float:
    """``speed_factor`` measured once per test process, for bounds that need no fresh reading."""
    return speed_factor()
