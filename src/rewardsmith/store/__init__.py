"""The result store: rollouts, runs and component results, keyed by content, in one SQLite file.

- ``_model``: ``Store``, the one object readers and writers use.
- ``_deferred``: ``RecordingRun``, a run while it is recorded: the handle the engine's cache
  and the run recorder hold.
- ``_blocks``: a run's records held as blocks until they are needed (the fast path).
- ``_background``: a large run's rollouts recorded by a helper process at low priority.
- ``sqlite_setup``: the one SQLite setup, shared with the judge ledger.
- ``status_codes``: how statuses are kept on disk and travel between processes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

if TYPE_CHECKING:
    from ._deferred import RecordingRun
    from ._model import (
        DEFAULT_STORE_PATH,
        ContentCache,
        Members,
        RunInfo,
        Store,
        StoredCell,
        StoreFileChanged,
        group_result_keys,
    )

__all__ = ["ContentCache", "DEFAULT_STORE_PATH", "Members", "RunInfo", "Store", "StoredCell",
           "StoreFileChanged", "group_result_keys", "RecordingRun"]

__getattr__ = lazy_getattr(__name__, {**dict.fromkeys(__all__, "._model"),
                                       "RecordingRun": "._deferred"}, globals())
