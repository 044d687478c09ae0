"""How rewardsmith's names are found: package attributes imported on first use (PEP 562), so
that importing a package costs only what its caller touches (the CLI's start-up and ``import
rewardsmith`` stay fast), and modules that moved into packages still importable by their old
path."""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

__all__ = ["MOVED", "install_moved_modules", "lazy_getattr"]


def lazy_getattr(package: str, homes: Mapping[str, str],
                 namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``name`` from ``homes[name]`` (a module relative to
    ``package``) on first use and keeps it in ``namespace`` so later look-ups are plain."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, package), name)
        namespace[name] = value
        return value

    return __getattr__


# Modules that moved into packages, by their old path. A user's ``from rewardsmith.rescore
# import ...`` keeps working: the old name is the new module itself (one module object, so
# classes and module state are shared). Only whole-module moves are listed: a module that was
# split has no single new home.
MOVED: dict[str, str] = {
    f"rewardsmith.{old}": f"rewardsmith.{new}" for old, new in {
        "calling": "rubric.calling",
        "code_identity": "rubric.code_identity",
        "deadline": "_system.deadline",
        "diff": "analysis.diff",
        "endtext": "integrations.endtext",
        "formula": "rubric.formula",
        "gcpause": "_system.gcpause",
        "isolation": "_system.isolation",
        "judge.evaluation": "judge.label_report",
        "loading": "rubric.loading",
        "process_identity": "_system.process_identity",
        "proctree": "workers._proctree",
        "recording": "jobs.recording",
        "rescore": "jobs.rescore",
        "resultlog": "workers._resultlog",
        "reuse_reasons": "rubric.reuse_reasons",
        "score_columns": "engine.columns",
        "scoring": "jobs.score",
        "sqlite_setup": "store.sqlite_setup",
        "status_codes": "store.status_codes",
        "store_background": "store._background",
        "store_pending": "store._blocks",
        "summary": "jobs.summary",
        "tabular": "files.parquet",
        "worker_process": "workers._child",
        "yamlread": "rubric._strict_yaml",
    }.items()
}


# Plain classes with the protocol's methods: subclassing importlib.abc would import
# importlib.resources at every start.
class _MovedLoader:
    def __init__(self, new_name: str) -> None:
        self.new_name = new_name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module, replaced in exec_module

    def exec_module(self, module: ModuleType) -> None:
        # The import system returns what ``sys.modules`` holds under the old name after this.
        sys.modules[module.__name__] = importlib.import_module(self.new_name)


class MovedModules:
    """Finds a moved module under its old path. Placed last on ``sys.meta_path``, so it is
    asked only for names no file answers: other imports cost nothing more."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new_name = MOVED.get(fullname)
        if new_name is None:
            return None
        loader: Any = _MovedLoader(new_name)  # the Loader protocol, without its import cost
        return importlib.machinery.ModuleSpec(fullname, loader)


def install_moved_modules() -> None:
    """Make the old paths of moved modules importable (once per process)."""
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
