"""Rollouts and scores as Parquet (trainers keep rollouts there), or JSONL, chosen by extension.

Parquet needs pyarrow, an optional extra (``pip install 'rewardsmith[parquet]'``); it is
imported only when a Parquet file is read or written. Rollout columns take the same names and
aliases as JSONL (see ``rewardsmith.files.rollouts``). Values a Parquet column cannot hold faithfully (chat
messages, metadata objects, answers of mixed types) are written as JSON text and the column is
listed in the file's ``rewardsmith.json_columns`` metadata, so reading gives back exactly what
was written (and so the same content keys).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any

from rewardsmith._system.gcpause import gc_paused
from rewardsmith.errors import (
    ConfigError,
    InputError,
)
from rewardsmith.files.atomic import (
    atomic_path,
    atomic_text,
)
from rewardsmith.files.rollouts import (
    GroupCheck,
    OnBadLine,
    RolloutReader,
    UniqueIds,
    read_json_objects,
    rollout_and_group,
)
from rewardsmith.files.scored import read_scores, score_line
from rewardsmith.types import (
    Rollout,
    Score,
)

__all__ = [
    "PARQUET_SUFFIXES",
    "is_parquet",
    "read_rollouts_any",
    "read_records",
    "read_rollouts_parquet",
    "read_scores_any",
    "read_scores_parquet",
    "score_lines",
    "write_rollouts_any",
    "write_rollouts_parquet",
    "write_scores_any",
    "write_scores_parquet",
]

PARQUET_SUFFIXES = (".parquet", ".pq")
_JSON_COLUMNS_KEY = b"rewardsmith.json_columns"
_SCALARS = (str, int, float, bool)


def is_parquet(path: str | Path) -> bool:
    """Whether ``path`` names a Parquet file (by extension); anything else is JSONL."""
    return Path(path).suffix.lower() in PARQUET_SUFFIXES


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as exc:
        raise ConfigError(
            "reading or writing .parquet files needs pyarrow, which is not installed: "
            "pip install 'rewardsmith[parquet]' (or use .jsonl)"
        ) from exc
    return pyarrow, pyarrow.parquet


def _read_rows(path: str | Path) -> list[dict[str, Any]]:
    _, pq = _pyarrow()
    try:
        table = pq.read_table(str(path))
    except FileNotFoundError as exc:
        raise InputError("cannot open: no such file", source=str(path)) from exc
    except Exception as exc:
        raise InputError(f"cannot read as Parquet: {exc}", source=str(path)) from exc
    metadata = table.schema.metadata or {}
    json_columns = set(metadata.get(_JSON_COLUMNS_KEY, b"").decode().split(",")) - {""}
    rows: list[dict[str, Any]] = table.to_pylist()
    for number, row in enumerate(rows, start=1):
        for column in json_columns:
            text = row.get(column)
            if isinstance(text, str):
                try:
                    row[column] = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise InputError(f"row {number}: column {column!r} is not valid JSON",
                                     source=str(path)) from exc
    return rows


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a JSONL or Parquet file as a dict, unvalidated (a line that is not a
    JSON object is an ``InputError`` with its line number)."""
    if is_parquet(path):
        return _read_rows(path)
    return [record for _, record in read_json_objects(path)]


# ------------------------------------------------------------------ rollouts


def read_rollouts_parquet(path: str | Path, *, on_bad_line: OnBadLine = "fail",
                          bad_lines: list[InputError] | None = None, strict_groups: bool = False,
                          warnings: list[str] | None = None) -> list[Rollout]:
    """Rollouts from a Parquet file; a bad row raises (or, with ``on_bad_line="skip"``, is
    added to ``bad_lines``) naming its 1-based row number. Groups written two ways (see
    ``io.GroupCheck``) raise with ``strict_groups``, else are added to ``warnings``."""
    out = []
    ids = UniqueIds(str(path), unit="row")
    groups = GroupCheck(str(path), unit="row")
    for number, row in enumerate(_read_rows(path), start=1):
        try:
            rollout, written = rollout_and_group(row, str(number))
        except (ValueError, TypeError) as exc:
            error = InputError(f"row {number}: {exc}", source=str(path))
            if on_bad_line == "fail":
                raise error from exc
            if bad_lines is not None:
                bad_lines.append(error)
            continue
        try:
            ids.add(rollout.id, number)
        except InputError as exc:
            raise InputError(f"row {number}: {exc.reason}", source=str(path)) from None
        groups.add(number, written)
        out.append(rollout)
    groups.finish(strict_groups, warnings)
    return out


