"""A Python environment with pytest that the sandbox's unprivileged user can read.

Repository tests run pytest inside the sandbox, in a Python environment mounted read-only.
When rewardsmith runs as root the sandbox runs as ``nobody``, which cannot read an
environment under ``/root`` (pyenv's, a project's virtualenv there). ``make_pytest_environment``
builds one anyone can read: a virtualenv of the system's ``python3`` holding a copy of the
pytest (and its dependencies) this interpreter has installed, with no network and no pip.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
from pathlib import Path

__all__ = ["make_pytest_environment"]

_SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")


def _needed(name: str, seen: set[str]) -> None:
    """``name`` and what it requires (no extras, nothing for Windows), transitively."""
    key = name.lower().replace("_", "-")
    if key in seen:
        return
    try:
        requires = importlib.metadata.requires(name) or []
    except importlib.metadata.PackageNotFoundError:
        return  # not installed: a dependency for another Python version, say
    seen.add(key)
    for requirement in requires:
        if "extra ==" in requirement or "win32" in requirement:
            continue
        found = re.match(r"[A-Za-z0-9_.-]+", requirement)
        if found:
            _needed(found.group(0), seen)


def make_pytest_environment(folder: str, python: str | None = None) -> str:
    """Make a virtualenv in ``folder`` (a new path) with this interpreter's pytest; return it.

    ``python`` is the interpreter to base it on (default: the system's ``python3``). Every
    file is made readable by all (the folders above it must be as well: ``/tmp/x``, not a
    private temporary folder). Raises ``RuntimeError`` saying what is missing."""
    base = python or next((p for p in _SYSTEM_PYTHONS if os.access(p, os.X_OK)), None)
    if base is None:
        raise RuntimeError("no system python3 to make a virtualenv of")
    made = subprocess.run([base, "-m", "venv", "--without-pip", folder], capture_output=True,
                          text=True, check=False, timeout=120)
    if made.returncode != 0:
        raise RuntimeError(f"cannot make a virtualenv with {base}: {made.stderr.strip()[-300:]}")
    site = next(Path(folder, "lib").glob("python3*/site-packages"), None)
    if site is None:
        raise RuntimeError(f"the virtualenv in {folder} has no site-packages")
    names: set[str] = set()
    _needed("pytest", names)
    if "pytest" not in names:
        raise RuntimeError("pytest is not installed in this interpreter")
    for name in sorted(names):
        distribution = importlib.metadata.distribution(name)
        for entry in distribution.files or []:
            source = Path(str(distribution.locate_file(entry)))
            if entry.parts[0] in ("..", "/") or "__pycache__" in entry.parts or \
                    not source.is_file():
                continue  # scripts outside site-packages, compiled caches
            target = site / entry
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    # Compiled now: the sandbox mounts the environment read-only, where nothing can be cached.
    subprocess.run([os.path.join(folder, "bin", "python3"), "-m", "compileall", "-q",
                    str(site)], capture_output=True, check=False, timeout=300)
    for root, _dirs, files in os.walk(folder):
        os.chmod(root, 0o755)
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, 0o755)
    return folder
