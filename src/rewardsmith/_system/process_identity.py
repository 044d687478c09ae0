"""Who runs a job, recorded so that another process can later tell whether it still runs.

A pid alone is not enough: pids are reused, and a reboot restarts them. The identity is the
pid, the host name, the kernel's boot id and the process's start time (clock ticks since boot,
from ``/proc``); a process is gone when the host is this one and the boot id differs, the pid
is not running, or the pid now belongs to a process that started at another time.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Literal

__all__ = ["ProcessIdentity", "Liveness"]

Liveness = Literal["alive", "gone", "unknown"]


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip() or None
    except OSError:
        return None  # not Linux: only the pid and the host are compared


def _start_ticks(pid: int) -> tuple[str | None, str | None]:
    """The process's start time and state letter from ``/proc/<pid>/stat``, when there is one."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[-1].split()
    except OSError:
        return None, None
    # After the command name: state is field 3, starttime field 22 (1-based, man proc).
    return (fields[19] if len(fields) > 19 else None), (fields[0] if fields else None)


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class ProcessIdentity:
    pid: int
    host: str
    boot_id: str | None
    start: str | None

    @classmethod
    def current(cls) -> ProcessIdentity:
        pid = os.getpid()
        return cls(pid, socket.gethostname(), _boot_id(), _start_ticks(pid)[0])

    def liveness(self) -> Liveness:
        """``alive``, ``gone``, or ``unknown`` (another host: nothing here can tell)."""
        if self.host != socket.gethostname():
            return "unknown"
        boot = _boot_id()
        if self.boot_id is not None and boot is not None and self.boot_id != boot:
            return "gone"  # the machine restarted since
        if not _pid_running(self.pid):
            return "gone"
        start, state = _start_ticks(self.pid)
        if state in ("Z", "X"):
            return "gone"  # a zombie has finished; its parent has not reaped it yet
        if self.start is not None and start is not None and start != self.start:
            return "gone"  # the pid was reused by another process
        return "alive"
