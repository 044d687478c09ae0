"""``sandbox: none``: the same harness and limits, run on the host. Only for code you trust.

Resource limits, per-test deadlines and output caps still apply, and each test's process
group is killed after it; but the program sees the network, the host's files and processes,
and a program that leaves its process group can outlive its test.
"""

from __future__ import annotations

import shutil
import tempfile

from ._process import harness_source, run_harness
from .jobs import Job, JobResult
from .runtimes import find_runtime

__all__ = ["Unsandboxed"]


class Unsandboxed:
    """Runs jobs as plain child processes of this one, in a private temporary folder."""

    name = "none"

    def check(self, language: str) -> None:
        find_runtime(language)  # the toolchain must still exist

    def check_environment(self, environment: str) -> None:
        find_runtime("python", environment)

    def run(self, job: Job) -> JobResult:
        runtime = find_runtime(job.language, job.environment)
        work = tempfile.mkdtemp(prefix="rewardsmith-code-")
        try:
            argv = ["/usr/bin/env", "-C", work, runtime.python, *runtime.flags, "-c",
                    harness_source()]
            return run_harness(argv, job, runtime.extra, what="the unsandboxed runner")
        finally:
            shutil.rmtree(work, ignore_errors=True)
