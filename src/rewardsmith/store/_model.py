"""The result store: rollouts, runs and component results, keyed by content, in one SQLite file.

A component's result for a rollout depends only on the component's identity (code, params,
timeout) and the rollout's content, so it is stored under that pair and reused by any later run
that asks the same question: a restart after ``kill -9``, a second run, or a rescore with a new
rubric. The file is SQLite in WAL mode: several processes may read and write it at once, every
write is one transaction (a crash loses at most the batch in flight, never the file), and the
judge's call ledger may live in the same file under its own ``judge_`` tables.

A run is ``running`` until it is ``done``; one stopped by Ctrl-C or SIGTERM is marked
``interrupted``, one that failed ``failed``. Each run records who runs it (pid, host, boot id,
process start time), so a ``running`` run whose process is gone (``kill -9``, a crash, a
reboot) reads as ``killed``. A store that cannot be written (file mode, read-only folder) is
opened read-only: reading works, and a write fails with a message that says "read-only".

Tables (all ``store_``):

- ``store_items``: content key -> a small integer, and the rollout's content when known
- ``store_components``: component identity -> a small integer
- ``store_results``: (component, item) -> value, status, error, metrics
- ``store_runs``: one row per score, rescore or import run, with its rubric and summary
- ``store_members``: which items a run holds, in the order of its input file, with id and group

Results are keyed by integers, not by the 32-character keys: a run's rollouts get consecutive
numbers, so its results are appended instead of scattered over the file (a batch's commit then
writes a few pages, not one page per result).

A score run records in bulk (``begin_run(defer=True)``): its rollouts and results go into
``store_pending_*`` blocks, which readers read as they are and the store settles into the tables
above when there are too many of them (see ``rewardsmith.store._blocks``). A run recorded beside
the scoring into a store that held no results keeps its rollouts' fields and no content keys
(``rewardsmith.store._background``): the first reader that needs the keys makes them, and keeps
them when it can write the file.
"""

from __future__ import annotations

import bisect
import json
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from rewardsmith._system.gcpause import gc_paused
from rewardsmith._system.process_identity import ProcessIdentity
from rewardsmith.errors import StoreError
from rewardsmith.store import _background as store_background
from rewardsmith.store._blocks import (
    NO_KEYS,
    ROLLOUT_CHUNK,
    columns_of_block,
    field_block_row,
    keys_of_columns,
    rollout_columns,
    write_rollout_blocks,
    write_rollout_rows,
)
from rewardsmith.store._deferred import DeferredRun, RecordingRun
from rewardsmith.store._results import StoredResults
from rewardsmith.store._schema import (
    _CHUNK,
    _ITEM_CACHE,
    DEFAULT_STORE_PATH,
    ContentCache,
    Members,
    RunInfo,
    StoredCell,
    StoreFileChanged,
    _new_run_id,
    _run_info,
    group_result_keys,
)
from rewardsmith.types import (
    Rollout,
    key_of_content,
)

__all__ = [
    "ContentCache",
    "DEFAULT_STORE_PATH",
    "Members",
    "RunInfo",
    "Store",
    "StoredCell",
    "StoreFileChanged",
    "group_result_keys",
]


