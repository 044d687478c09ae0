"""Rubrics: what a reward is made of, and how each part is found and called.

- ``_model``: ``Rubric`` and ``Component`` (weights, params, limits, gates), read from YAML.
- ``formula``: arithmetic over component names, evaluated without ``eval``.
- ``_strict_yaml``: YAML where a key given twice is an error.
- ``loading``: a reward function from a name (built-in, ``module:func``, ``file.py:func``).
- ``calling``: how a reward is called (arguments by name) and its result read into one type.
- ``code_identity`` and ``reuse_reasons``: what code a component runs, and why a stored result
  is or is not reused.
- ``quantize``: totals on a grid that float32 holds exactly.

Names load on first use, so that a worker that only calls rewards does not import YAML or
pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

if TYPE_CHECKING:
    from ._model import (
        DEFAULT_MEMORY_LIMIT_MB,
        DEFAULT_TIMEOUT,
        Component,
        Evaluator,
        Rubric,
        register_component_kind,
    )

__all__ = ["Component", "Evaluator", "Rubric", "register_component_kind",
           "DEFAULT_MEMORY_LIMIT_MB", "DEFAULT_TIMEOUT"]

__getattr__ = lazy_getattr(__name__, dict.fromkeys(__all__, "._model"), globals())
