"""``verifier_script``: a Harbor / Terminal-Bench task's own verifier, run over the agent's workspace.

The task is a folder in the Harbor layout (see ``verifier_script_task``): ``tests/test.sh`` and
its files, ``task.toml`` with ``[verifier] timeout_sec``. The rollout's final workspace is
``metadata["workspace"]``: a folder or a ``.tar``/``.tar.gz`` of one. In a sandbox, a private
copy of the workspace is unpacked at ``/app`` (the working folder), the task's ``tests/`` is
mounted read-only at ``/tests``, and ``bash /tests/test.sh`` runs; the reward is what it
writes to ``/logs/verifier/reward.txt`` (one number) or ``reward.json`` (named numbers), read
as Harbor reads them: ``reward.txt`` first. ``/logs/verifier`` is outside the workspace and
empty when the script starts.

What the agent cannot do (each is tested): plant a reward file (files the workspace holds at
``reward.txt`` or ``logs/verifier/`` are its own files in ``/app``; the log folder is emptied
after unpacking); edit the tests (they come from the task folder, read-only, never from the
workspace); point a workspace link at the log folder so that the script writes the reward
through it (such links are removed before the script runs, metric ``links_removed``); end the
script early (a script killed by a signal, or past its time, scores 0 whatever file it left;
one that writes no reward file scores 0, metric ``no_reward_file``).

What it can do, and the task must prevent: code of the agent that ``test.sh`` runs runs in the
same sandbox, as the same user, and could write the log folder itself. A script that writes
its reward last, from results its own code computed (``reward_file`` naming the one file it
writes), leaves that code nothing to gain; ``reward_range`` (default [0, 1]) turns a reward
outside the task's range into 0.

Every outcome once the script has run is a score (0 with a metric saying why), never an error:
only a task folder or workspace that is not there, or a sandbox that cannot start, is an error.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ...files.digests import reads_files
from ...sandbox import get_sandbox
from ...sandbox.bubblewrap_scripts import BubblewrapScripts
from ...sandbox.runtimes import python_environment
from ...sandbox.script_jobs import (
    SCRIPT_MARGIN,
    SHM_MB,
    ScriptJob,
    ScriptOutput,
    ScriptResult,
    ScriptRunner,
    script_unavailable,
)
from .._registry import builtin
from .files_read import verifier_script_files
from .verifier_script_task import DEFAULT_VERIFIER_TIMEOUT, HarborTask, load_task

__all__ = ["verifier_script", "VERIFIER_DEFAULT_TIMEOUT", "reference_score", "script_runner"]

REWARD_FILES = ("reward.txt", "reward.json")
REWARD_FILE_CHOICES = ("auto", "txt", "json")
SANDBOXES = ("auto", "bubblewrap", "container")
LOG_MB = 16  # the log folder's size
SCRIPT_ROOM_MB = 128  # the least memory left for the script's processes
# The engine's hard timeout for one call: the longest script, then start-up and unpacking.
VERIFIER_DEFAULT_TIMEOUT = DEFAULT_VERIFIER_TIMEOUT + SCRIPT_MARGIN + 30.0

_BUBBLEWRAP: list[BubblewrapScripts] = []
_LOCK = threading.Lock()


def script_runner(name: str) -> ScriptRunner:
    """The backend called ``name`` that runs script jobs (``bubblewrap`` or ``container``)."""
    if name == "bubblewrap":
        with _LOCK:
            if not _BUBBLEWRAP:
                _BUBBLEWRAP.append(BubblewrapScripts())
            return _BUBBLEWRAP[0]
    backend = get_sandbox(name)
    if not callable(getattr(backend, "run_script", None)):
        raise script_unavailable(name)
    return backend  # type: ignore[return-value]


def _task_path(task: Any, answer: Any, metadata: Mapping[str, Any]) -> str:
    """The task folder: the ``task`` param, else the answer (a path, or an object with
    ``task``), else ``metadata["task"]``."""
    for where, found in (("params.task", task), ("answer", answer),
                         ("metadata.task", metadata.get("task"))):
        if isinstance(found, Mapping):
            found = found.get("task")
        if found is None:
            continue
        if not isinstance(found, str) or not found:
            raise ValueError(f"{where}: the task must be the path of a task folder, "
                             f"got {found!r}")
        return found
    raise ValueError("no task folder: set params.task, or give its path as the answer or "
                     "metadata.task")


def _sandbox_name(sandbox: str, task: HarborTask, environment: str | None = None) -> str:
    name = sandbox
    if sandbox == "auto":
        name = "container" if task.needs_container else "bubblewrap"
    elif task.needs_container and sandbox != "container":
        what = "environment/Dockerfile" if task.dockerfile else "[environment] docker_image"
        raise ValueError(f"task {task.folder!r} has {what}: its tests need that image; use "
                         f"sandbox: container (or auto)")
    if name == "container" and environment is not None:
        raise ValueError("environment is a virtualenv of this machine, for bubblewrap; in a "
                         "container the task's image holds what its tests use")
    return name


def _environment_mounts(environment: str | None) -> tuple[tuple[tuple[str, str], ...],
                                                          tuple[str, ...]]:
    """Read-only mounts and PATH folders for a Python environment (a virtualenv)."""
    if environment is None:
        return (), ()
    python, mounts = python_environment(environment)
    return tuple((m, m) for m in mounts), (os.path.dirname(python),)


def _check(params: Mapping[str, Any]) -> None:
    """At load: params that can work; the task (when fixed) and its sandbox start."""
    if params.get("sandbox") not in SANDBOXES:
        raise ValueError(f"sandbox {params.get('sandbox')!r} must be one of "
                         f"{', '.join(SANDBOXES)}")
    if params.get("reward_file") not in REWARD_FILE_CHOICES:
        raise ValueError(f"reward_file {params.get('reward_file')!r} must be one of "
                         f"{', '.join(REWARD_FILE_CHOICES)}")
    _positive("time_limit", params.get("time_limit"))
    for name in ("memory_limit", "workspace_limit"):
        value = params.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a whole number of megabytes, got {value!r}")
    _tmp_mb(int(params["memory_limit"]), int(params["workspace_limit"]))
    _bounds(params.get("reward_range"))
    _weights(params.get("weights"))
    environment = params.get("environment")
    if environment is not None and (not isinstance(environment, str) or not environment):
        raise ValueError(f"environment must be the path of a virtualenv, got {environment!r}")
    mounts, path = _environment_mounts(environment)
    task_param = params.get("task")
    if task_param is not None:
        task = load_task(_task_path(task_param, None, {}))
        name = _sandbox_name(str(params.get("sandbox")), task, environment)
        runner = script_runner(name)
        runner.check_scripts(_job(task, None, params, mounts, path))
    elif params.get("sandbox") != "auto":
        if params.get("sandbox") == "container" and environment is not None:
            raise ValueError("environment is a virtualenv of this machine, for bubblewrap; in "
                             "a container the task's image holds what its tests use")
        runner = script_runner(str(params.get("sandbox")))
        runner.check_scripts(ScriptJob(("true",), None, image=params.get("image")))
    else:
        script_runner("bubblewrap").check_scripts(ScriptJob(("true",), None))


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def _bounds(value: Any) -> tuple[float, float] | None:
    if value is None:
        return None
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2 or \
            not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                    for v in value) or value[0] > value[1]:
        raise ValueError(f"reward_range must be [low, high] (or null for any number), "
                         f"got {value!r}")
    return float(value[0]), float(value[1])


def _weights(value: Any) -> dict[str, float] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value or not all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v) and v >= 0 for k, v in value.items()) or \
            sum(value.values()) <= 0:
        raise ValueError(f"weights must map names in reward.json to numbers >= 0 (not all 0), "
                         f"got {value!r}")
    return {str(k): float(v) for k, v in value.items()}


def _tmp_mb(memory: int, workspace: int) -> int:
    """/tmp's size: what memory_limit leaves beside the workspace, the log folder, /dev/shm and
    room for the script's processes, at most 512 MB."""
    room = memory - workspace - LOG_MB - SHM_MB - SCRIPT_ROOM_MB
    if room < 16:
        raise ValueError(f"memory_limit ({memory} MB) holds the workspace's copy too: it must "
                         f"be at least workspace_limit + {LOG_MB + SHM_MB + SCRIPT_ROOM_MB + 16} "
                         f"MB (workspace_limit is {workspace})")
    return min(512, room)