def read_rollouts_any(path: str | Path, *, on_bad_line: OnBadLine = "fail",
                      bad_lines: list[InputError] | None = None, strict_groups: bool = False,
                      warnings: list[str] | None = None) -> list[Rollout]:
    """Rollouts from Parquet (``.parquet``/``.pq``) or JSONL (anything else). A file whose
    groups are written two ways is a ``MixedGroups`` error with ``strict_groups``, else a line
    each in ``warnings``."""
    if is_parquet(path):
        return read_rollouts_parquet(path, on_bad_line=on_bad_line, bad_lines=bad_lines,
                                     strict_groups=strict_groups, warnings=warnings)
    reader = RolloutReader(str(path), on_bad_line, strict_groups=strict_groups)
    with gc_paused():  # a file's rollouts form no reference cycles: no collector passes
        rollouts = list(reader.read(path))
    if bad_lines is not None:
        bad_lines.extend(reader.bad_lines)
    if warnings is not None:
        warnings.extend(reader.warnings)
    return rollouts


def _column(pa: Any, values: list[Any], *, native: bool) -> tuple[Any, bool]:
    """An Arrow array for ``values``; JSON text when they are not all plain scalars of one type."""
    if native:
        kinds = {type(v) for v in values if v is not None}
        if len(kinds) <= 1 and kinds <= set(_SCALARS):
            floats = kinds == {float}
            if not floats or all(math.isfinite(v) for v in values if v is not None):
                return pa.array(values), False
    return pa.array([json.dumps(v, ensure_ascii=False, sort_keys=True) for v in values],
                    type=pa.string()), True


def write_rollouts_parquet(path: str | Path, rollouts: Iterable[Rollout]) -> int:
    """Write rollouts as Parquet (read back exactly by ``read_rollouts_parquet``)."""
    pa, pq = _pyarrow()
    items = list(rollouts)
    columns: dict[str, Any] = {
        "id": pa.array([r.id for r in items], type=pa.string()),
        "group": pa.array([r.group for r in items], type=pa.string()),
    }
    json_columns = []
    for name, native in (("prompt", True), ("completion", True), ("answer", True),
                         ("metadata", False)):
        array, as_json = _column(pa, [getattr(r, name) for r in items], native=native)
        columns[name] = array
        if as_json:
            json_columns.append(name)
    columns["truncated"] = pa.array([r.truncated for r in items], type=pa.bool_())
    table = pa.table(columns).replace_schema_metadata(
        {_JSON_COLUMNS_KEY: ",".join(json_columns).encode()})
    _write_table(pq, table, path)
    return len(items)


def write_rollouts_any(path: str | Path, rollouts: Iterable[Rollout]) -> int:
    """Write rollouts as Parquet or JSONL, by the extension of ``path``."""
    if is_parquet(path):
        return write_rollouts_parquet(path, rollouts)
    count = 0
    with atomic_text(path) as handle:
        for rollout in rollouts:
            handle.write(json.dumps(rollout.to_dict(), ensure_ascii=False, default=str) + "\n")
            count += 1
    return count


def _write_table(pq: Any, table: Any, path: str | Path) -> None:
    with atomic_path(path) as temporary:
        try:
            pq.write_table(table, str(temporary))
        except OSError as exc:
            # Arrow's message repeats the errno around the system's words: those alone, as the
            # JSONL writer says them ("No space left on device").
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            raise ConfigError(f"cannot write {str(path)!r}: {reason}") from exc


# ------------------------------------------------------------------ scores


def read_scores_parquet(path: str | Path) -> list[Score]:
    """Scores from a Parquet file written by ``write_scores_parquet`` (or one with the same
    columns: ``id``, ``group``, ``reward``, ``status``, ``components``, ``errors``, ...)."""
    out = []
    for number, row in enumerate(_read_rows(path), start=1):
        try:
            if row.get("id") is None:
                raise ValueError("missing 'id'")
            errors = row.get("errors")
            if isinstance(errors, list):  # an Arrow map reads as (key, value) pairs
                row["errors"] = dict(errors)
            row["components"] = {k: v for k, v in (row.get("components") or {}).items()}
            metrics = row.get("metrics")
            if isinstance(metrics, dict):
                row["metrics"] = {k: v for k, v in metrics.items() if v is not None}
            out.append(Score.from_dict(row))
        except (ValueError, TypeError, AttributeError) as exc:
            raise InputError(f"row {number}: {exc}", source=str(path)) from exc
    return out


