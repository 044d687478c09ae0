"""A run's records held as blocks until they are needed: the store's fast path for recording.

Recording each rollout and result as its own indexed row costs a first ``score`` about as
much as the scoring itself. A run that the store ``defers`` writes instead one row per chunk of
rollouts and one row per batch of results (arrays and JSON, no index work per rollout), and
the store spreads them into its indexed tables (``settles`` them) the first time something
reads them: the next run that looks results up, a rescore, a diff. Settling changes no result;
a block is settled once, in one transaction, and deleted in the same transaction.

Results packed here keep everything a stored cell holds: a float array of values (NaN where the
cell is not a plain ok float) and, for the other cells, their value, status code, error and
metrics in a small JSON object by offset; call times, when recorded, as a second array. A block
names its rollouts by content key (a JSON list), or, for results of the block's own run, by
their positions in that run (``@start:count`` or ``@[p, ...]``), so that a run recorded in the
background needs no content key while it scores: readers find the keys in the run's rollouts.

A block of rollouts holds either their content JSON texts and content keys, or (written beside
the scoring, since schema 6) only their fields, a column each, with no keys: the first reader
that needs the keys makes them (and keeps them in the block when it can write the file).
"""

from __future__ import annotations

import functools
import json
import math
import re
import sqlite3
import zlib
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, cast

from rewardsmith.store.status_codes import (
    STATUS_CODES,
    code_of,
)
from rewardsmith.types import (
    TIME_METRIC,
    ComponentResult,
    Status,
    content_json_of,
    key_of_content,
    stable_json,
)

__all__ = ["NO_KEYS", "PENDING_SCHEMA", "ROLLOUT_CHUNK", "ROLLOUT_FIELDS", "PackedResults",
           "block_contents", "block_keys", "block_positions", "cells_of_block",
           "columns_of_block", "field_block_row", "keys_of_columns", "pack_results",
           "rollout_block_rows", "rollout_columns", "split_times", "storable_json",
           "unpack_results", "write_rollout_blocks", "write_rollout_rows"]