def _job(task: HarborTask, workspace: str | None, params: Mapping[str, Any],
         mounts: tuple[tuple[str, str], ...], path: tuple[str, ...]) -> ScriptJob:
    time_limit = min(task.timeout, _positive("time_limit", params.get("time_limit")))
    memory, space = int(params.get("memory_limit", 2048)), int(params.get("workspace_limit", 1024))
    return ScriptJob(
        ("bash", "/tests/test.sh"), workspace,
        mounts=((task.tests, "/tests"), *mounts),
        outputs=REWARD_FILES, time_limit=time_limit,
        memory_mb=memory, workspace_mb=space, output_mb=LOG_MB, tmp_mb=_tmp_mb(memory, space),
        env=dict(task.env), path=path,
        image=params.get("image") or task.docker_image,
        dockerfile=None if params.get("image") else task.dockerfile,
        guarded=("/proc", "/tests"),
    )


@builtin("verifier_script", kind="verifier", default_timeout=VERIFIER_DEFAULT_TIMEOUT,
         check=_check)
@reads_files(verifier_script_files)
def verifier_script(
    answer: Any,
    metadata: Mapping[str, Any],
    task: str | None = None,
    sandbox: str = "auto",
    environment: str | None = None,
    time_limit: float = DEFAULT_VERIFIER_TIMEOUT,
    memory_limit: int = 2048,
    workspace_limit: int = 1024,
    reward_file: str = "auto",
    reward_range: Sequence[float] | None = (0.0, 1.0),
    weights: Mapping[str, float] | None = None,
    image: str | None = None,
) -> dict[str, float]:
    """Verifier script: a Harbor task's tests/test.sh, run over the agent's workspace."""
    folder = load_task(_task_path(task, answer, metadata))
    workspace = metadata.get("workspace")
    if not isinstance(workspace, str) or not workspace:
        raise ValueError(f"metadata.workspace must be the path of the agent's workspace (a "
                         f"folder or a .tar/.tar.gz), got {workspace!r}")
    params = {"time_limit": time_limit, "memory_limit": memory_limit,
              "workspace_limit": workspace_limit, "image": image}
    mounts, path = _environment_mounts(environment)
    job = _job(folder, os.path.abspath(workspace), params, mounts, path)
    result = script_runner(_sandbox_name(sandbox, folder, environment)).run_script(job)
    return grade(result, reward_file, _bounds(reward_range), _weights(weights))


