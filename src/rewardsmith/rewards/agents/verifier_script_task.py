"""A task folder in the Harbor / Terminal-Bench layout, as ``verifier_script`` reads it.

```
task/
  task.toml            [verifier] timeout_sec, env; [environment] docker_image
  instruction.md       (not read here)
  environment/Dockerfile  (optional: the task's own image; needs a container sandbox)
  tests/test.sh        the verifier; it writes /logs/verifier/reward.txt or reward.json
  tests/...            its files, mounted read-only at /tests
```

Only what grading needs is read; other keys of ``task.toml`` are left alone, as Harbor's own
metadata is. A folder that cannot work (no ``tests/test.sh``, a ``task.toml`` that is not TOML,
a timeout that is not a positive number) is a ``ValueError`` naming the file and the key.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the same parser, from PyPI
    import tomli as tomllib

__all__ = ["DEFAULT_VERIFIER_TIMEOUT", "HarborTask", "load_task", "shipped_task"]

# Harbor's default when task.toml names no verifier timeout.
DEFAULT_VERIFIER_TIMEOUT = 600.0


@dataclass(frozen=True)
class HarborTask:
    """What grading needs from a task folder."""

    folder: str
    tests: str  # the tests/ folder (mounted read-only at /tests)
    timeout: float  # [verifier] timeout_sec
    env: Mapping[str, str] = field(default_factory=dict)  # [verifier] env
    dockerfile: str | None = None  # environment/Dockerfile, when the task has one
    docker_image: str | None = None  # [environment] docker_image
    solution: str | None = None  # solution/ (solve.sh: the reference solution), when present

    @property
    def needs_container(self) -> bool:
        return self.dockerfile is not None or self.docker_image is not None


def load_task(folder: str) -> HarborTask:
    """Read the task folder ``folder`` (cached per folder while its files are unchanged)."""
    if not isinstance(folder, str) or not folder:
        raise ValueError(f"task must be the path of a task folder, got {folder!r}")
    path = os.path.abspath(os.path.expanduser(folder))
    script = os.path.join(path, "tests", "test.sh")
    config = os.path.join(path, "task.toml")
    others = tuple(_stamp(os.path.join(path, *parts))
                   for parts in (("environment", "Dockerfile"), ("solution", "solve.sh")))
    return _load(path, _stamp(script), _stamp(config), others)


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_size, found.st_mtime_ns, found.st_ino)


@lru_cache(maxsize=256)
def _load(path: str, script_stamp: Any, config_stamp: Any, _others: Any) -> HarborTask:
    if not os.path.isdir(path):
        raise ValueError(f"task folder {path!r} does not exist")
    tests = os.path.join(path, "tests")
    script = os.path.join(tests, "test.sh")
    if script_stamp is None or not os.path.isfile(script):
        raise ValueError(f"task folder {path!r} has no tests/test.sh (the Harbor layout: "
                         f"tests/test.sh writes /logs/verifier/reward.txt)")
    config: dict[str, Any] = {}
    config_path = os.path.join(path, "task.toml")
    if config_stamp is not None:
        try:
            with open(config_path, "rb") as handle:
                config = tomllib.load(handle)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ValueError(f"{config_path}: not valid TOML: {exc}") from None
    verifier = _table(config, "verifier", config_path)
    environment = _table(config, "environment", config_path)
    timeout = verifier.get("timeout_sec", DEFAULT_VERIFIER_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or \
            not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"{config_path}: [verifier] timeout_sec must be a positive number, "
                         f"got {timeout!r}")
    env = verifier.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                            for k, v in env.items()):
        raise ValueError(f"{config_path}: [verifier] env must be a table of strings")
    image = environment.get("docker_image")
    if image is not None and (not isinstance(image, str) or not image):
        raise ValueError(f"{config_path}: [environment] docker_image must be an image name")
    dockerfile = os.path.join(path, "environment", "Dockerfile")
    solution = os.path.join(path, "solution")
    return HarborTask(path, tests, float(timeout), dict(env),
                      dockerfile if os.path.isfile(dockerfile) else None, image or None,
                      solution if os.path.isfile(os.path.join(solution, "solve.sh")) else None)


def _table(config: Mapping[str, Any], name: str, where: str) -> Mapping[str, Any]:
    found = config.get(name, {})
    if not isinstance(found, Mapping):
        raise ValueError(f"{where}: [{name}] must be a table")
    return found



def shipped_task(name: str) -> str:
    """The folder of a task shipped with rewardsmith (``word-count``), for tests and examples."""
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "data", "harbor_tasks", name)
    if not os.path.isdir(folder):
        raise ValueError(f"no shipped task {name!r}")
    return folder
