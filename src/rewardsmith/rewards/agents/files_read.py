"""The files ``repo_tests`` and ``verifier_script`` read besides the rollout, for the key their
stored results go under (see ``rewardsmith.files.digests``).

They name tasks, repositories and workspaces by path, so a verdict depends on what those paths
hold when it is made: a task edited in place, or a workspace path reused for another agent's
final state, must not replay the old verdict. The Python environment the tests run in counts
by its installed distributions (each ``*.dist-info/METADATA``: name and version) and its
interpreter, as installed packages count in a reward's code identity.
"""

from __future__ import annotations

import glob
import json
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from ...types import Rollout

__all__ = ["environment_files", "repo_tests_files", "verifier_script_files"]


def _answer_object(answer: Any) -> Mapping[str, Any]:
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError:
            return {}
    return answer if isinstance(answer, Mapping) else {}


def _workspace(rollout: Rollout) -> Iterator[str]:
    metadata = rollout.metadata
    workspace = metadata.get("workspace") if isinstance(metadata, Mapping) else None
    if isinstance(workspace, str) and workspace:
        yield workspace


def environment_files(environment: str | None) -> list[str]:
    """The interpreter of ``environment`` (a virtualenv folder or an interpreter; None: the
    one running rewardsmith) and the ``METADATA`` of every distribution installed in it."""
    if environment is None:
        python, root = sys.executable, sys.prefix
    else:
        path = os.path.abspath(os.path.expanduser(environment))
        if os.path.isdir(path):
            python, root = os.path.join(path, "bin", "python3"), path
        else:
            python, root = path, os.path.dirname(os.path.dirname(path))
    sites = tuple(sorted(glob.glob(os.path.join(glob.escape(root), "lib", "python3*",
                                                "site-packages"))))
    # Listed again only when a site folder changes (an install or removal renames entries).
    stamp = (python, root, sites, tuple(_mtime(site) for site in sites))
    found = _LISTED.get(stamp)
    if found is None:
        found = [python, os.path.join(root, "pyvenv.cfg")]
        for site in sites:
            found.extend(sorted(glob.glob(os.path.join(glob.escape(site), "*.dist-info",
                                                       "METADATA"))))
        if len(_LISTED) > 64:
            _LISTED.clear()
        _LISTED[stamp] = found
    return list(found)


_LISTED: dict[tuple[object, ...], list[str]] = {}


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def repo_tests_files(rollout: Rollout, params: Mapping[str, Any]) -> list[str]:
    """``repo_tests``: the task's repository and tests when given as paths, the workspace,
    and the tests' environment."""
    answer = _answer_object(rollout.answer)
    found = [answer[field] for field in ("repo", "tests")
             if isinstance(answer.get(field), str) and answer[field]]
    found.extend(_workspace(rollout))
    environment = params.get("environment")
    found.extend(environment_files(environment if isinstance(environment, str) else None))
    return found


def verifier_script_files(rollout: Rollout, params: Mapping[str, Any]) -> list[str]:
    """``verifier_script``: the task folder (``tests/``, ``task.toml``, its Dockerfile), the
    workspace, and the environment when one is given."""
    found: list[str] = []
    task = params.get("task")
    for candidate in (task, rollout.answer,
                      rollout.metadata.get("task") if isinstance(rollout.metadata, Mapping)
                      else None):
        if isinstance(candidate, Mapping):
            candidate = candidate.get("task")
        if isinstance(candidate, str) and candidate:
            found.append(candidate)
            break
    found.extend(_workspace(rollout))
    environment = params.get("environment")
    if isinstance(environment, str) and environment:
        found.extend(environment_files(environment))
    return found