def reference_score(task: str, *, sandbox: str = "auto", environment: str | None = None,
                    time_limit: float = DEFAULT_VERIFIER_TIMEOUT, memory_limit: int = 2048,
                    reward_file: str = "auto", image: str | None = None) -> dict[str, float]:
    """What the task's reference solution scores: ``solution/solve.sh`` run over an empty
    workspace, then ``tests/test.sh``, in one sandbox, as Harbor's oracle agent does. A task
    whose tests need what this sandbox lacks (a network, root, tools it installs) scores its
    own solution below full credit here: check a task this way before training on it."""
    folder = load_task(task)
    if folder.solution is None:
        raise ValueError(f"task {folder.folder!r} has no solution/solve.sh")
    mounts, path = _environment_mounts(environment)
    params = {"time_limit": time_limit, "memory_limit": memory_limit, "workspace_limit": 1024,
              "image": image}
    job = _job(folder, None, params, ((folder.solution, "/solution"), *mounts), path)
    script = ("bash /solution/solve.sh > /logs/verifier/solution-stdout.txt 2>&1 || exit 97\n"
              "exec bash /tests/test.sh\n")
    job = dataclasses.replace(job, argv=("bash", "-c", script))
    result = script_runner(_sandbox_name(sandbox, folder, environment)).run_script(job)
    return grade(result, reward_file, None)


