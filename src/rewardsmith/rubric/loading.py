"""Finding a reward function from a name: built-in, ``module:func``, ``module.func``, ``file.py:func``.

A reward that cannot be loaded is reported before anything is scored, with what is missing,
where Python looked, and how to fix it. A relative ``path/file.py:func`` is looked for in
``folder`` first (a rubric's own folder), then in the working directory.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from rewardsmith.errors import LoadError
from rewardsmith.rubric.code_identity import code_identity

ParamsCheck = Callable[[Any], None]

__all__ = ["LoadedReward", "load_reward", "source_identity", "import_file"]


@dataclass(frozen=True)
class LoadedReward:
    """A resolved reward: the callable, the spec it came from, and where it lives.

    ``located`` is a spec that finds the same function from any working directory (a file
    spec with its absolute path; otherwise ``spec``): what worker processes import.
    ``check_params(params)`` raises ``ValueError`` for params a built-in cannot work with.
    """

    func: Callable[..., Any]
    spec: str
    builtin: bool
    default_timeout: float | None = None
    bounded: bool = False  # a built-in that cannot hang (linear time)
    located: str = ""
    check_params: ParamsCheck | None = None


def load_reward(spec: str | Callable[..., Any], *, folder: str | Path | None = None
                ) -> LoadedReward:
    """Resolve ``spec`` to a callable, or raise ``LoadError`` that says what to fix.

    A relative ``path/file.py:func`` is found in ``folder`` first, then in the working directory.
    """
    if callable(spec):
        return LoadedReward(spec, _callable_name(spec), builtin=False)
    if not isinstance(spec, str) or not spec.strip():
        raise LoadError(f"a reward must be a built-in name or an import path, not {spec!r}")
    spec = spec.strip()
    if ":" in spec and (spec.split(":", 1)[0].endswith(".py") or "/" in spec or os.sep in spec):
        path_text, _, attr = spec.rpartition(":")
        path = _locate_file(Path(path_text), folder, spec)
        return LoadedReward(_from_file(path, attr, spec), spec, builtin=False,
                            located=f"{path}:{attr}")
    if spec.endswith(".py"):
        raise LoadError(
            f"cannot load reward {spec!r}: name the function after the file, "
            f"for example '{spec}:my_reward'"
        )
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        return LoadedReward(_from_module(module_name, attr, spec), spec, builtin=False,
                            located=spec)
    if "." in spec:
        module_name, _, attr = spec.rpartition(".")
        return LoadedReward(_from_module(module_name, attr, spec), spec, builtin=False,
                            located=spec)
    return _from_builtins(spec)


def _from_builtins(name: str) -> LoadedReward:
    from rewardsmith.rewards import (
        builtin_names,
        get_builtin,
    )  # base layer reaching the registry lazily

    found = get_builtin(name)
    if found is None:
        names = builtin_names()
        close = difflib.get_close_matches(name, names, n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise LoadError(
            f"unknown built-in reward {name!r}.{hint} Run 'rewardsmith list' for all built-ins; "
            f"for your own function use 'module:func', 'module.func' or 'path/to/file.py:func'."
        )
    return LoadedReward(found.func, name, builtin=True, default_timeout=found.default_timeout,
                        bounded=found.bounded, located=name, check_params=found.check_params)


def _locate_file(path: Path, folder: str | Path | None, spec: str) -> Path:
    """The file a relative path names: the one in ``folder`` if it is there, else the working
    directory's; an absolute path as it is. Raises ``LoadError`` naming every place looked at."""
    path = path.expanduser()
    if path.is_absolute():
        candidates = [path]
    else:
        candidates = [Path(folder) / path] if folder is not None else []
        candidates.append(Path.cwd() / path)
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    looked = " and ".join(repr(str(c.resolve())) for c in candidates)
    where = (f" (a relative path is looked for in the rubric's folder {str(folder)!r}, then in "
             f"the working directory {os.getcwd()!r})" if folder is not None else
             f" (working directory {os.getcwd()!r})")
    raise LoadError(f"cannot load reward {spec!r}: file {str(path)!r} does not exist: looked at "
                    f"{looked}{where}")


def _search_path_text() -> str:
    shown = [p or "(current directory)" for p in sys.path[:8]]
    more = f" ... and {len(sys.path) - 8} more" if len(sys.path) > 8 else ""
    here = os.getcwd()
    last = "" if "" in sys.path or here in sys.path else f", then the working directory {here}"
    return ", ".join(shown) + more + last


