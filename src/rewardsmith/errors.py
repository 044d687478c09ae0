"""Exceptions raised by rewardsmith.

Every error the library raises on purpose derives from ``RewardsmithError``::

    RewardsmithError
    ├── ConfigError (also ValueError)      bad rubric, bad params, bad option
    │   └── RubricError                    a rubric file or object that cannot be built
    ├── LoadError (also ImportError)       a reward that cannot be imported or resolved
    ├── InputError (also ValueError)       a rollout or scored line that cannot be read
    ├── RewardValueError (also ValueError) a reward returned something that is not a score
    ├── AdvantageError (also ValueError)   NaN/inf reward, or rewards that cannot be normalized
    ├── JudgeError                         a judge endpoint that fails before the run starts
    │   └── BudgetExhausted                the run's judge budget is spent
    ├── StoreError                         the result store cannot be opened or is corrupt
    └── SystematicFailure                  a reward failed the same way on every call so far

Failures *inside* a reward call are not raised to the caller: they become a rollout's
``error`` or ``timeout`` status (a failure is data, not a crash).
"""

from __future__ import annotations

__all__ = [
    "AdvantageError",
    "BudgetExhausted",
    "ConfigError",
    "InputError",
    "JudgeError",
    "LoadError",
    "RewardValueError",
    "RewardsmithError",
    "RubricError",
    "StoreError",
    "SystematicFailure",
]


class RewardsmithError(Exception):
    """Root of every error rewardsmith raises on purpose."""


class ConfigError(RewardsmithError, ValueError):
    """A configuration value (option, param, rubric key) is wrong; the message says which."""


class RubricError(ConfigError):
    """A rubric cannot be built; the message names the file, the key and what was expected."""


class LoadError(RewardsmithError, ImportError):
    """A reward function cannot be loaded; the message says what is missing and how to fix it."""


class InputError(RewardsmithError, ValueError):
    """An input record cannot be read; ``line`` is its 1-based line number when known."""

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None):
        where = ""
        if source is not None and line is not None:
            where = f"{source}:{line}: "
        elif line is not None:
            where = f"line {line}: "
        elif source is not None:
            where = f"{source}: "
        super().__init__(where + message)
        self.source = source
        self.line = line
        self.reason = message


class RewardValueError(RewardsmithError, ValueError):
    """A reward function returned a value that cannot be read as a score."""


class AdvantageError(RewardsmithError, ValueError):
    """Rewards that cannot be turned into advantages (NaN or inf, naming the rollout)."""


class JudgeError(RewardsmithError):
    """A judge endpoint or configuration that cannot work, found before scoring starts."""


class BudgetExhausted(JudgeError):
    """The judge budget for this run (calls, tokens or cost) is spent."""


class StoreError(RewardsmithError):
    """The result store cannot be opened, or holds data this version cannot read."""


class SystematicFailure(RewardsmithError):
    """A reward failed the same way on every call since the start: it cannot work as set up.

    Raised instead of returning a batch of failures that a trainer would read as zeros.
    """
