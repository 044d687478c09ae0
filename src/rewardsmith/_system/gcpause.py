"""``gc_paused``: the cyclic garbage collector held off while a batch allocates many small
objects. Its own module so that readers and writers can use it without importing the worker
pool."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["gc_paused"]

_gc_lock = threading.Lock()
_gc_depth = 0
_gc_was_enabled = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a batch allocates many small objects.

    Scoring a batch builds thousands of dicts and records that form no reference cycles; the
    collector's repeated passes over them cost about a tenth of the time. Collection resumes
    (and catches up) as soon as the outermost pause ends; nested and concurrent pauses nest.
    """
    global _gc_depth, _gc_was_enabled
    with _gc_lock:
        if _gc_depth == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            if _gc_depth == 0 and _gc_was_enabled:
                gc.enable()
