"""The runner's scratch space: wiped before every test, so no test sees what another wrote.

Part of the in-sandbox runner (see ``_harness.py``). Inside the sandbox the writable places
are ``/tmp`` and ``/dev/shm`` (tmpfs, size-capped); outside it (``sandbox: none``) the host
starts the runner in a fresh private folder, and that folder is the scratch space.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable

_IS_INIT = os.getpid() == 1
_WORK = "/tmp/rs-work" if _IS_INIT else os.getcwd()
_SCRATCH = ("/tmp", "/dev/shm")


def _memory_file(name: str, data: bytes) -> int:
    """A file only this process's descriptors reach: no name in any folder the program sees."""
    try:
        fd = os.memfd_create(name, 0)
    except (AttributeError, OSError):
        fd = os.open(_WORK, os.O_TMPFILE | os.O_RDWR, 0o600)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class _Keep:
    """Folders mounted into the scratch space (a Python environment): never wiped."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = {os.path.normpath(p) for p in paths}
        self.ancestors: set[str] = set()
        for path in self.paths:
            parent = os.path.dirname(path)
            while parent not in ("/", ""):
                self.ancestors.add(parent)
                parent = os.path.dirname(parent)


class _Fresh:
    """Empties the scratch folders (whatever their modes, however deep) and remakes the
    work folder; a program that renamed, emptied or locked them leaves nothing behind."""

    def __init__(self, roots: Iterable[str], work: str, keep: _Keep) -> None:
        self.roots = [(r, stat.S_IMODE(os.stat(r).st_mode)) for r in roots if os.path.isdir(r)]
        self.work = work
        self.keep = keep

    def reset(self) -> None:
        for root, mode in self.roots:
            self._clear(root)
            os.chmod(root, mode)
        os.makedirs(self.work, mode=0o700, exist_ok=True)

    def _clear(self, root: str) -> None:
        stack, folders = [root], []
        while stack:
            folder = stack.pop()
            try:
                os.chmod(folder, 0o700)
            except OSError:
                pass  # a mount point's parent made by bwrap: nothing of the program's
            with os.scandir(folder) as found:
                entries = list(found)
            for entry in entries:
                path = entry.path
                if path in self.keep.paths:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(path)
                    if path not in self.keep.ancestors:
                        folders.append(path)
                else:
                    os.unlink(path)
        for folder in reversed(folders):  # children were found after their parents
            os.rmdir(folder)


# Where no memory cgroup counts them, memfds (files in memory that no tmpfs cap bounds) are
# refused: a seccomp filter makes memfd_create fail with ENOSYS in the test's processes.
_AUDIT_ARCH = {"x86_64": (0xC000003E, (319, 0x40000000 + 319)), "aarch64": (0xC00000B7, (279,))}


def _deny_memfd() -> None:
    import ctypes
    import struct

    arch = _AUDIT_ARCH.get(os.uname().machine)
    if arch is None:
        return
    audit, numbers = arch
    ld, jeq, ret = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET
    errno_enosys, allow = 0x00050000 | 38, 0x7FFF0000
    # Another ABI's system calls (int 0x80 from a 64-bit program) are all refused.
    program = [(ld, 0, 0, 4), (jeq, 1, 0, audit), (ret, 0, 0, errno_enosys), (ld, 0, 0, 0)]
    for index, number in enumerate(numbers):
        left = len(numbers) - index - 1  # comparisons after this one
        program.append((jeq, left + 1, 0, number))
    program += [(ret, 0, 0, allow), (ret, 0, 0, errno_enosys)]
    raw = b"".join(struct.pack("HBBI", *op) for op in program)
    buffer = ctypes.create_string_buffer(raw)
    fprog = struct.pack("HL", len(program), ctypes.addressof(buffer))
    fprog_buffer = ctypes.create_string_buffer(fprog)
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong]
    prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    prctl(22, 2, ctypes.addressof(fprog_buffer), 0, 0)  # PR_SET_SECCOMP, FILTER (a kernel
    # without seccomp refuses it: then only RLIMIT_FSIZE and RLIMIT_NOFILE bound memfds)