def grade(result: ScriptResult, reward_file: str = "auto",
          reward_range: tuple[float, float] | None = (0.0, 1.0),
          weights: Mapping[str, float] | None = None) -> dict[str, float]:
    """The reward and metrics for a finished script job (``ValueError`` only for a workspace
    that could not be unpacked for a reason other than its size)."""
    if result.workspace_error is not None:
        if "No space left" in result.workspace_error or \
                f"Errno {errno.ENOSPC}" in result.workspace_error:
            return {"reward": 0.0, "workspace_too_large": 1.0}
        raise ValueError(f"the workspace could not be unpacked: {result.workspace_error}")
    metrics = {"seconds": round(result.seconds, 3), "links_removed": float(result.links_removed)}
    if result.timed_out:
        return {"reward": 0.0, "timeout": 1.0, **metrics}
    code = result.exit_code
    metrics["exit_code"] = float(code) if code is not None else -1.0
    if code is None or code < 0:  # killed by a signal: whatever it left is not its verdict
        return {"reward": 0.0, "script_killed": 1.0, **metrics}
    text = result.outputs.get("reward.txt", ScriptOutput(False))
    data = result.outputs.get("reward.json", ScriptOutput(False))
    if reward_file == "auto" and text.present and data.present:
        metrics["both_reward_files"] = 1.0
    chosen, kind = ((text, "txt") if reward_file == "txt" or
                    (reward_file == "auto" and text.present) else (data, "json"))
    if not chosen.present:
        return {"reward": 0.0, "no_reward_file": 1.0, **metrics}
    if not chosen.regular or chosen.truncated:
        return {"reward": 0.0, "bad_reward_file": 1.0, **metrics}
    if kind == "txt":
        value = _number(chosen.text.strip())
        named: dict[str, float] = {}
    else:
        value, named, missing_key = _from_json(chosen.text, weights)
        if missing_key:
            return {"reward": 0.0, "no_reward_key": 1.0, **metrics}
    if value is None:
        return {"reward": 0.0, "bad_reward_file": 1.0, **metrics}
    metrics.update({f"reward.{k}": v for k, v in named.items()})
    if reward_range is not None and not reward_range[0] <= value <= reward_range[1]:
        return {"reward": 0.0, "out_of_range": 1.0, **metrics}
    return {"reward": value, **metrics}


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _from_json(text: str, weights: Mapping[str, float] | None) -> tuple[float | None,
                                                                        dict[str, float], bool]:
    """(reward, named numbers, whether the reward key was missing) from reward.json: its
    ``reward``, else the ``weights``-weighted mean of the named numbers (a missing one counts
    0), else its only number. Values that are not numbers, but for ``reward``, are left out."""
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):
        return None, {}, False
    if not isinstance(found, dict):
        value = found if isinstance(found, (int, float)) and not isinstance(found, bool) else None
        return (None if value is None else _number(str(value))), {}, False
    named: dict[str, float] = {}
    for key, raw in found.items():
        number = raw if isinstance(raw, (int, float)) and not isinstance(raw, bool) else None
        if number is not None and math.isfinite(float(number)):
            named[str(key)] = float(number)
        elif key == "reward":
            return None, {}, False  # the reward itself is not a number: not a reward file
        # other values that are not numbers (a message, details) are not rewards: left out
    if "reward" in named:
        return named.pop("reward"), named, False
    if weights is not None:
        total = sum(weights.values())
        return sum(w * named.get(k, 0.0) for k, w in weights.items()) / total, named, False
    if len(named) == 1:
        return next(iter(named.values())), named, False
    return None, named, True