def _from_module(module_name: str, attr: str, spec: str) -> Callable[..., Any]:
    if not module_name or not attr:
        raise LoadError(f"cannot load reward {spec!r}: expected 'module:func' or 'module.func'")
    try:
        module = _import_from_here(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if missing == module_name or module_name.startswith(missing + "."):
            raise LoadError(
                f"cannot load reward {spec!r}: no module named {missing!r}. Python searched: "
                f"{_search_path_text()}. Fix: add the folder that holds {missing.split('.')[0]}.py "
                f"(or the package) to PYTHONPATH, e.g. PYTHONPATH=/path/to/folder, or install the "
                f"package; or name the file directly as 'path/to/file.py:{attr}'."
            ) from exc
        raise LoadError(
            f"cannot load reward {spec!r}: module {module_name!r} was found, but importing it "
            f"failed because it imports {missing!r}, which is not installed or not on the "
            f"path ({exc}). Fix: install {missing.split('.')[0]!r} in this environment."
        ) from exc
    except Exception as exc:
        raise LoadError(
            f"cannot load reward {spec!r}: importing module {module_name!r} raised "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return _attribute(module, attr, spec, where=f"module {module_name!r}")


def _on_path(folder: str) -> None:
    """Search ``folder`` for modules too, after everything else (an installed package of the
    same name still wins)."""
    if folder not in sys.path and not (folder == os.getcwd() and "" in sys.path):
        sys.path.append(folder)
        importlib.invalidate_caches()


def _import_from_here(module_name: str) -> ModuleType:
    """Import ``module_name``; when it is not found, look in the working directory as well, as
    ``python -m`` and pytest do (a console script's path starts at its own bin folder)."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        top = module_name.partition(".")[0]
        here = os.getcwd()
        if exc.name not in (top, module_name) or here in sys.path or \
                not (Path(here, top).is_dir() or Path(here, f"{top}.py").is_file()):
            raise
    _on_path(here)
    return importlib.import_module(module_name)


def import_file(path: Path, spec: str) -> ModuleType:
    """Import a Python file as a module with a stable, unique name (so workers can find it)."""
    resolved = path.expanduser().resolve()
    if not resolved.is_file():
        raise LoadError(
            f"cannot load reward {spec!r}: file {str(path)!r} does not exist "
            f"(looked at {str(resolved)!r}, working directory {os.getcwd()!r})"
        )
    digest = hashlib.blake2b(str(resolved).encode(), digest_size=6).hexdigest()
    module_name = f"rewardsmith_user_{resolved.stem}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    module_spec = importlib.util.spec_from_file_location(module_name, resolved)
    if module_spec is None or module_spec.loader is None:
        raise LoadError(f"cannot load reward {spec!r}: {str(resolved)!r} is not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    # The modules beside the file import as they would if it were run as a script
    # (``from helpers import g`` in rw.py), now and when the reward is called.
    _on_path(str(resolved.parent))
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[module_name]
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise LoadError(
            f"cannot load reward {spec!r}: running {str(resolved)!r} raised "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return module


def _from_file(path: Path, attr: str, spec: str) -> Callable[..., Any]:
    if not attr:
        raise LoadError(f"cannot load reward {spec!r}: name the function after the colon")
    module = import_file(path, spec)
    return _attribute(module, attr, spec, where=f"file {str(path)!r}")


def _attribute(module: ModuleType, attr: str, spec: str, *, where: str) -> Callable[..., Any]:
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            names = [n for n in dir(module) if not n.startswith("_")]
            candidates = [n for n in names if callable(getattr(module, n, None))]
            close = difflib.get_close_matches(part, candidates, n=3)
            hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
            available = ", ".join(candidates[:12]) or "none"
            raise LoadError(
                f"cannot load reward {spec!r}: {where} has no attribute {part!r}.{hint} "
                f"Callables defined there: {available}."
            )
        target = getattr(target, part)
    if not callable(target):
        raise LoadError(
            f"cannot load reward {spec!r}: {attr!r} in {where} is a "
            f"{type(target).__name__}, not a function"
        )
    return target  # type: ignore[no-any-return]


def _callable_name(func: Callable[..., Any]) -> str:
    module = getattr(func, "__module__", None) or "?"
    name = getattr(func, "__qualname__", None) or type(func).__name__
    return f"{module}:{name}"


def source_identity(func: Callable[..., Any]) -> str:
    """A hash of all the code behind ``func``: its module and the modules it imports (see
    ``code_identity``), so a change to a helper the reward calls also changes its identity."""
    return code_identity(func).digest