ROLLOUT_CHUNK = 8192  # rollouts per pending row
# A rollout's fields as a pending block keeps them (the order of its content JSON).
ROLLOUT_FIELDS = ("prompt", "completion", "answer", "metadata", "truncated")
NO_KEYS = ""  # the keys of a block written by its fields, until someone makes them
_COLUMNS = ("id", "group", *ROLLOUT_FIELDS)

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
    if seconds is not None or set(map(type, cells)) <= {float} or not any(
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


def _keys_text(keys: Sequence[str] | Sequence[int]) -> str:
    """A block's rollouts: content keys as a JSON list, positions as ``@start:count`` when
    consecutive, else ``@`` and a JSON list."""
    if type(keys) is range and keys.step == 1:
        return f"@{keys.start}:{len(keys)}"
    if not keys or type(keys[0]) is not int:
        return json.dumps(list(keys))
    first = keys[0]
    if list(keys) == list(range(first, first + len(keys))):
        return f"@{first}:{len(keys)}"
    return "@" + json.dumps(list(keys), separators=(",", ":"))


def block_positions(keys_text: str) -> list[int] | None:
    """The run positions a block names, or None when it names content keys."""
    if not keys_text.startswith("@"):
        return None
    if keys_text.startswith("@["):
        return [int(p) for p in json.loads(keys_text[1:])]
    start, count = keys_text[1:].split(":")
    return list(range(int(start), int(start) + int(count)))


def block_keys(keys_text: str, run_keys: Sequence[str] | None) -> list[str] | None:
    """A block's content keys: as written, or looked up by position in ``run_keys`` (the
    keys of the block's run, in order); None when its run's rollouts are not recorded."""
    positions = block_positions(keys_text)
    if positions is None:
        return cast("list[str]", json.loads(keys_text))
    if run_keys is None or (positions and positions[-1] >= len(run_keys)):
        return None
    return [run_keys[p] for p in positions]


def pack_results(keys: Sequence[str] | Sequence[int], cells: Sequence[Any],
                 seconds: Sequence[float] | None = None) -> PackedResults | None:
    """The reusable cells (plain floats, ok and masked results) of one batch as one block,
    its rollouts named by ``keys`` (content keys, or positions in the block's run); None when
    there is none."""
    if seconds is None and cells and set(map(type, cells)) == {float}:
        values = array("d", cells)  # the usual batch: plain floats, packed at C speed
        if not any(map(math.isnan, values)):
            return _keys_text(keys), values.tobytes(), None, None
    kept_keys: list[Any] = []
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
    return (_keys_text(kept_keys), values.tobytes(),
            json.dumps(extras) if extras else None,
            kept_seconds.tobytes() if seconds is not None else None)


def unpack_results(keys: list[str], values_blob: bytes, extra_text: str | None,
                   seconds_blob: bytes | None) -> list[ResultRow]:
    """A block back as rows (its keys from ``block_keys``): key, value, status code, error,
    metrics JSON, seconds."""
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


def cells_of_block(keys: list[str], values_blob: bytes,
                   extra_text: str | None) -> dict[str, float | ComponentResult]:
    """A block as the store's cells by key (its keys from ``block_keys``; a bare float for a
    plain ok result), built at C speed when the block holds plain floats only; the first of a
    repeated key wins."""
    values = array("d")
    values.frombytes(values_blob)
    if not extra_text and len(set(keys)) == len(keys):
        return dict(zip(keys, values.tolist()))
    cells: dict[str, float | ComponentResult] = {}
    for key, value, code, error, metrics, _ in unpack_results(keys, values_blob, extra_text,
                                                              None):
        if key in cells:
            continue
        if code == 0 and error is None and metrics is None and value is not None:
            cells[key] = float(value)
        else:
            cells[key] = ComponentResult(None if value is None else float(value),
                                         STATUS_CODES[code], error,
                                         json.loads(metrics) if metrics else {})
    return cells


_SURROGATE = re.compile("[\ud800-\udfff]")


def storable_json(text: str) -> str:
    """JSON text that SQLite can keep (valid UTF-8): a lone surrogate, which JSON input may
    hold (``"\\ud800"``) but UTF-8 cannot, is written as its JSON escape, which reads back
    as the same character."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
    return text


def rollout_block_rows(run_id: str, ids: Sequence[str], groups: Sequence[str],
                       keys: Sequence[str], contents: Sequence[str]) -> list[list[Any]]:
    """A run's rollouts as the rows of its pending blocks of ``ROLLOUT_CHUNK``: ids, groups
    and keys as JSON lists, contents as one JSON array of content JSON texts, compressed
    (zlib at level 1: about an eighth of the bytes on this project's benchmark texts, to
    write and to copy from the write-ahead log into the file, for 0.17 s per 100,000)."""
    rows: list[list[Any]] = []
    for start in range(0, len(ids), ROLLOUT_CHUNK):
        end = start + ROLLOUT_CHUNK
        rows.append(_keyed_block_row(run_id, start, ids[start:end], groups[start:end],
                                     keys[start:end], contents[start:end]))
    return rows


def _keyed_block_row(run_id: str, start: int, ids: Sequence[str], groups: Sequence[str],
                     keys: Sequence[str], contents: Sequence[str]) -> list[Any]:
    return [run_id, start, json.dumps(list(ids)), json.dumps(list(groups)),
            json.dumps(list(keys)), _compressed("[" + ",".join(contents) + "]")]


def rollout_columns(rollouts: Sequence[Any]) -> list[list[Any]]:
    """The rollouts' ids, groups and each of ``ROLLOUT_FIELDS``, a list each."""
    return [list(map(attrgetter(name), rollouts)) for name in _COLUMNS]


def field_block_row(run_id: str, start: int, columns: Sequence[Sequence[Any]]) -> list[Any]:
    """One pending block of rollouts from position ``start``, from their ``rollout_columns``,
    kept as their fields (a JSON column per name of ``ROLLOUT_FIELDS``, in one object,
    compressed) with no content keys yet: a fraction of the work of ``rollout_block_rows``
    (no content JSON per rollout, no hashing), for a recording that runs beside the scoring.
    Whoever first needs the keys makes them from the fields (``columns_of_block``,
    ``keys_of_columns``)."""
    ids, groups, *fields = columns
    text = stable_json(dict(zip(ROLLOUT_FIELDS, fields, strict=True)))
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        # A surrogate code point, which JSON can only escape, and two escaped surrogates
        # read back as one character: keyed now, from the fields as they are.
        contents, keys = keys_of_columns(fields)
        return _keyed_block_row(run_id, start, ids, groups, keys, contents)
    return [run_id, start, json.dumps(list(ids)), json.dumps(list(groups)), NO_KEYS,
            _zstd().compress(data)]


def columns_of_block(value: str | bytes) -> list[Sequence[Any]]:
    """A pending block's rollouts as one column per name of ``ROLLOUT_FIELDS``, whichever
    form the block was written in."""
    text = block_contents(value)
    if not text.startswith("{"):
        rows = json.loads(text)
        return list(zip(*rows, strict=True)) if rows else [[] for _ in ROLLOUT_FIELDS]
    return _columns_of_fields(text)


def _columns_of_fields(text: str) -> list[Sequence[Any]]:
    fields = json.loads(text)
    return [fields[name] for name in ROLLOUT_FIELDS]


def keys_of_columns(columns: Sequence[Sequence[Any]], keys: str | None = None
                    ) -> tuple[list[str], list[str]]:
    """Each rollout's content JSON and content key, from ``columns_of_block``'s columns (the
    same text and key as the rollout itself makes: JSON read back encodes to the text it was
    read from); the keys read from ``keys`` (a block's JSON list) when it has them."""
    texts = list(map(content_json_of, *columns))
    if keys is not None:
        return texts, cast("list[str]", json.loads(keys))
    return texts, list(map(key_of_content, texts))


def write_rollout_rows(db: sqlite3.Connection, rows: Sequence[Sequence[Any]]) -> None:
    """Insert ``rollout_block_rows`` (in the caller's transaction)."""
    # OR IGNORE: a helper that was thought to have failed may have written the same rows.
    db.executemany("INSERT OR IGNORE INTO store_pending_rollouts VALUES (?, ?, ?, ?, ?, ?)",
                   rows)


def write_rollout_blocks(db: sqlite3.Connection, run_id: str, ids: Sequence[str],
                         groups: Sequence[str], keys: Sequence[str],
                         contents: Sequence[str]) -> None:
    """A run's rollouts as pending blocks (``rollout_block_rows``), in the caller's
    transaction."""
    write_rollout_rows(db, rollout_block_rows(run_id, ids, groups, keys, contents))


def block_contents(value: str | bytes) -> str:
    """A pending block's contents as JSON text: compressed with Zstandard since schema 6,
    with zlib in schema 5, plain text in blocks an older version wrote."""
    if isinstance(value, bytes):
        if value.startswith(_ZSTD_MAGIC):
            return _zstd().decompress(value).decode("utf-8")
        return zlib.decompress(value).decode("utf-8")
    return value


def _compressed(text: str) -> bytes:
    """UTF-8, compressed with Zstandard at level 1: 3.6 MB for this project's benchmark's
    40 MB of rollouts, in a third of the time zlib's fastest level takes (for 4.7 MB)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: kept as its JSON escape
        data = storable_json(text).encode("utf-8")
    return _zstd().compress(data)


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # the start of every Zstandard frame


@dataclass(frozen=True)
class _Codec:
    compress: Callable[[bytes], bytes]
    decompress: Callable[[bytes], bytes]


@functools.cache
def _zstd() -> _Codec:
    """Zstandard from the standard library (Python 3.14 and later) or the zstandard package
    (the same format), imported when a block is first written or read. A fresh compressor
    per call: the package's are not to be shared between threads."""
    try:
        from compression import zstd  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        import zstandard

        return _Codec(lambda data: zstandard.ZstdCompressor(level=1).compress(data),
                      lambda data: zstandard.ZstdDecompressor().decompress(data))
    return _Codec(functools.partial(zstd.compress, level=1), zstd.decompress)
