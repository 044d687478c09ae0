"""Process trees on Linux: find a process's descendants, kill them all, read memory use.

A reward may start processes of its own (``subprocess.run(["sleep", "1000"])``). When its call
is stopped, everything it started must stop too. Worker processes lead their own process
group, so ``killpg`` reaches every descendant that stayed in it; descendants that left the group
(``start_new_session=True``) are found through ``/proc`` before the kill. Elsewhere than Linux
only the process itself is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Collection

__all__ = ["TAG_VARIABLE", "descendants", "kill_tagged", "kill_tagged_any", "kill_tree",
           "resident_bytes"]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _parents() -> dict[int, int]:
    """Every process's parent, read from ``/proc/<pid>/stat``."""
    out: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue  # gone meanwhile
        # The command name may hold spaces and parentheses: the fields start after the last ")".
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            out[int(name)] = int(fields[1])
    return out


def _children(pid: int) -> list[int] | None:
    """``pid``'s children from ``/proc/<pid>/task/*/children``; None when the kernel does not
    offer the file (then every process is read instead)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []  # gone: no children to find
    found: list[int] = []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as handle:
                found.extend(int(child) for child in handle.read().split())
        except FileNotFoundError:
            return None
        except OSError:
            continue
    return found


def descendants(pid: int) -> list[int]:
    """The processes started by ``pid``, their children and so on (not ``pid`` itself)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        children = _children(todo.pop())
        if children is None:
            return _descendants_by_scan(pid)
        found.extend(children)
        todo.extend(children)
    return found


def _descendants_by_scan(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(pid: int, *, group: bool = True) -> None:
    """SIGKILL ``pid``, every descendant of it and (``group``) the process group it leads.

    The descendants are stopped first, so none can start another process between the time
    they are listed and the time they are killed. Pass ``group`` only for a process known to
    have led its own group (as workers do): the group is killed even after its leader is gone,
    since the kernel does not reuse a process id while a group still goes by it.
    """
    tree = descendants(pid)
    for child in tree:
        with contextlib.suppress(OSError):
            os.kill(child, signal.SIGSTOP)
    tree = sorted(set(tree) | set(descendants(pid)))
    if group and pid != os.getpgid(0):  # never the caller's own group
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
    for target in [pid, *tree]:
        with contextlib.suppress(OSError):
            os.kill(target, signal.SIGKILL)


# Set in a worker's environment, so that what its calls start carries it: processes that left
# the worker's tree (a daemon re-parented to init when its worker crashed) are still found.
TAG_VARIABLE = "REWARDSMITH_WORKER_TAG"


def kill_tagged(tag: str) -> int:
    """SIGKILL every process whose environment holds ``TAG_VARIABLE=tag`` (those this user may
    read); how many were found."""
    return kill_tagged_any({tag})


def kill_tagged_any(tags: Collection[str]) -> int:
    """SIGKILL every process whose ``TAG_VARIABLE`` is one of ``tags``, in one pass over the
    processes; how many were found."""
    if not tags:
        return 0
    wanted = {tag.encode() for tag in tags}
    needle = f"{TAG_VARIABLE}=".encode()
    found = 0
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0
    me = os.getpid()
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                variables = handle.read()
        except OSError:
            continue
        at = variables.find(needle)
        while at > 0 and variables[at - 1] != 0:  # the name inside another's value
            at = variables.find(needle, at + 1)
        if at < 0:
            continue
        end = variables.find(b"\0", at)
        value = variables[at + len(needle):end if end >= 0 else len(variables)]
        if value in wanted:
            with contextlib.suppress(OSError):
                os.kill(int(name), signal.SIGKILL)
                found += 1
    return found


def resident_bytes(pid: int) -> int | None:
    """The resident memory of ``pid`` in bytes, or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None
