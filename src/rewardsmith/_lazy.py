"""Package attributes imported on first use (PEP 562), so that importing a package costs only
what its caller touches: the CLI's start-up and ``import rewardsmith`` stay fast."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


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
