"""The reward server's settings (no web framework needed to build or check them)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rewardsmith.rubric import Rubric

from ..errors import ConfigError, LoadError

__all__ = ["ServerConfig", "require_server_extra"]


@dataclass
class ServerConfig:
    """How ``rewardsmith serve`` runs.

    ``max_batch`` bounds the rollouts of one request (422 past it), ``max_body_bytes`` its size
    (413), ``queue_limit`` the rollouts accepted and not yet scored across all requests (429 with
    ``Retry-After`` past it), ``request_timeout`` the seconds a request may take (504).
    ``token`` turns on bearer-token checks (401). ``workers`` is the engine's worker processes.
    ``graceful_timeout`` is how long shutdown waits for requests in flight (503 with
    ``Retry-After`` to those still running then). ``read_timeout`` is how long a request's
    headers and body may take to arrive (408 and the connection closed past it).
    """

    rubric: Rubric
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    workers: int | None = None
    max_batch: int = 4096
    max_body_bytes: int = 64 * 1024 * 1024
    queue_limit: int = 32768
    request_timeout: float = 120.0
    graceful_timeout: float = 30.0
    read_timeout: float = 30.0
    retry_after: int = 1
    log_level: str = "info"

    def __post_init__(self) -> None:
        for name in ("max_batch", "max_body_bytes", "queue_limit", "retry_after"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name.replace('_', '-')} must be a whole number >= 1, "
                                  f"not {value!r}")
        for name in ("request_timeout", "graceful_timeout", "read_timeout"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ConfigError(f"{name.replace('_', '-')} must be a number of seconds > 0, "
                                  f"not {value!r}")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be 0..65535, not {self.port}")
        if self.workers is not None and self.workers < 0:
            raise ConfigError(f"workers must be >= 0, not {self.workers}")
        if self.token is not None and not self.token.strip():
            raise ConfigError("the bearer token is empty")


def require_server_extra() -> None:
    """Raise a ``LoadError`` naming the install command when the server's packages are missing."""
    missing = []
    for module in ("fastapi", "uvicorn", "prometheus_client"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise LoadError(
            f"the reward server needs {', '.join(missing)}, which is not installed here; "
            "install it with: pip install 'rewardsmith[server]'"
        )
