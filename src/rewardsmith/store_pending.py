"""A run's records held as blocks until they are needed: the store's fast path for recording.

Recording each rollout and result as its own indexed row costs a first ``score`` about as
much as the scoring itself. A run that the store ``defers`` writes instead one row per chunk of
rollouts and one row per batch of results (arrays and JSON, no index work per rollout), and
the store spreads them into its indexed tables (``settles`` them) the first time something
reads them: the next run that looks results up, a rescore, a diff. Settling changes no result;
a block is settled once, in one transaction, and deleted in the same transaction.

Results packed here keep everything a stored cell holds: a float array of values (NaN where the
cell is not a plain ok float) and, for the other cells, their value, status code, error and
metrics in a small JSON object by offset; call times, when recorded, as a second array.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Sequence
from typing import Any

from .status_codes import STATUS_CODES, code_of
from .types import TIME_METRIC, ComponentResult, Status

__all__ = ["PENDING_SCHEMA", "ROLLOUT_CHUNK", "PackedResults", "cells_of_block", "pack_results",
           "split_times", "unpack_results"]

ROLLOUT_CHUNK = 8192  # rollouts per pending row

PENDING_SCHEMA = """
CREATE TABLE IF NOT EXISTS store_pending_rollouts (
    run TEXT NOT NULL, start INTEGER NOT NULL, ids TEXT NOT NULL, groups TEXT NOT NULL,
    keys TEXT NOT NULL, contents TEXT NOT NULL, PRIMARY KEY (run, start)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS store_pending_results (
    run TEXT NOT NULL, component INTEGER NOT NULL, seq INTEGER NOT NULL, keys TEXT NOT NULL,
    vals BLOB NOT NULL, extra TEXT, seconds BLOB, recorded REAL NOT NULL,
    PRIMARY KEY (run, component, seq)
) WITHOUT ROWID;
"""

_REUSABLE = (Status.OK, Status.MASKED)
_CODE_OF = {status: code_of(status) for status in STATUS_CODES}

# keys (JSON list), values (float64 bytes), extras (JSON or None), seconds (float64 bytes or None)
PackedResults = tuple[str, bytes, str | None, bytes | None]
# value, status code, error, metrics (JSON text or None), seconds (or None)
ResultRow = tuple[str, float | None, int, str | None, str | None, float | None]


def split_times(cells: Sequence[Any], seconds: Sequence[float] | None
                ) -> tuple[Sequence[Any], Sequence[float] | None]:
    """Cells with their call times (the ``@seconds`` metric) moved out into ``seconds``
    (NaN where a cell has none); unchanged when no cell carries one."""
    if seconds is not None or not any(
            type(c) is ComponentResult and TIME_METRIC in c.metrics for c in cells):
        return cells, seconds
    times: list[float] = []
    plain: list[Any] = []
    for cell in cells:
        if type(cell) is ComponentResult and TIME_METRIC in cell.metrics:
            metrics = {k: v for k, v in cell.metrics.items() if k != TIME_METRIC}
            times.append(float(cell.metrics[TIME_METRIC]))
            if cell.status is Status.OK and not metrics and type(cell.value) is float:
                plain.append(cell.value)
            else:
                plain.append(ComponentResult(cell.value, cell.status, cell.error, metrics))
        else:
            times.append(math.nan)
            plain.append(cell)
    return plain, times


def pack_results(keys: Sequence[str], cells: Sequence[Any],
                 seconds: Sequence[float] | None = None) -> PackedResults | None:
    """The reusable cells (plain floats, ok and masked results) of one batch as one block;
    None when there is none."""
    if seconds is None and cells and set(map(type, cells)) == {float}:
        values = array("d", cells)  # the usual batch: plain floats, packed at C speed
        if not any(map(math.isnan, values)):
            return json.dumps(list(keys)), values.tobytes(), None, None
    kept_keys: list[str] = []
    values = array("d")
    kept_seconds = array("d")
    extras: dict[str, list[Any]] = {}
    for index, cell in enumerate(cells):
        if type(cell) is float:
            if math.isnan(cell):  # NaN marks "see extras": keep a real NaN there
                extras[str(len(kept_keys))] = [None, 0, None, None, True]
        elif isinstance(cell, ComponentResult) and cell.status in _REUSABLE:
            extras[str(len(kept_keys))] = [cell.value, _CODE_OF[cell.status], cell.error,
                                           cell.metrics or None, False]
            cell = math.nan
        else:
            continue
        kept_keys.append(keys[index])
        values.append(cell)
        if seconds is not None:
            kept_seconds.append(seconds[index])
    if not kept_keys:
        return None
    return (json.dumps(kept_keys), values.tobytes(),
            json.dumps(extras) if extras else None,
            kept_seconds.tobytes() if seconds is not None else None)


def unpack_results(keys_text: str, values_blob: bytes, extra_text: str | None,
                   seconds_blob: bytes | None) -> list[ResultRow]:
    """A block back as rows: key, value, status code, error, metrics JSON, seconds."""
    keys: list[str] = json.loads(keys_text)
    values = array("d")
    values.frombytes(values_blob)
    seconds: array[float] | None = None
    if seconds_blob is not None:
        seconds = array("d")
        seconds.frombytes(seconds_blob)
    extras: dict[str, list[Any]] = json.loads(extra_text) if extra_text else {}
    rows: list[ResultRow] = []
    for index, key in enumerate(keys):
        took = seconds[index] if seconds is not None else None
        extra = extras.get(str(index))
        if extra is None:
            rows.append((key, values[index], 0, None, None, took))
            continue
        value, code, error, metrics, is_nan = extra
        if is_nan:
            rows.append((key, math.nan, 0, None, None, took))
        else:
            rows.append((key, value, int(code), error,
                         json.dumps(metrics) if metrics else None, took))
    return rows


def cells_of_block(keys_text: str, values_blob: bytes,
                   extra_text: str | None) -> dict[str, float | ComponentResult]:
    """A block as the store's cells by key (a bare float for a plain ok result), built at C
    speed when the block holds plain floats only; the first of a repeated key wins."""
    keys: list[str] = json.loads(keys_text)
    values = array("d")
    values.frombytes(values_blob)
    if not extra_text and len(set(keys)) == len(keys):
        return dict(zip(keys, values.tolist()))
    cells: dict[str, float | ComponentResult] = {}
    for key, value, code, error, metrics, _ in unpack_results(keys_text, values_blob,
                                                              extra_text, None):
        if key in cells:
            continue
        if code == 0 and error is None and metrics is None and value is not None:
            cells[key] = float(value)
        else:
            cells[key] = ComponentResult(None if value is None else float(value),
                                         STATUS_CODES[code], error,
                                         json.loads(metrics) if metrics else {})
    return cells
