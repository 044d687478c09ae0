"""``repo_tests``: the task's tests pass in the repository state the agent left (SWE-style).

The state is the unified diff in the completion (SWE-bench's ``model_patch``; the last
fenced ``diff`` block when there is prose around it) applied to the task's base repository, or
the folder or tarball named by ``metadata.workspace``. The task is the rollout's ``answer``
(see ``repo_tests_task``). Each rollout runs in a fresh sandbox over a private copy of its
files, unpacked into the sandbox's own tmpfs: nothing the tests write survives, and the
base repository is read and packed once per process, not copied on disk per rollout.

Before the run, every protected path (the test files, and what configures pytest or runs at
interpreter start) is put back as the task has it; a change to one scores 0 (metric
``tampered``: how many) unless ``allow_tampering``. Results come from a reporter of ours
that pytest loads from outside the workspace and that writes to a pipe outside it, so no file
the agent leaves can stand for a report. A listed test the report does not show passing
(missing, not collected, skipped, errored, xfail) has failed. A diff that does not apply is
a 0 with ``patch_failed``, not an error; a task that cannot be read, or a sandbox that cannot
start, is an error.

Modes: ``resolved`` (1 only when every fail_to_pass and pass_to_pass test passes, SWE-bench's
metric) and ``fraction`` (the share of them that pass).
"""

from __future__ import annotations

import json
import math
import secrets
import sys
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from ...files.digests import reads_files
from ...sandbox import SandboxError, SandboxUnavailable, memory_cgroups_available
from ...sandbox.workspace import (
    STARTUP_MARGIN,
    WORKSPACE_SANDBOXES,
    WorkspaceJob,
    WorkspaceLimits,
    WorkspaceResult,
    check_workspace,
    run_workspace,
)
from .._registry import builtin
from .files_read import repo_tests_files
from .repo_patch import PatchError, apply_patch, extract_patch
from .repo_tests_task import (
    FileMap,
    RepoTestsTask,
    WorkspaceTooLarge,
    load_workspace,
    parse_task,
    protect,
    tar_bytes,
)

__all__ = ["repo_tests", "REPO_TESTS_DEFAULT_TIMEOUT"]

MODES = ("resolved", "fraction")
DEFAULT_TIME_LIMIT = 60.0
DEFAULT_MEMORY_MB = 2048
# The engine's hard timeout for one call: the test run, the sandbox's start, packing.
REPO_TESTS_DEFAULT_TIMEOUT = DEFAULT_TIME_LIMIT + 2 * STARTUP_MARGIN + 10
METRICS = ("fail_to_pass_passed", "fail_to_pass_total", "pass_to_pass_passed",
           "pass_to_pass_total", "tampered", "patch_failed", "collection_errors", "timeouts",
           "runner_tampered", "setup_failed", "workspace_too_large")

_LOCK = threading.Lock()
_BASE_TARS: OrderedDict[str, bytes] = OrderedDict()  # repo key -> packed base, a few kept
_PROBED: dict[tuple[str, str], str | None] = {}  # (sandbox, environment) -> failure or None


def _runner_source() -> str:
    return resources.files(__package__ or "rewardsmith.rewards.agents").joinpath(
        "repo_tests_runner.py").read_text("utf-8")


def _environment(environment: str | None) -> str:
    """The Python the tests run in: the given one, else the one running rewardsmith."""
    return environment if environment else sys.executable


