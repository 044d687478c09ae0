"""Where each language's runtime lives on this machine, and what a sandbox must mount for it."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .jobs import SandboxUnavailable

__all__ = ["Runtime", "find_runtime", "python_runtime"]

# Mounted read-only in every sandbox: the system's programs and libraries, nothing else.
SYSTEM_TREE = "/usr"
CPP_FLAGS = ("-O2", "-std=c++17", "-pipe")


@dataclass(frozen=True)
class Runtime:
    """The harness's interpreter, the language's tools, and host folders they need mounted."""

    python: str
    extra: dict[str, Any]  # sent to the harness: {"compile": [...]} or {"node": path}
    mounts: tuple[str, ...]  # folders outside /usr the runtime lives in


def _outside_usr(path: str) -> bool:
    return not (path == SYSTEM_TREE or path.startswith(SYSTEM_TREE + "/"))


def _prefix_of(executable: str) -> str:
    # /opt/node/bin/node -> /opt/node: the folder holding bin/ and lib/
    return os.path.dirname(os.path.dirname(executable))


@lru_cache(maxsize=1)
def python_runtime() -> tuple[str, tuple[str, ...]]:
    """The Python that runs the harness (and Python programs), and mounts it needs.

    The system's ``/usr/bin/python3`` is preferred: it lives in the tree every sandbox mounts.
    Otherwise this interpreter's installation prefix is mounted read-only as well.
    """
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            real = os.path.realpath(candidate)
            if not _outside_usr(real):
                return real, ()
    real = os.path.realpath(sys.executable)
    base = os.path.realpath(sys.base_prefix)
    executable = os.path.join(base, "bin", os.path.basename(real))
    if not os.access(executable, os.X_OK):
        executable = real
    return executable, ((base,) if _outside_usr(base) else ())


def find_runtime(language: str) -> Runtime:
    """The runtime for ``language``, or ``SandboxUnavailable`` saying what to install."""
    python, mounts = python_runtime()
    if language == "python":
        return Runtime(python, {}, mounts)
    if language == "cpp":
        compiler = shutil.which("g++", path="/usr/bin:/usr/local/bin:/bin")
        if compiler is None:
            raise SandboxUnavailable(
                "language cpp needs g++, which is not installed: run "
                "'apt-get install -y g++' (Debian/Ubuntu) or 'dnf install gcc-c++'")
        real = os.path.realpath(compiler)
        extra_mounts = (_prefix_of(real),) if _outside_usr(real) else ()
        return Runtime(python, {"compile": [compiler, *CPP_FLAGS]}, mounts + extra_mounts)
    if language == "javascript":
        node = shutil.which("node", path="/usr/bin:/usr/local/bin:/bin") or shutil.which("node")
        if node is None:
            raise SandboxUnavailable(
                "language javascript needs node, which is not installed: run "
                "'apt-get install -y nodejs' (Debian/Ubuntu) or install Node.js 18 or later")
        real = os.path.realpath(node)
        extra_mounts = (_prefix_of(real),) if _outside_usr(real) else ()
        return Runtime(python, {"node": real}, mounts + extra_mounts)
    raise SandboxUnavailable(f"no runtime for language {language!r}")