class Store(StoredResults):
    """A result store in one SQLite file (created when missing). Safe to share between threads
    and processes; use as a context manager or call ``close()``.

    It is the engine's ``ResultCache``: ``lookup`` and ``record`` by component identity and
    rollout content key. Only ``ok`` and ``masked`` results are kept: an error or a timeout is
    tried again next time.
    """

    def __enter__(self) -> Store:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: object) -> None:
        try:
            if exc is not None:
                try:
                    self._wait_begun()  # a run still being recorded is then marked too
                except StoreError:
                    pass
            if exc is not None and self._open_runs:
                # Stopped by the user (Ctrl-C; SIGTERM arrives as SystemExit from the CLI) or
                # by an error: say so, instead of leaving the run "running" forever.
                stopped = isinstance(exc, (KeyboardInterrupt, SystemExit))
                self.abandon_runs("interrupted" if stopped else "failed")
        finally:
            self.close()

    def abandon_runs(self, status: str = "interrupted") -> None:
        """Mark the runs begun here and not finished as ``status`` (best effort: a store that
        cannot be written now leaves them to be read as ``killed`` later)."""
        try:
            self._wait_begun()
        except StoreError:
            pass
        for run_id in list(self._open_runs):
            try:
                self.end_run(run_id, status)
            except StoreError:
                pass

    def begin_run(
        self,
        rollouts: Sequence[Rollout],
        *,
        kind: str = "score",
        rubric_name: str = "",
        rubric_id: str = "",
        components: Sequence[Mapping[str, Any]] = (),
        source: str = "",
        keys: Sequence[str] | None = None,
        contents: Sequence[str] | None = None,
        defer: bool = False,
    ) -> str:
        """Record a new run holding ``rollouts`` (in this order) and their content, in one
        transaction: after a crash the run is there in full, or not at all. ``contents`` and
        ``keys`` (each rollout's ``content_json`` and ``content_key``) are computed when not
        given.

        ``defer``: keep the run's rollouts, and the results recorded until it ends, as pending
        blocks (fast to write; settled into the indexed tables when first needed)."""
        if contents is None:
            contents = [r.content_json() for r in rollouts]
        if keys is None:
            keys = [key_of_content(text) for text in contents]
        run_id = _new_run_id(kind)
        if defer and not self.read_only:
            self._begin_deferred(run_id, rollouts, keys, contents, kind=kind,
                                 rubric_name=rubric_name, rubric_id=rubric_id,
                                 components=components, source=source)
            return run_id
        with self._guard("recording the run"):
            with self._write():
                items = self._items(keys, contents)
                self._db.executemany(
                    "INSERT INTO store_members VALUES (?, ?, ?, ?, ?)",
                    ((run_id, i, r.id, r.group, items[key])
                     for i, (r, key) in enumerate(zip(rollouts, keys, strict=True))))
                self._insert_run(run_id, kind, rubric_name, rubric_id, source, None, run_id,
                                 len(rollouts), components)
            if len(self._item_ids) + len(items) > _ITEM_CACHE:
                self._item_ids.clear()
            self._item_ids.update(items)  # the results of this run will need these numbers
        return run_id

    def _begin_deferred(self, run_id: str, rollouts: Sequence[Rollout], keys: Sequence[str],
                        contents: Sequence[str], *, kind: str, rubric_name: str,
                        rubric_id: str, components: Sequence[Mapping[str, Any]],
                        source: str, insert_run: bool = True) -> None:
        with self._guard("recording the run"), self._write():
            write_rollout_blocks(self._db, run_id, [r.id for r in rollouts],
                                 [r.group for r in rollouts], keys, contents)
            if insert_run:
                self._insert_run(run_id, kind, rubric_name, rubric_id, source, None, run_id,
                                 len(rollouts), components)
            # Nothing stored yet: no look-up can hit while this run records.
            empty = self._holds_no_results(besides=run_id)
        current = self.deferred
        if current is None:
            self.deferred = DeferredRun(run_id, nothing_stored=bool(empty))
        elif current.run_id == run_id and current.writer is None:
            current.nothing_stored = bool(empty)

    def begin_recording(
        self,
        rollouts: Sequence[Rollout],
        *,
        kind: str = "score",
        rubric_name: str = "",
        rubric_id: str = "",
        components: Sequence[Mapping[str, Any]] = (),
        source: str = "",
        known: ContentCache | None = None,
    ) -> RecordingRun:
        """Begin a run of ``rollouts`` recorded beside the scoring, and return its handle (the
        engine's cache for it, and what finishes it). Its rollouts are written off the
        caller's path (their fields only, when this store holds no results): by a helper
        process at low priority for a large run, once the handle's ``scoring_done`` is called
        (see ``_background``), else by a thread. Its results wait in pending blocks, as for
        any deferred run. ``known`` (rollout id() -> content JSON, key) is shared with whoever
        else needs the keys, so that a rollout is encoded once in this process (and the keys
        made for look-ups are written with the rollouts). Anything that reads or ends the run
        waits for its rollouts first. The run is listed at once; a run killed before its
        rollouts are written has none."""
        if self.read_only:
            return RecordingRun(self, self.begin_run(
                rollouts, kind=kind, rubric_name=rubric_name, rubric_id=rubric_id,
                components=components, source=source))
        self._wait_begun()
        run_id = _new_run_id(kind)
        with self._guard("recording the run"), self._write():
            # The run itself now, so that a kill at any moment leaves it listed (as killed);
            # its rollouts follow in one transaction of their own.
            self._insert_run(run_id, kind, rubric_name, rubric_id, source, None, run_id,
                             len(rollouts), components)
            empty = self._holds_no_results(besides=run_id)
        # Results of this run are kept by position while it is deferred (no keys needed).
        deferred = self.deferred = DeferredRun(
            run_id, nothing_stored=bool(empty),
            positions=dict(zip(map(id, rollouts), range(len(rollouts)))), rollouts=rollouts)
        shared: ContentCache = known if known is not None else {}

        def record() -> None:
            try:
                if not (store_background.helper_fits(len(rollouts))
                        and store_background.record_in_helper(
                            self.path, run_id, rollouts,
                            lambda: deferred.scored.wait(store_background.WAIT_FOR_SCORING),
                            lambda: _known_keys(rollouts, shared))):
                    self._record_rollouts_here(deferred, rollouts, shared)
            except BaseException as exc:  # noqa: BLE001 - raised where the run is next used
                deferred.error = exc

        deferred.writer = threading.Thread(target=record, name="rewardsmith-store-run",
                                           daemon=True)
        deferred.writer.start()
        return RecordingRun(self, run_id, deferred)

    def recording(self, run_id: str) -> RecordingRun:
        """The handle of run ``run_id``, begun here and not ended (see ``begin_recording``)."""
        deferred = self.deferred
        return RecordingRun(self, run_id,
                            deferred if deferred is not None and deferred.run_id == run_id
                            else None)

    def _record_rollouts_here(self, deferred: DeferredRun, rollouts: Sequence[Rollout],
                              known: ContentCache) -> None:
        """A background run's rollouts encoded and written by this process."""
        run_id = deferred.run_id
        if self._pending_rollouts(run_id, wait=False):
            return  # a helper wrote them and stopped before it answered
        if deferred.nothing_stored and all(type(r) is Rollout for r in rollouts):
            # Nothing to look up: the scoring makes no key, so none is made until a reader
            # needs them (a subclass may encode itself otherwise: keyed by its methods).
            rows = [field_block_row(run_id, start,
                                    rollout_columns(rollouts[start:start + ROLLOUT_CHUNK]))
                    for start in range(0, len(rollouts), ROLLOUT_CHUNK)]
            with self._guard("recording the run"), self._write():
                write_rollout_rows(self._db, rows)
            return
        texts: list[str] = [""] * len(rollouts)
        keys: list[str] = [""] * len(rollouts)
        # From the end: the scoring starts at the front and encodes what it reaches.
        for index in range(len(rollouts) - 1, -1, -1):
            rollout = rollouts[index]
            text, key = known.get(id(rollout)) or ("", "")
            if not text:
                text = rollout.content_json()
                key = key or key_of_content(text)
                known[id(rollout)] = (text, key)
            texts[index], keys[index] = text, key
        with self._guard("recording the run"), self._write():
            write_rollout_blocks(self._db, run_id, [r.id for r in rollouts],
                                 [r.group for r in rollouts], keys, texts)

    def _run_ended(self, run_id: str) -> None:
        self._open_runs.discard(run_id)
        if self.deferred is not None and self.deferred.run_id == run_id:
            self.deferred = None
            self._pending_index = None  # its results are now looked up like any others
            self._no_pending = False

    def begin_derived_run(
        self,
        parent: str,
        *,
        kind: str = "rescore",
        rubric_name: str = "",
        rubric_id: str = "",
        components: Sequence[Mapping[str, Any]] = (),
        defer: bool = False,
    ) -> str:
        """Record a new run over the same rollouts as ``parent`` (nothing is copied);
        ``defer``: its results go into pending blocks until it ends (see ``begin_run``)."""
        base = self.get_run(parent)
        run_id = _new_run_id(kind)
        with self._guard("recording the run"), self._write():
            self._insert_run(run_id, kind, rubric_name, rubric_id, base.source, base.id,
                             base.members, base.size, components)
        if defer and not self.read_only:
            self.deferred = DeferredRun(run_id)
        return run_id

    def _insert_run(self, run_id: str, kind: str, rubric_name: str, rubric_id: str, source: str,
                    parent: str | None, members: str, size: int,
                    components: Sequence[Mapping[str, Any]]) -> None:
        me = ProcessIdentity.current()
        self._db.execute(
            "INSERT INTO store_runs VALUES (?, ?, ?, NULL, 'running', ?, ?, ?, ?, ?, ?, ?, NULL, "
            "?, ?, ?, ?)",
            (run_id, kind, time.time(), rubric_name, rubric_id, source, parent, members, size,
             json.dumps([dict(c) for c in components]), me.pid, me.host, me.boot_id, me.start))
        self._open_runs.add(run_id)

    def finish_run(self, run_id: str, summary: Mapping[str, Any] | None = None) -> None:
        """Mark a run done and keep its summary (JSON-serializable numbers). Raises
        ``StoreFileChanged`` when the file was deleted or replaced during the run."""
        self._wait_begun()
        self.check_file()
        text = json.dumps(dict(summary), default=str) if summary is not None else None
        with self._guard("finishing the run"), self._write():
            self._db.execute(
                "UPDATE store_runs SET status = 'done', finished = ?, summary = ? WHERE id = ?",
                (time.time(), text, run_id))
        self._run_ended(run_id)
        self.check_file()

    def end_run(self, run_id: str, status: str) -> None:
        """Mark a run that did not finish: ``interrupted`` (stopped by the user) or
        ``failed``. A run already done keeps its status."""
        if status not in ("interrupted", "failed"):
            raise ValueError(f"a run ends 'interrupted' or 'failed', not {status!r}")
        self._wait_begun()
        with self._guard("ending the run"), self._write():
            self._db.execute(
                "UPDATE store_runs SET status = ?, finished = ? WHERE id = ? "
                "AND status = 'running'", (status, time.time(), run_id))
        self._run_ended(run_id)

    def runs(self) -> list[RunInfo]:
        """Every recorded run, oldest first."""
        self._wait_begun()
        with self._guard("listing runs"):
            rows = self._db.execute(
                "SELECT * FROM store_runs ORDER BY created, rowid").fetchall()
        return [_run_info(row) for row in rows]

    def get_run(self, run_id: str | None = None) -> RunInfo:
        """A run by id (or unique id prefix); ``None`` is the latest run."""
        self._wait_begun()
        with self._guard("reading runs"):
            if run_id is None:
                rows = self._db.execute(
                    "SELECT * FROM store_runs ORDER BY created DESC, rowid DESC LIMIT 1").fetchall()
                if not rows:
                    raise StoreError(f"store {self.path!r} holds no runs yet: score rollouts "
                                     f"with --store {self.path} first, or import scores")
            else:
                rows = self._db.execute("SELECT * FROM store_runs WHERE id = ?",
                                        (run_id,)).fetchall()
                if not rows:
                    pattern = (run_id.replace("\\", "\\\\").replace("%", "\\%")
                               .replace("_", "\\_") + "%")
                    rows = self._db.execute(
                        "SELECT * FROM store_runs WHERE id LIKE ? ESCAPE '\\' LIMIT 2",
                        (pattern,)).fetchall()
                if len(rows) != 1:
                    known = ", ".join(r.id for r in self.runs()[-5:]) or "none"
                    problem = "matches several runs" if rows else "is not in this store"
                    raise StoreError(f"run {run_id!r} {problem} ({self.path}); "
                                     f"latest runs: {known}")
        return _run_info(rows[0])

    def members(self, run_id: str) -> Members:
        """The run's rollouts in input order: ids, groups, content keys and item numbers (keys
        not made yet are made here from the rollouts' fields, and kept when the store can
        write)."""
        owner = self.get_run(run_id).members
        blocks = self._pending_rollouts(owner)
        if blocks:  # recorded in bulk: its order, ids and keys are in the blocks (no numbers)
            ids: list[str] = []
            groups: list[str] = []
            keys: list[str] = []
            made: list[tuple[int, list[str]]] = []
            for start, block_ids, block_groups, keys_text, contents in blocks:
                ids.extend(json.loads(block_ids))
                groups.extend(json.loads(block_groups))
                if keys_text == NO_KEYS:  # kept as fields: the keys are made from them, once
                    with gc_paused():
                        made.append((start, keys_of_columns(columns_of_block(contents))[1]))
                    keys.extend(made[-1][1])
                else:
                    keys.extend(json.loads(keys_text))
            if made:
                self._keep_keys(owner, made)
            return Members(owner, ids, groups, keys, [])
        with self._guard("reading the run"):
            rows = self._db.execute(
                "SELECT m.id, m.grp, i.key, m.item FROM store_members m "
                "CROSS JOIN store_items i ON i.id = m.item WHERE m.run = ? ORDER BY m.position",
                (owner,)).fetchall()
        if not rows:
            return Members(owner, [], [], [], [])
        ids, groups, keys, items = (list(column) for column in zip(*rows, strict=True))
        return Members(owner, ids, groups, keys, items)

    def load_rollouts(self, run_id: str, positions: Sequence[int] | None = None) -> list[Rollout]:
        """The run's rollouts with their content (all, or those at ``positions``, in order)."""
        info = self.get_run(run_id)
        blocks = self._pending_rollouts(info.members)
        if blocks:
            return _rollouts_of_blocks(blocks, positions)
        query = ("SELECT m.position, m.id, m.grp, i.data FROM store_members m "
                 "CROSS JOIN store_items i ON i.id = m.item WHERE m.run = ?")
        wanted = None if positions is None else sorted(set(positions))
        with self._guard("reading rollouts"):
            if wanted is None or 4 * len(wanted) > info.size:  # most of the run: read it all
                rows = self._db.execute(query + " ORDER BY m.position", (info.members,)).fetchall()
                if wanted is not None:
                    keep = set(wanted)
                    rows = [row for row in rows if row[0] in keep]
            else:
                rows = []
                for start in range(0, len(wanted), _CHUNK):
                    chunk = wanted[start:start + _CHUNK]
                    rows.extend(self._db.execute(
                        query + f" AND m.position IN ({','.join('?' * len(chunk))})",
                        (info.members, *chunk)))
                rows.sort()
        for _, rollout_id, _, data in rows:
            if data is None:
                raise StoreError(f"rollout {rollout_id!r} of run {info.id} has no stored content")
        # One JSON document for all contents: decoding it is one call, not one per rollout.
        # Nothing built here forms a cycle: the collector would only rescan it, many times.
        with gc_paused():
            contents = json.loads("[" + ",".join(row[3] for row in rows) + "]")
            return [Rollout(rollout_id, group, *content)
                    for (_, rollout_id, group, _), content in zip(rows, contents, strict=True)]

    def rollouts_by_id(self, run_id: str, ids: Sequence[str]) -> dict[str, Rollout]:
        """Rollouts of a run with the given ids (the first of each id)."""
        wanted = set(ids)
        positions: dict[str, int] = {}
        for position, rollout_id in enumerate(self.members(run_id).ids):
            if rollout_id in wanted:
                positions.setdefault(rollout_id, position)
        return {r.id: r for r in self.load_rollouts(run_id, list(positions.values()))}


