"""What a sandbox is asked to run (a ``Job``) and what it reports back (a ``JobResult``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from ..errors import ConfigError, RewardsmithError

__all__ = [
    "LANGUAGES",
    "Job",
    "JobResult",
    "Limits",
    "SandboxError",
    "SandboxUnavailable",
    "TestRun",
]

LANGUAGES = ("python", "cpp", "javascript")
TEST_KINDS = ("stdin", "call", "expr", "script")
# Seconds allowed for starting the sandbox and the interpreter, on top of the job's own limits.
STARTUP_MARGIN = 10.0


class SandboxError(RewardsmithError):
    """The sandbox failed to run a job for a reason that is not the program's fault."""


class SandboxUnavailable(SandboxError, ConfigError):
    """No sandbox can start here; the message says what to install or change."""


@dataclass(frozen=True)
class Limits:
    """What one program may use. Per test unless the name says otherwise."""

    time: float = 4.0  # wall-clock seconds per test (CPU time is capped at its ceiling + 1)
    memory_mb: int = 512  # address space (Python, C++) or V8 heap (JavaScript)
    processes: int = 64  # processes and threads
    file_mb: int = 16  # largest file the program may write
    open_files: int = 256
    output_bytes: int = 1 << 20  # stdout kept per test; more is an output-limit failure
    total_time: float = 60.0  # all tests of one program together; the rest are skipped
    compile_time: float = 10.0  # counts toward total_time as well
    compile_memory_mb: int = 2048
    tmpfs_mb: int = 512  # /tmp, the main writable place (never more than memory_mb)
    shm_mb: int = 64  # /dev/shm (never more than memory_mb)

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"sandbox limit {item.name}: expected a number, got {value!r}")
            if not math.isfinite(value) or value <= 0:
                raise ConfigError(f"sandbox limit {item.name}: must be a positive number, "
                                  f"got {value!r}")
            if item.type == "int" and not isinstance(value, int):
                raise ConfigError(f"sandbox limit {item.name}: expected a whole number, "
                                  f"got {value!r}")

    def wall_budget(self) -> float:
        """The longest a job can take: compile and every test within the total, one more
        test's share, start-up."""
        return self.total_time + self.time + STARTUP_MARGIN

    def as_dict(self) -> dict[str, Any]:
        return {item.name: getattr(self, item.name) for item in fields(self)}


@dataclass(frozen=True)
class Job:
    """A program and its tests. Each test is a dict, one of:

    - ``{"kind": "stdin", "input": str}``: run the program, feed it ``input``; stdout comes back;
    - ``{"kind": "call", "fn": str, "args": list}``: call the program's function; its return
      value comes back as JSON of exact built-in types (anything else is reported unencodable);
    - ``{"kind": "expr", "expr": str}``: a Python expression's value: in the program's process
      when it is a call of one of the program's names with constant arguments, else where the
      program never ran (real builtins, fresh modules, the program's functions as stand-ins);
    - ``{"kind": "script", "code": str, "entry": str | None}``: run test code (then
      ``check(<entry>)`` when ``entry`` is given), in Python where the program never ran; it
      passes if it reaches the end. Test code that cannot run before the program is called
      (an import the sandbox lacks, no ``check``), or never calls it, is a ``bad_test``.
    """

    language: str
    source: str
    tests: tuple[dict[str, Any], ...]
    limits: Limits = Limits()
    stop_on_timeout: bool = True
    environment: str | None = None  # a Python virtualenv or interpreter (see runtimes.py)
    # Python call tests (and plain-call expressions) in a row share one process that loads the
    # program once; False gives each test a fresh process, so nothing carries between tests.
    shared_calls: bool = True

    def __post_init__(self) -> None:
        if self.language not in LANGUAGES:
            raise ConfigError(f"language {self.language!r} is not supported; "
                              f"supported: {', '.join(LANGUAGES)}")
        for index, test in enumerate(self.tests):
            kind = test.get("kind")
            if kind not in TEST_KINDS:
                raise ConfigError(f"test {index}: kind {kind!r} is not one of "
                                  f"{', '.join(TEST_KINDS)}")


@dataclass(frozen=True)
class TestRun:
    """One test's run. ``status``: done (it ended by itself), timeout, output_limit, skipped
    (not run: an earlier test timed out or the total time was spent), lost (the program's
    doing broke the run) or bad_test (the test code cannot run: not the program's fault)."""

    __test__ = False  # not a pytest class

    index: int
    status: str
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    value: str | None = None  # what a call/expr/script test sent back, raw
    seconds: float = 0.0
    reason: str = ""


@dataclass(frozen=True)
class JobResult:
    """The compile step's outcome and one ``TestRun`` per test, in order."""

    compiled: bool
    compile_message: str | None
    runs: tuple[TestRun, ...]
