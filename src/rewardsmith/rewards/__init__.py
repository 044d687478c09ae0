"""Built-in rewards. Each module registers its rewards on import; see ``_registry``."""

from __future__ import annotations

from . import answers as _answers  # noqa: F401
from . import code as _code  # noqa: F401
from . import formats as _formats  # noqa: F401
from . import instructions as _instructions  # noqa: F401
from . import mathanswer as _mathanswer  # noqa: F401
from . import structured as _structured  # noqa: F401
from ._registry import Builtin, all_builtins, builtin, builtin_names, get_builtin

__all__ = ["Builtin", "all_builtins", "builtin", "builtin_names", "get_builtin"]