def _known_keys(rollouts: Sequence[Rollout], known: ContentCache) -> list[str] | None:
    """The content keys of ``rollouts`` in ``known``, in order; None unless all are there (a
    store that held results when the run began keys every rollout for its look-ups)."""
    if len(known) < len(rollouts):
        return None
    found = list(map(known.get, map(id, rollouts)))
    return None if None in found else [pair[1] for pair in cast("list[tuple[str, str]]", found)]


def _rollouts_of_blocks(blocks: Sequence[tuple[int, str, str, str, str | bytes]],
                        positions: Sequence[int] | None) -> list[Rollout]:
    """Rollouts from a run's pending blocks (all, or those at ``positions``, in order)."""
    wanted = None if positions is None else sorted(set(positions))
    out: list[Rollout] = []
    with gc_paused():
        for start, ids, groups, _, contents in blocks:
            block_ids: list[str] = json.loads(ids)
            end = start + len(block_ids)
            offsets: Sequence[int] = range(len(block_ids))
            if wanted is not None:  # this block's share of the sorted positions, by bisection
                inside = wanted[bisect.bisect_left(wanted, start):bisect.bisect_left(wanted, end)]
                if not inside:
                    continue
                if len(inside) < len(block_ids):
                    offsets = [p - start for p in inside]
            block_groups: list[str] = json.loads(groups)
            columns = columns_of_block(contents)
            if any(len(column) != len(block_ids) for column in columns):
                raise StoreError(f"a block of run rollouts from position {start} is damaged: "
                                 f"{len(block_ids)} ids, fields of "
                                 f"{sorted({len(column) for column in columns})} rollouts")
            if type(offsets) is range:  # the whole block: one call per rollout, nothing else
                out.extend(map(Rollout, block_ids, block_groups, *columns))
            else:
                out.extend(Rollout(block_ids[i], block_groups[i], *(c[i] for c in columns))
                           for i in offsets)
    return out
