"""Where each language's runtime lives on this machine, and what a sandbox must mount for it."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .jobs import SandboxUnavailable

__all__ = ["Runtime", "find_runtime", "python_environment", "python_runtime"]

# Mounted read-only in every sandbox: the system's programs and libraries, nothing else.
SYSTEM_TREE = "/usr"
CPP_FLAGS = ("-O2", "-std=c++17", "-pipe")


@dataclass(frozen=True)
class Runtime:
    """The harness's interpreter, the language's tools, and host folders they need mounted."""

    python: str
    extra: dict[str, Any]  # sent to the harness: {"compile": [...]} or {"node": path}
    mounts: tuple[str, ...]  # folders outside /usr the runtime lives in
    flags: tuple[str, ...] = ("-I", "-S")  # -S off for an environment: its site-packages

    @property
    def keep(self) -> tuple[str, ...]:
        """Mounted folders inside the sandbox's /tmp: the runner never wipes them."""
        return tuple(m for m in self.mounts if m == "/tmp" or m.startswith("/tmp/"))


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


def python_environment(environment: str) -> tuple[str, tuple[str, ...]]:
    """The interpreter of ``environment`` (a virtualenv folder or an interpreter's path) and
    the folders to mount read-only for it: the environment and its base installation.
    ``SandboxUnavailable`` names what is wrong with it."""
    path = os.path.abspath(os.path.expanduser(environment))
    if os.path.isdir(path):
        python = next((os.path.join(path, "bin", name) for name in ("python3", "python")
                       if os.access(os.path.join(path, "bin", name), os.X_OK)), None)
        if python is None:
            raise SandboxUnavailable(f"environment {environment!r} is a folder without "
                                     f"bin/python3: give a virtualenv or an interpreter's path")
        folder = path
    elif os.path.isfile(path) and os.access(path, os.X_OK):
        python = path
        folder = os.path.dirname(os.path.dirname(path))  # <prefix>/bin/python3 -> <prefix>
    else:
        raise SandboxUnavailable(f"environment {environment!r} does not exist: give a "
                                 f"virtualenv folder or a Python interpreter's path")
    mounts = [folder]
    real = os.path.realpath(python)
    base = _prefix_of(real)
    if _outside_usr(base) and base != folder:
        mounts.append(base)
    if os.path.realpath(folder) != folder:
        mounts.append(os.path.realpath(folder))
    return python, tuple(m for m in mounts if _outside_usr(m))


def find_runtime(language: str, environment: str | None = None) -> Runtime:
    """The runtime for ``language``, or ``SandboxUnavailable`` saying what to install.

    Python runs the system's ``python3`` with the standard library only, unless
    ``environment`` names a virtualenv or interpreter: then that one, with its packages."""
    python, mounts = python_runtime()
    if language == "python" and environment:
        python, mounts = python_environment(environment)
        return Runtime(python, {}, mounts, ("-I",))
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
