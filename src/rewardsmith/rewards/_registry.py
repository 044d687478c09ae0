"""The registry of built-in rewards: one name, one plain function, one result type.

Every built-in returns a float (or None to abstain) and is registered with ``@builtin``. A
reward registered with ``boxable=True`` also gets a ``boxed_<name>`` twin that grades only the
content of the completion's last ``\\boxed{...}`` (0.0 when there is none).
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .extract import last_boxed

__all__ = ["Builtin", "builtin", "get_builtin", "builtin_names", "all_builtins"]

RewardFunc = Callable[..., Any]
ParamsCheck = Callable[[Mapping[str, Any]], None]


@dataclass(frozen=True)
class Builtin:
    name: str
    func: RewardFunc
    description: str
    kind: str  # "verifier" | "rule"
    boxable: bool
    default_timeout: float | None = None
    # Runs in time linear in its input and cannot hang: safe to run without a worker process.
    bounded: bool = False
    # Checks params when a rubric is loaded (a regex that does not compile, say): gets every
    # param by name, defaults filled in, and raises ValueError saying what is wrong.
    check: ParamsCheck | None = None

    def check_params(self, params: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` when ``params`` cannot work, before anything is scored."""
        if self.check is None:
            return
        values = {name: p.default for name, p in inspect.signature(self.func).parameters.items()
                  if p.default is not inspect.Parameter.empty}
        values.update(params)
        self.check(values)


_REGISTRY: dict[str, Builtin] = {}


def builtin(
    name: str,
    *,
    kind: str = "verifier",
    boxable: bool = False,
    default_timeout: float | None = None,
    bounded: bool = False,
    check: ParamsCheck | None = None,
) -> Callable[[RewardFunc], RewardFunc]:
    """Register ``func`` as the built-in reward ``name``; its docstring's first line describes it.

    ``check(params)`` validates params at load time (see ``Builtin.check``)."""

    def register(func: RewardFunc) -> RewardFunc:
        if name in _REGISTRY:
            raise RuntimeError(f"built-in reward {name!r} registered twice")
        doc = inspect.getdoc(func) or ""
        description = doc.strip().splitlines()[0] if doc.strip() else name
        _REGISTRY[name] = Builtin(name, func, description, kind, boxable, default_timeout,
                                  bounded, check)
        return func

    return register


def _boxed(base: Builtin) -> Builtin:
    inner = base.func
    params = inspect.signature(inner).parameters

    @functools.wraps(inner)
    def boxed(completion: str, *args: Any, **kwargs: Any) -> Any:
        box = last_boxed(completion)
        if box is None:
            return 0.0
        return inner(box, *args, **kwargs)

    # Keep the inner signature (minus nothing) so params are validated against it.
    boxed.__signature__ = inspect.Signature(list(params.values()))  # type: ignore[attr-defined]
    boxed.__name__ = f"boxed_{base.name}"
    boxed.__qualname__ = boxed.__name__
    # The source identity of the twin is the inner function's plus this wrapper's.
    boxed.__rewardsmith_source_parts__ = (inner, last_boxed)  # type: ignore[attr-defined]
    return Builtin(
        f"boxed_{base.name}",
        boxed,
        f"{base.description} Only the last \\boxed{{...}} is graded; no box gives 0.",
        base.kind,
        False,
        base.default_timeout,
        base.bounded,
        base.check,
    )


# The module that registers each built-in. A rubric imports only the modules it uses, so that
# a rule-only run does not pay for sympy, the sandbox or language detection at start-up. A test
# checks this table against what the modules register.
HOMES: dict[str, str] = {
    "gsm8k": "answers", "number": "answers", "exact": "answers", "normalized": "answers",
    "f1": "answers", "choice": "answers",
    "marker": "formats", "regex": "formats", "think_format": "formats", "length": "formats",
    "math": "mathanswer", "boxed_math": "mathanswer",
    "ifeval": "instructions",
    "code": "code",
    "tool_call": "structured", "json_match": "structured", "json_schema": "structured",
    "tool_calls": "agents", "turn_budget": "agents", "workspace_files": "agents",
    "repo_tests": "agents.repo_tests",
    "verifier_script": "agents.verifier_script",
}
_PACKAGE = __package__ or "rewardsmith.rewards"


def _ensure_loaded() -> None:
    for module in sorted(set(HOMES.values())):
        importlib.import_module(f"{_PACKAGE}.{module}")


def _load_home(name: str) -> None:
    home = HOMES.get(name) or HOMES.get(name.removeprefix("boxed_"))
    if home is None:
        _ensure_loaded()  # unknown here: look everywhere before saying it does not exist
    else:
        importlib.import_module(f"{_PACKAGE}.{home}")


def get_builtin(name: str) -> Builtin | None:
    """The built-in called ``name`` (including ``boxed_`` twins), or None."""
    if name not in _REGISTRY:
        _load_home(name)
    found = _REGISTRY.get(name)
    if found is not None:
        return found
    if name.startswith("boxed_"):
        base = _REGISTRY.get(name[len("boxed_") :])
        if base is not None and base.boxable:
            twin = _boxed(base)
            _REGISTRY[name] = twin
            return twin
    return None


def builtin_names() -> list[str]:
    """Every built-in name, ``boxed_`` twins included, sorted."""
    return [b.name for b in all_builtins()]


def all_builtins() -> list[Builtin]:
    """Every built-in, ``boxed_`` twins included, sorted by name."""
    _ensure_loaded()
    for base in list(_REGISTRY.values()):
        if base.boxable:
            get_builtin(f"boxed_{base.name}")
    return sorted(_REGISTRY.values(), key=lambda b: b.name)
