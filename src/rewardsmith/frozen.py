"""Read-only containers: what a reward is given of a rollout cannot be changed by it.

Rewards share rollouts: several components read the same ``metadata`` in one process, and the
store keeps a rollout's fields after they are scored. A reward that edited them would change
what the next reward sees, and what a later ``rescore`` reads (it gave 1.0 where scoring from
scratch gave 0.0). So a rollout's ``answer``, ``metadata`` and chat messages are frozen when the
``Rollout`` is made: dicts become ``FrozenDict`` and lists ``FrozenList``, all the way down.
They are still ``dict`` and ``list`` (``isinstance``, JSON, pickling and ``dict(value)`` work as
before); every method that would change them raises ``TypeError`` naming what to do instead.
Tuples keep their type with frozen items; other objects are passed as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

__all__ = ["FrozenDict", "FrozenList", "freeze", "EMPTY"]

_MESSAGE = ("a rollout's fields are read-only: a reward cannot change what other rewards (or a "
            "later rescore) see; copy it first (dict(value), list(value), copy.deepcopy is "
            "read-only too)")


def _refuse(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise TypeError(_MESSAGE)


class FrozenDict(dict[Any, Any]):
    """A ``dict`` that cannot be changed (made by ``freeze``; its values are frozen too)."""

    __slots__ = ()
    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt through the constructor (the default way sets items one by one).
        return (FrozenDict, (dict(self),))

    def copy(self) -> dict[Any, Any]:
        """A plain ``dict`` with the same items (its nested values are still read-only)."""
        return dict(self)

    def __repr__(self) -> str:
        return dict.__repr__(self)


class FrozenList(list[Any]):
    """A ``list`` that cannot be changed (made by ``freeze``; its items are frozen too)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def copy(self) -> list[Any]:
        """A plain ``list`` with the same items (its nested values are still read-only)."""
        return list(self)

    def __repr__(self) -> str:
        return list.__repr__(self)


# Error messages across the code say what a value is with ``type(value).__name__``: a frozen
# dict is a dict there ("the answer is a dict, not text"). Pickling and ``repr(type(x))`` use
# the qualified name, which stays ``FrozenDict``.
FrozenDict.__name__ = "dict"
FrozenList.__name__ = "list"

EMPTY = FrozenDict()
_ATOMS = frozenset((str, int, float, bool, type(None), bytes))


def freeze(value: Any) -> Any:
    """``value`` with every dict and list in it made read-only (a copy; frozen ones are kept)."""
    kind = type(value)
    if kind is dict:  # the common case first: metadata read from JSON, often flat
        if not value:
            return EMPTY
        for item in value.values():
            if type(item) not in _ATOMS:
                return FrozenDict({key: freeze(item) for key, item in value.items()})
        return FrozenDict(value)
    if kind in _ATOMS or kind is FrozenDict or kind is FrozenList:
        return value
    if kind is list or isinstance(value, list):
        return FrozenList(_frozen_items(value))
    if isinstance(value, Mapping):
        return FrozenDict({key: freeze(item) for key, item in value.items()}) if value else EMPTY
    if kind is tuple:
        return tuple(_frozen_items(value))
    return value


def _frozen_items(values: Iterable[Any]) -> list[Any]:
    return [item if type(item) in _ATOMS else freeze(item) for item in values]