def read_scores_any(path: str | Path) -> list[Score]:
    """Scores from Parquet (``.parquet``/``.pq``) or scored JSONL (anything else)."""
    return read_scores_parquet(path) if is_parquet(path) else read_scores(path)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def write_scores_parquet(path: str | Path, scores: Sequence[Score],
                         extra: dict[str, Sequence[Any]] | None = None) -> int:
    """Write scores as Parquet: one column per field, ``components`` (and ``metrics``) as a
    struct with one field per name, ``errors`` as a map. ``extra`` adds columns."""
    pa, pq = _pyarrow()
    names = list(dict.fromkeys(name for s in scores for name in s.components))
    metric_names = list(dict.fromkeys(name for s in scores for name in s.metrics))
    columns: dict[str, Any] = {
        "id": pa.array([s.id for s in scores], type=pa.string()),
        "group": pa.array([s.group for s in scores], type=pa.string()),
        "reward": pa.array([_finite(s.reward) for s in scores], type=pa.float64()),
        "status": pa.array([s.status.value for s in scores], type=pa.string()),
    }
    if names:  # Parquet cannot hold a struct without fields
        columns["components"] = pa.array(
            [{n: _finite(s.components.get(n)) for n in names} for s in scores],
            type=pa.struct([(n, pa.float64()) for n in names]))
    columns["errors"] = pa.array([list(s.errors.items()) for s in scores],
                                 type=pa.map_(pa.string(), pa.string()))
    columns["advantage"] = pa.array([_finite(s.advantage) for s in scores], type=pa.float64())
    if metric_names:
        columns["metrics"] = pa.array(
            [{n: _finite(s.metrics.get(n)) for n in metric_names} for s in scores],
            type=pa.struct([(n, pa.float64()) for n in metric_names]))
    for name, values in (extra or {}).items():
        if len(values) != len(scores):
            raise ConfigError(f"extra column {name!r} has {len(values)} values for "
                              f"{len(scores)} scores")
        columns[name] = pa.array(list(values))
    _write_table(pq, pa.table(columns), path)
    return len(scores)


def write_scores_any(path: str | Path, scores: Sequence[Score]) -> int:
    """Write scores as Parquet or scored JSONL, by the extension of ``path``."""
    if is_parquet(path):
        return write_scores_parquet(path, scores)
    try:
        with atomic_text(path) as handle:
            for start in range(0, len(scores), 8192):
                handle.write(score_lines(scores[start:start + 8192]))
    except OSError as exc:
        raise ConfigError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from exc
    return len(scores)


# ------------------------------------------------------------------ fast scored JSONL


# The JSON text of finite floats seen before: scored lines repeat few values (0.0, 1.0, a
# group's advantages), and CPython's shortest repr of a float costs 0.2-0.7 us each time.
_FLOAT_TEXTS: dict[float, str] = {}
_FLOAT_TEXTS_MAX = 65_536


def _float_text(value: float) -> str:
    """``repr`` of a finite float, remembered (0.0 and -0.0 are one key, so neither is)."""
    text = _FLOAT_TEXTS.get(value)
    if text is None:
        text = float.__repr__(value)
        if value != 0.0:
            if len(_FLOAT_TEXTS) >= _FLOAT_TEXTS_MAX:
                _FLOAT_TEXTS.clear()
            _FLOAT_TEXTS[value] = text
    return text


def _number(value: object) -> str | None:
    if value is None:
        return "null"
    if type(value) is float:
        return _float_text(value) if value - value == 0.0 else "null"
    return None


_KEYS: dict[str, str] = {}  # component name -> its JSON text and separator (names repeat)


def _numbers(values: Mapping[str, object]) -> str | None:
    if not values:
        return "{}"
    parts = []
    keys = _KEYS
    texts = _FLOAT_TEXTS
    for key, value in values.items():
        # _number, inlined: this runs for every value of every scored line.
        if type(value) is float:
            if value - value == 0.0:
                text = texts.get(value) or _float_text(value)
            else:
                text = "null"
        elif value is None:
            text = "null"
        else:
            return None
        prefix = keys.get(key)
        if prefix is None:
            if type(key) is not str:
                return None
            prefix = encode_basestring(key) + ": "
            if len(keys) < 10_000:
                keys[key] = prefix
        parts.append(prefix + text)
    return "{" + ", ".join(parts) + "}"


def _texts(values: Mapping[str, str]) -> str | None:
    if not values:
        return "{}"
    if not all(type(k) is str and type(v) is str for k, v in values.items()):
        return None
    return "{" + ", ".join(f"{encode_basestring(k)}: {encode_basestring(v)}"
                           for k, v in values.items()) + "}"


def score_lines(scores: Iterable[Score]) -> str:
    """Scored JSONL lines, each exactly ``io.score_line(score)`` plus a newline, built without
    a dict and a generic encoder per line (the writer of large rescored files)."""
    out = []
    for score in scores:
        reward, advantage = _number(score.reward), _number(score.advantage)
        components, errors = _numbers(score.components), _texts(score.errors)
        metrics = _numbers(score.metrics) if score.metrics else ""
        if (reward is None or advantage is None or components is None or errors is None
                or metrics is None or score.timing or type(score.id) is not str
                or type(score.group) is not str):
            out.append(score_line(score) + "\n")  # anything unusual: the generic encoder
            continue
        tail = f", \"metrics\": {metrics}}}\n" if metrics else "}\n"
        out.append(
            f"{{\"id\": {encode_basestring(score.id)}, \"group\": "
            f"{encode_basestring(score.group)}, \"reward\": {reward}, \"status\": "
            f"\"{score.status.value}\", \"components\": {components}, \"errors\": {errors}, "
            f"\"advantage\": {advantage}{tail}")
    return "".join(out)
