"""Names of the engine's backends and the environment variables that choose one: a module of
its own so that the CLI's help can name them without importing the engine."""

from __future__ import annotations

__all__ = ["BACKENDS", "BACKEND_ENV", "PROGRAM_MODULES", "RAY_ADDRESS_ENV"]

BACKENDS = ("local", "ray")
BACKEND_ENV = "REWARDSMITH_BACKEND"
RAY_ADDRESS_ENV = "REWARDSMITH_RAY_ADDRESS"

# What a worker imports to run the engine's programs, imported once by the fork server instead
# of by every worker that replaces a killed one (about 0.3 s each, more under load).
PROGRAM_MODULES = ("rewardsmith.engine.programs",)