def _positive(value: Any, name: str, whole: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value <= 0 or (whole and not isinstance(value, int)):
        kind = "a whole number" if whole else "a number"
        raise ValueError(f"{name} must be {kind} above 0, got {value!r}")


def _check(params: Mapping[str, Any]) -> None:
    """At load: params that can work, and a sandbox whose Python has pytest."""
    if params.get("mode") not in MODES:
        raise ValueError(f"mode {params.get('mode')!r} must be one of {', '.join(MODES)}")
    _positive(params.get("time_limit"), "time_limit")
    _positive(params.get("memory_limit"), "memory_limit", whole=True)
    for flag in ("allow_tampering", "autoload_plugins"):
        if not isinstance(params.get(flag), bool):
            raise ValueError(f"{flag} must be true or false, got {params.get(flag)!r}")
    plugins = params.get("plugins")
    if not isinstance(plugins, (list, tuple)) or \
            not all(isinstance(p, str) and p for p in plugins):
        raise ValueError(f"plugins must be a list of module names, got {plugins!r}")
    environment = params.get("environment")
    if environment is not None and (not isinstance(environment, str) or not environment):
        raise ValueError(f"environment must be the path of a virtualenv or a Python "
                         f"interpreter, got {environment!r}")
    sandbox = params.get("sandbox")
    if sandbox not in WORKSPACE_SANDBOXES:
        raise ValueError(f"sandbox {sandbox!r} cannot run repository tests; use one of "
                         f"{', '.join(WORKSPACE_SANDBOXES)}")
    _probe(str(sandbox), _environment(environment))


_PROBE = ("import sys\ntry:\n    import pytest\nexcept Exception as exc:\n"
          "    print('no pytest: %s' % exc)\nelse:\n    print('pytest ' + pytest.__version__)\n")


def _probe(sandbox: str, environment: str) -> None:
    """Raise ``ValueError`` unless a sandbox starts and pytest imports in ``environment``."""
    key = (sandbox, environment)
    with _LOCK:
        known = key in _PROBED
        failure = _PROBED.get(key)
    if not known:
        check_workspace(sandbox, None)  # the sandbox itself: its own message says what to fix
        try:
            check_workspace(sandbox, environment)
        except SandboxUnavailable as exc:
            raise ValueError(
                f"the tests' Python {environment!r} cannot run in the {sandbox} sandbox, which "
                f"runs as an unprivileged user: the environment must be readable by everyone "
                f"(rewardsmith.sandbox.pytest_env.make_pytest_environment makes one; give it "
                f"as environment). The sandbox said: {str(exc).rstrip('.')}") from exc
        result = run_workspace(WorkspaceJob(_PROBE, b"", environment,
                                            WorkspaceLimits(time=30.0)), sandbox)
        said = result.stdout.decode("utf-8", "replace").strip()
        failure = None if said.startswith("pytest ") else (
            f"the tests' Python {environment!r} cannot run pytest in the {sandbox} sandbox: "
            f"{said or result.stderr.decode('utf-8', 'replace').strip()[-300:] or 'no output'}"
            f"; give an environment (a virtualenv) that has pytest installed")
        with _LOCK:
            _PROBED[key] = failure
    if failure is not None:
        raise ValueError(failure)


def _completion_text(completion: Any) -> str:
    """The text holding the diff: the completion, or a trajectory's last assistant message."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence):
        for message in reversed(completion):
            if isinstance(message, Mapping) and message.get("role") == "assistant" and \
                    isinstance(message.get("content"), str):
                return str(message["content"])
        return ""
    return str(completion)


def _base_tar(task: RepoTestsTask) -> bytes:
    with _LOCK:
        found = _BASE_TARS.get(task.repo_key)
        if found is not None:
            _BASE_TARS.move_to_end(task.repo_key)
            return found
    packed = tar_bytes(task.repo or {})
    with _LOCK:
        _BASE_TARS[task.repo_key] = packed
        while len(_BASE_TARS) > 8:
            _BASE_TARS.popitem(last=False)
    return packed


def _zero(task: RepoTestsTask, **metrics: float) -> dict[str, float]:
    out = {name: 0.0 for name in METRICS}
    out["fail_to_pass_total"] = float(len(task.fail_to_pass))
    out["pass_to_pass_total"] = float(len(task.pass_to_pass))
    out.update(metrics)
    return {"reward": 0.0, **out}


@builtin("repo_tests", kind="verifier", default_timeout=REPO_TESTS_DEFAULT_TIMEOUT,
         check=_check)
@reads_files(repo_tests_files)
def repo_tests(
    completion: Any,
    answer: Any,
    metadata: Mapping[str, Any] | None = None,
    mode: str = "resolved",
    environment: str | None = None,
    time_limit: float = DEFAULT_TIME_LIMIT,
    memory_limit: int = DEFAULT_MEMORY_MB,
    sandbox: str = "bubblewrap",
    allow_tampering: bool = False,
    plugins: Sequence[str] = (),
    autoload_plugins: bool = False,
) -> dict[str, float]:
    """The task's fail_to_pass and pass_to_pass tests pass in the agent's repository, sandboxed.

    The repository is the completion's diff applied to the base, or ``metadata.workspace``."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} must be one of {', '.join(MODES)}")
    task = parse_task(answer)
    workspace = (metadata or {}).get("workspace") if isinstance(metadata, Mapping) else None
    base: FileMap = {}
    if workspace is not None:
        try:
            final = load_workspace(workspace, memory_limit << 20)
        except WorkspaceTooLarge:
            return _zero(task, workspace_too_large=1.0)
    else:
        if task.repo is None:
            raise ValueError("answer.repo is needed to apply the completion's diff "
                             "(or give the final workspace in metadata.workspace)")
        base = task.repo
        try:
            final = apply_patch(base, extract_patch(_completion_text(completion)))
        except PatchError:
            return _zero(task, patch_failed=1.0)
    final, tampered = protect(final, task)
    if tampered and not allow_tampering:
        return _zero(task, tampered=float(len(tampered)))
    result = _run(task, base, final, environment, time_limit, memory_limit, sandbox,
                  list(plugins), autoload_plugins)
    return _grade(task, result, mode, float(len(tampered)))


def _run(task: RepoTestsTask, base: FileMap, final: FileMap, environment: str | None,
         time_limit: float, memory_limit: int, sandbox: str, plugins: list[str],
         autoload_plugins: bool) -> tuple[WorkspaceResult, str]:
    """Run the tests; the result and the token the run's own records carry."""
    packed_base = _base_tar(task) if base else b""
    overlay = {path: content for path, content in final.items() if base.get(path) != content}
    header = {
        "token": secrets.token_hex(16),
        "base_bytes": len(packed_base),
        "delete": sorted(path for path in base if path not in final),
        "args": ["-p", "no:cacheprovider", "--color=no", *task.args],
        "plugins": plugins,
        "autoload_plugins": autoload_plugins,
        # The cgroup holds the memory where there is one; else each process's address space.
        "address_space_mb": None if sandbox == "bubblewrap" and memory_cgroups_available()
        else memory_limit,
    }
    stdin = json.dumps(header).encode("utf-8") + b"\n" + packed_base + tar_bytes(overlay)
    limits = WorkspaceLimits(time=time_limit, memory_mb=memory_limit, tmpfs_mb=memory_limit)
    result = run_workspace(WorkspaceJob(_runner_source(), stdin, _environment(environment),
                                        limits), sandbox)
    return result, str(header["token"])


def _records(result: WorkspaceResult, token: str) -> list[dict[str, Any]]:
    """The runner's records: its setup record (written before any code of the workspace
    ran), then those that carry the run's token (a line the workspace forged does not)."""
    found: list[dict[str, Any]] = []
    for line in result.stdout.split(b"\n"):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill, or not a record
        if not isinstance(record, dict):
            continue
        if (not found and record.get("e") == "setup") or (found and record.get("t") == token):
            found.append(record)
    return found


def _grade(task: RepoTestsTask, run: tuple[WorkspaceResult, str], mode: str,
           tampered: float) -> dict[str, float]:
    result, token = run
    records = _records(result, token)
    if not records:
        detail = result.stderr.decode("utf-8", "replace").strip()[-800:]
        raise SandboxError(f"the repository tests' sandbox did not set up the workspace"
                           f"{' in time' if result.timed_out else ''}: {detail or 'no output'}")
    if not records[0].get("ok"):
        return _zero(task, tampered=tampered, setup_failed=1.0)
    fatal = next((r for r in records if r.get("e") == "fatal"), None)
    if fatal is not None:
        raise SandboxError(f"the repository tests could not run: {fatal.get('message')}")
    verdicts: dict[str, bool] = {}
    for record in records:
        if record.get("e") != "test" or not isinstance(record.get("id"), str):
            continue
        test_id = record["id"]
        good = record.get("outcome") == "passed" and not record.get("xfail")
        if record.get("when") == "call":
            verdicts[test_id] = verdicts.get(test_id, True) and good
        elif (not good and record.get("outcome") != "skipped") or record.get("xfail"):
            verdicts[test_id] = False  # a setup or teardown error fails the test
        elif record.get("outcome") == "skipped":
            verdicts.setdefault(test_id, False)
    runner_tampered = any(r.get("e") == "runner_tampered" for r in records)
    passed = {test_id for test_id, ok in verdicts.items() if ok and not runner_tampered}
    f2p = sum(test_id in passed for test_id in task.fail_to_pass)
    p2p = sum(test_id in passed for test_id in task.pass_to_pass)
    total = len(task.fail_to_pass) + len(task.pass_to_pass)
    if mode == "resolved":
        reward = 1.0 if f2p + p2p == total else 0.0
    else:
        reward = (f2p + p2p) / total
    return {
        "reward": reward,
        "fail_to_pass_passed": float(f2p), "fail_to_pass_total": float(len(task.fail_to_pass)),
        "pass_to_pass_passed": float(p2p), "pass_to_pass_total": float(len(task.pass_to_pass)),
        "tampered": tampered, "patch_failed": 0.0,
        "collection_errors": float(sum(r.get("e") == "collect" for r in records)),
        "timeouts": 1.0 if result.timed_out else 0.0,
        "runner_tampered": 1.0 if runner_tampered else 0.0,
        "setup_failed": 0.0, "workspace_too_large": 0.0,
    }
