"""Built-in rewards. Each module registers its rewards on import, and the registry imports a
module the first time one of its rewards is asked for; see ``_registry``."""

from __future__ import annotations

from ._registry import Builtin, all_builtins, builtin, builtin_names, get_builtin

__all__ = ["Builtin", "all_builtins", "builtin", "builtin_names", "get_builtin"]
