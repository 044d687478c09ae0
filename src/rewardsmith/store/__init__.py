"""The result store: rollouts, runs and component results, keyed by content, in one SQLite file.

- ``_model``: ``Store``, the one object readers and writers use, built in layers: ``_base``
  (the connection, transactions, numbering), ``_pending`` (blocks not yet in the tables),
  ``_results`` (look-ups and records); ``_schema`` holds the tables and the rows read back.
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
    from ._model import Store
    from ._schema import (
        DEFAULT_STORE_PATH,
        SCHEMA_VERSION,
        ContentCache,
        Members,
        RunInfo,
        StoredCell,
        StoreFileChanged,
        group_result_keys,
    )

_HOMES = {
    "Store": "._model",
    "RecordingRun": "._deferred",
    **dict.fromkeys(["ContentCache", "DEFAULT_STORE_PATH", "Members", "RunInfo", "SCHEMA_VERSION",
                     "StoreFileChanged", "StoredCell", "group_result_keys"], "._schema"),
}
__all__ = ["ContentCache", "DEFAULT_STORE_PATH", "Members", "RecordingRun", "RunInfo",
           "SCHEMA_VERSION", "Store", "StoreFileChanged", "StoredCell", "group_result_keys"]

__getattr__ = lazy_getattr(__name__, _HOMES, globals())
