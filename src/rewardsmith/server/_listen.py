"""Binding the server's sockets before anything starts, with errors that say what to do.

uvicorn binds inside its event loop and, on a busy port, logs the OS error and exits 1 after
the startup messages. Binding first lets ``rewardsmith serve`` refuse with exit status 2 and a
message naming the address, before an engine starts or anything says it serves.
"""

from __future__ import annotations

import errno
import socket
from typing import Any

from ..errors import ConfigError

__all__ = ["listen"]


def listen(host: str, port: int) -> list[socket.socket]:
    """Bound sockets for every address ``host`` names (as asyncio would bind them).

    Raises ``ConfigError`` naming the address and what to do when one cannot be bound.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(f"--host {host}: not an address this machine can listen on "
                          f"({exc.strerror})") from None
    bound: list[socket.socket] = []
    seen: set[tuple[Any, ...]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, *address[:2]) in seen:
                continue
            seen.add((family, *address[:2]))
            if port == 0 and bound:  # one free port for every address, like a fixed one
                address = (address[0], bound[0].getsockname()[1], *address[2:])
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise ConfigError(_bind_failure(host, port, exc)) from None
            sock.set_inheritable(True)
    except BaseException:
        for sock in bound:
            sock.close()
        raise
    return bound


def _bind_failure(host: str, port: int, exc: OSError) -> str:
    where = f"cannot listen on {host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (f"{where}: the port is already in use (another server, or an earlier one still "
                "running); stop it, or choose another --port (--port 0 picks a free one)")
    if exc.errno == errno.EACCES:
        return f"{where}: permission denied (ports below 1024 need privileges); use --port 8000"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"{where}: {host} is not an address of this machine (try 127.0.0.1 or 0.0.0.0)"
    return f"{where}: {exc.strerror or exc}"
