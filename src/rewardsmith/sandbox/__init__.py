"""The one way foreign (model-written) code runs: in a sandbox it cannot leave.

A ``Sandbox`` takes a ``Job`` (a program, its language, its tests, its ``Limits``) and
returns a ``JobResult``: what each test printed or returned, and how it ended. It never
judges; the caller compares with the expected outputs, which never enter the sandbox.

Backends: ``bubblewrap`` (the default; see ``bubblewrap.py``), ``none`` (no isolation,
only for code you trust) and ``container`` (podman or docker, for verifier scripts whose task
brings its own image; see ``container.py`` and ``script_jobs.py``). Another backend (a remote
sandbox service, say) is any object with ``name``, ``check(language)`` and ``run(job)``,
added with ``register_sandbox``.

Fail closed: ``check`` raises ``SandboxUnavailable`` (a ``ConfigError``) with what to
install or change when the backend cannot start; callers check at load, before any rollout.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from ..errors import ConfigError
from ._cgroup import memory_cgroups_available
from .bubblewrap import BubblewrapSandbox
from .container import ContainerSandbox
from .jobs import LANGUAGES, Job, JobResult, Limits, SandboxError, SandboxUnavailable, TestRun
from .unsandboxed import Unsandboxed

__all__ = [
    "LANGUAGES",
    "DEFAULT_SANDBOX",
    "Job",
    "JobResult",
    "Limits",
    "Sandbox",
    "SandboxError",
    "SandboxUnavailable",
    "TestRun",
    "get_sandbox",
    "memory_cgroups_available",
    "register_sandbox",
    "sandbox_names",
]

DEFAULT_SANDBOX = "bubblewrap"


@runtime_checkable
class Sandbox(Protocol):
    """What a sandbox backend provides."""

    name: str

    def check(self, language: str) -> None:
        """Raise ``SandboxUnavailable`` (saying what to fix) unless jobs in ``language`` can run."""
        ...

    def run(self, job: Job) -> JobResult:
        """Run every test of ``job``; raise ``SandboxError`` only for failures of the sandbox."""
        ...


_FACTORIES: dict[str, Callable[[], Sandbox]] = {
    "bubblewrap": BubblewrapSandbox,
    "none": Unsandboxed,
    "container": ContainerSandbox,
}
_INSTANCES: dict[str, Sandbox] = {}
_LOCK = threading.Lock()


def register_sandbox(name: str, factory: Callable[[], Sandbox]) -> None:
    """Make ``sandbox: <name>`` build its backend with ``factory()`` (once per process)."""
    with _LOCK:
        _FACTORIES[name] = factory
        _INSTANCES.pop(name, None)


def sandbox_names() -> list[str]:
    return sorted(_FACTORIES)


def get_sandbox(name: str = DEFAULT_SANDBOX) -> Sandbox:
    """The backend called ``name``, one per process (its start-up check is cached)."""
    with _LOCK:
        found = _INSTANCES.get(name)
        if found is None:
            factory = _FACTORIES.get(name) if isinstance(name, str) else None
            if factory is None:
                raise ConfigError(f"sandbox {name!r} is unknown; known: "
                                  f"{', '.join(sorted(_FACTORIES))}")
            found = _INSTANCES[name] = factory()
        return found
