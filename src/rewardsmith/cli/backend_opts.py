"""``--backend`` and ``--ray-address``: where a verb's rewards run.

The choice is handed to every engine the verb builds through the same environment variables
the trainer adapters read (``REWARDSMITH_BACKEND``, ``REWARDSMITH_RAY_ADDRESS``), so one
setting reaches the engine wherever it is built.
"""

from __future__ import annotations

import os

import typer

from ..engine.backends import BACKEND_ENV, BACKENDS, RAY_ADDRESS_ENV

__all__ = ["BACKEND_HELP", "RAY_ADDRESS_HELP", "use_backend"]

BACKEND_HELP = ("Where rewards run: 'local' (worker processes here) or 'ray' (a Ray cluster; "
                "needs rewardsmith[ray]).")
RAY_ADDRESS_HELP = ("With --backend ray: the address of a running Ray cluster (default: start a "
                    "local one for this run and stop it after).")


def use_backend(backend: str | None, ray_address: str | None) -> None:
    """Check the options and pass them on to the engines this process builds."""
    if backend is not None:
        if backend not in BACKENDS:
            raise typer.BadParameter(f"{backend!r} is not one of {', '.join(BACKENDS)}",
                                     param_hint="--backend")
        os.environ[BACKEND_ENV] = backend
    if ray_address is not None:
        if (backend or os.environ.get(BACKEND_ENV)) != "ray":
            raise typer.BadParameter("needs --backend ray", param_hint="--ray-address")
        os.environ[RAY_ADDRESS_ENV] = ray_address
