"""A memory cgroup per job, where this machine lets us make one.

Inside one, every byte a job holds counts against its limit: its processes, the files it
writes to its tmpfs folders, memfds, pipes, kernel memory. We make one as a child of this
process's own cgroup (cgroup v1's memory hierarchy, or a v2 cgroup whose memory controller is
delegated to us) and move the sandbox into it before it starts: its first process is a shell
that writes its own pid to the cgroup and then becomes ``bwrap``. Where none can be made
(no permission, no memory controller), the sandbox falls back to caps on every tmpfs and
per-process limits; ``memory_cgroups_available()`` says which applies.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from functools import lru_cache

__all__ = ["MemoryCgroup", "memory_cgroups_available"]

_COUNTER = itertools.count()
_LEFTOVERS: list[str] = []
_LOCK = threading.Lock()


def _own_cgroup_dirs() -> list[tuple[str, str]]:
    """(folder of this process's memory cgroup, "v1" or "v2"), most specific first."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(",") and os.path.isdir("/sys/fs/cgroup/memory"):
            found.append((os.path.join("/sys/fs/cgroup/memory", path.lstrip("/")), "v1"))
        elif controllers == "" and os.path.isfile("/sys/fs/cgroup/cgroup.controllers"):
            found.append((os.path.join("/sys/fs/cgroup", path.lstrip("/")), "v2"))
    return found


def _write(path: str, value: str) -> None:
    with open(path, "w", encoding="ascii") as handle:
        handle.write(value)


class MemoryCgroup:
    """One job's memory cgroup; ``procs`` is the file a process writes its pid to, to join."""

    def __init__(self, folder: str, version: str) -> None:
        self.folder = folder
        self.version = version
        self.procs = os.path.join(folder, "cgroup.procs")

    @classmethod
    def create(cls, limit_bytes: int, owner: int | None = None) -> MemoryCgroup | None:
        """A fresh cgroup holding at most ``limit_bytes``, or None where none can be made.

        ``owner`` (a uid) may then move its own processes into it."""
        _remove_leftovers()
        for parent, version in _own_cgroup_dirs():
            if version == "v2":
                try:
                    with open(os.path.join(parent, "cgroup.subtree_control"),
                              encoding="ascii") as handle:
                        if "memory" not in handle.read().split():
                            continue
                except OSError:
                    continue
            folder = os.path.join(parent, f"rewardsmith-{os.getpid()}-{next(_COUNTER)}")
            try:
                os.mkdir(folder)
            except OSError:
                continue
            group = cls(folder, version)
            try:
                group.set_limit(limit_bytes)
                if owner is not None:
                    os.chown(group.procs, owner, -1)
            except OSError:
                group.remove()
                continue
            return group
        return None

    def set_limit(self, limit_bytes: int) -> None:
        """Set (raise, or lower after a compile) what the cgroup may hold, swap included."""
        if self.version == "v1":
            # memory+swap may never be below memory: raised first, lowered last.
            swap = os.path.join(self.folder, "memory.memsw.limit_in_bytes")
            for path in (swap, os.path.join(self.folder, "memory.limit_in_bytes"), swap):
                try:
                    _write(path, str(limit_bytes))
                except OSError:
                    if path != swap:
                        raise
        else:
            _write(os.path.join(self.folder, "memory.max"), str(limit_bytes))
            try:
                _write(os.path.join(self.folder, "memory.swap.max"), "0")
            except OSError:
                pass

    def remove(self) -> None:
        """Remove the cgroup once its processes are gone (retried later if they linger)."""
        for _ in range(50):
            try:
                os.rmdir(self.folder)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.005)
        with _LOCK:
            _LEFTOVERS.append(self.folder)


def _remove_leftovers() -> None:
    with _LOCK:
        pending = list(_LEFTOVERS)
        _LEFTOVERS.clear()
    for folder in pending:
        try:
            os.rmdir(folder)
        except FileNotFoundError:
            pass
        except OSError:
            with _LOCK:
                _LEFTOVERS.append(folder)


@lru_cache(maxsize=1)
def memory_cgroups_available() -> bool:
    """Whether this process can make memory cgroups (tried once, then remembered)."""
    if os.environ.get("REWARDSMITH_NO_CGROUP") == "1":
        return False
    group = MemoryCgroup.create(64 << 20)
    if group is None:
        return False
    group.remove()
    return True
