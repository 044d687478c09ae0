"""A large run's rollouts recorded by a helper process at low priority.

Recording a run's rollouts in the form readers look them up by (each rollout's content JSON and
content key: JSON escaping and a hash, 3 us of pure Python each here) costs CPU that the scoring
would have used: every core is busy while the scoring runs. For a large run on a machine with
more than one core, a helper process at nice 19 does the least it can instead: it receives the
rollouts' fields a block at a time and keeps each block's fields as one compressed JSON
document (no content JSON, no hashing: ``_blocks.field_block_row``), leaving the content
keys to the first reader that needs them (or writing those the caller made for its own
look-ups, handed over with the word to write). It prepares the blocks while the scoring goes
on and writes them, in one transaction of its own, once the scoring has ended
(``RecordingRun.scoring_done``), on the core that the scoring's tail leaves free, or after
``WAIT_FOR_SCORING`` seconds of a longer scoring. Meanwhile the run's results name their
rollouts by position (see ``_blocks``), so the scoring needs no content key from it; they
are found by content key once the rollouts are written, so a run killed in its first seconds may
leave results that no later run finds. The caller records the run itself when the helper cannot
(it did not start, it died, a rollout could not be sent). The helper exits when its pipe closes,
so it never outlives the process that started it.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import time
from collections.abc import Callable, Sequence
from typing import Any

from rewardsmith.store._blocks import (
    NO_KEYS,
    ROLLOUT_CHUNK,
    field_block_row,
    rollout_columns,
    write_rollout_rows,
)
from rewardsmith.store.sqlite_setup import connect
from rewardsmith.types import Rollout

__all__ = ["MIN_ROLLOUTS", "helper_fits", "record_in_helper"]

MIN_ROLLOUTS = 16_384  # below this, starting a process costs more than it saves
# The helper prepares its blocks while the scoring goes on, and writes once the scoring has ended
# (``RecordingRun.scoring_done``), on the core that the scoring's tail leaves free, or after this long.
WAIT_FOR_SCORING = 10.0


def _cores() -> int:
    from rewardsmith.workers import default_worker_count

    return default_worker_count()


def helper_fits(count: int) -> bool:
    """Whether a run of ``count`` rollouts is recorded by a helper process here."""
    return count >= MIN_ROLLOUTS and _cores() > 1


def record_in_helper(path: str, run_id: str, rollouts: Sequence[Rollout],
                     write_when: Callable[[], object] = lambda: None,
                     known_keys: Callable[[], list[str] | None] = lambda: None) -> bool:
    """Write ``rollouts`` (their fields) as run ``run_id``'s pending blocks in store ``path``
    from a helper process, which writes once ``write_when()`` has returned, with the content
    keys that ``known_keys()`` then gives (those this process made meanwhile for its own
    look-ups, in order; None leaves them to the first reader); False when the helper could
    not (the caller then records them, unless the helper wrote them before it stopped)."""
    import tempfile
    from multiprocessing import reduction

    from rewardsmith.workers import (
        dumps_fast,
        process_context,
        start_without_main,
    )

    if any(type(r) is not Rollout for r in rollouts):
        return False  # a subclass may encode itself otherwise: recorded here, by its methods
    try:
        # A header, then each block's fields as columns, pickled without the memo (a few list
        # copies and one pass over the strings): the helper reads and writes a block at a time,
        # so that what it touches stays in the processor's cache, not evicting the scoring's.
        chunk = ROLLOUT_CHUNK
        parts = [dumps_fast((path, run_id, len(rollouts), chunk))]
        parts.extend(dumps_fast(rollout_columns(rollouts[start:start + chunk]))
                     for start in range(0, len(rollouts), chunk))
    except Exception:  # noqa: BLE001 - a rollout that cannot be sent: recorded here
        return False
    context = process_context()
    conn, child = context.Pipe()  # a socket pair: it can carry a file descriptor
    process = context.Process(target=_record, args=(child,), name="rewardsmith-store-run",
                              daemon=True)
    try:
        start_without_main(process)
    except Exception:  # noqa: BLE001 - no helper: recorded here
        conn.close()
        return False
    finally:
        child.close()
    reply: tuple[Any, ...] = ("error", "the helper process stopped")
    try:
        # The rollouts go through an unnamed file (nothing to clean up if either side dies):
        # written in one call, where a pipe would wake this thread for every few kilobytes
        # the helper reads, each time taking the interpreter lock from the scoring.
        with tempfile.TemporaryFile(dir=_scratch_folder(sum(map(len, parts)))) as scratch:
            scratch.writelines(parts)
            scratch.flush()
            del parts
            reduction.send_handle(conn, scratch.fileno(), process.pid)
            write_when()
            conn.send_bytes(dumps_fast(known_keys()))  # the word to write
            if _answers_in_time(conn, process.pid, len(rollouts)):
                reply = pickle.loads(conn.recv_bytes())
    except Exception:  # noqa: BLE001 - (no descriptor passing here, a helper that died)
        pass  # recorded by the caller
    finally:
        conn.close()
        # Not joined here: a helper that answered exits on its own (its memory takes a
        # moment to free), and multiprocessing reaps it; one that did not answer is stopped.
        if reply[0] != "ok" and process.is_alive():
            process.kill()
            process.join(timeout=5)
    return bool(reply[0] == "ok")


# A helper that is stopped (SIGSTOP, a debugger) this long is given up on; one that runs
# gets this long plus a generous time per rollout (it writes about 100,000 a second).
STOPPED_SECONDS = 5.0
BASE_SECONDS = 120.0
SECONDS_PER_ROLLOUT = 1e-3


def _answers_in_time(conn: Any, pid: int | None, count: int) -> bool:
    """Wait for the helper's reply under a deadline, like any call: False (the caller then
    records the run itself) when the helper is stopped for ``STOPPED_SECONDS`` or does not
    answer in time."""
    deadline = time.monotonic() + BASE_SECONDS + SECONDS_PER_ROLLOUT * count
    stopped_since: float | None = None
    while not conn.poll(0.2):
        now = time.monotonic()
        if now > deadline:
            return False
        if pid is not None and _is_stopped(pid):
            stopped_since = stopped_since if stopped_since is not None else now
            if now - stopped_since > STOPPED_SECONDS:
                return False
        else:
            stopped_since = None
    return True


def _is_stopped(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in (b"T", b"t")


def _scratch_folder(size: int) -> str | None:
    """Memory-backed /dev/shm where there is one with room to spare (the file never reaches a
    disk; containers often give it only 64 MB), else the usual temporary folder."""
    try:
        free = os.statvfs("/dev/shm")
    except OSError:
        return None
    room = free.f_bavail * free.f_frsize
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) and room > 2 * size else None


def _lowest_priority() -> None:
    """Nice 19: the helper gives way to the scoring, yet always makes some progress (the idle
    policy could starve it for as long as every core is busy)."""
    with contextlib.suppress(OSError, AttributeError):  # (no nice outside Unix)
        os.nice(19)


def _record(conn: Any) -> None:
    """The helper: one run's rollouts in, written as pending blocks."""
    from multiprocessing import reduction

    _lowest_priority()
    try:
        scratch = os.fdopen(reduction.recv_handle(conn), "rb")
        scratch.seek(0)
        path, run_id, count, chunk = pickle.load(scratch)
    except (EOFError, OSError):
        return
    try:
        rows: list[list[Any]] = []
        with scratch:
            for start in range(0, count, chunk):  # compressed now, written later
                rows.append(field_block_row(run_id, start, pickle.load(scratch)))
        try:
            keys = pickle.loads(conn.recv_bytes())  # the word to write
        except (EOFError, OSError):
            keys = None  # the caller is gone (killed): its run is still better off with them
        if keys is not None and len(keys) == count:
            for row in rows:
                if row[4] == NO_KEYS:
                    row[4] = json.dumps(keys[row[1]:row[1] + chunk])
        db = connect(path, what="store", wal=False)
        try:
            # As the store's own connections (the file is in WAL mode): a killed process loses
            # nothing, and the commit does not wait for the disk to flush ~400 bytes a rollout.
            db.execute("PRAGMA synchronous = NORMAL")
            # Room for the whole transaction in the page cache (a cap, not an allocation):
            # pages spilled to the log mid-transaction are written twice.
            db.execute("PRAGMA cache_size = -262144")
            db.execute("BEGIN IMMEDIATE")
            try:
                write_rollout_rows(db, rows)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()
        reply: tuple[Any, ...] = ("ok",)
    except Exception as exc:  # noqa: BLE001 - the caller records the run itself
        reply = ("error", f"{type(exc).__name__}: {exc}")
    with contextlib.suppress(EOFError, OSError):
        conn.send_bytes(pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL))
