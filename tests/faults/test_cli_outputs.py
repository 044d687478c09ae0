"""Outputs the user owns: replaced only by a complete new file, never by a failed or stopped
run, and never when the output is one of the inputs.

Before: a failing run truncated an existing ``-o`` file to 0 bytes, ``score x.jsonl -o
x.jsonl`` destroyed its input and exited 0, and a run stopped by Ctrl-C or SIGTERM stayed
``running`` in ``rewardsmith runs`` forever.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "rewardsmith"]
PRECIOUS = '{"id": "kept", "note": "scores from last week"}\n'

SLOW_REWARD = """
import os, time
from pathlib import Path

def score(completion):
    marker = os.environ.get("SLOW_MARKER")
    if marker:
        Path(marker).touch()
    time.sleep(0.05)
    return 1.0
"""


def cli(*args: str | Path, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def rollouts_file(path: Path, count: int, *, bad_line: int | None = None) -> Path:
    lines = [json.dumps({"id": f"r{i}", "prompt": f"q{i // 4}", "completion": "#### 4",
                         "answer": "4"}) for i in range(count)]
    if bad_line is not None:
        lines[bad_line - 1] = "{not json"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def score_into_store(rollouts: Path, rubric: Path, store: Path, scored: Path) -> None:
    """The setup of a test about something else: scored in this process, no CLI start-up."""
    from rewardsmith import Rubric, ScoreJob

    with scored.open("w", encoding="utf-8") as handle:
        ScoreJob(Rubric.from_yaml(rubric), workers=0, store=str(store)).run(rollouts, handle)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def run_statuses(store: Path) -> list[str]:
    with sqlite3.connect(store) as db:
        return [row[0] for row in db.execute("SELECT status FROM store_runs ORDER BY created")]


def test_a_failing_run_leaves_the_old_output_untouched(tmp_path: Path) -> None:
    out = tmp_path / "scored.jsonl"
    out.write_text(PRECIOUS, encoding="utf-8")
    rollouts = rollouts_file(tmp_path / "r.jsonl", 8, bad_line=5)
    done = cli("score", rollouts, "--reward", "gsm8k", "-o", out, "--workers", "0",
               cwd=tmp_path)
    assert done.returncode == 2 and "r.jsonl:5: not valid JSON" in done.stderr
    assert out.read_text(encoding="utf-8") == PRECIOUS
    assert leftovers(tmp_path) == []


def test_a_corrupt_store_leaves_the_old_output_untouched(tmp_path: Path) -> None:
    out = tmp_path / "scored.jsonl"
    out.write_text(PRECIOUS, encoding="utf-8")
    store = tmp_path / "junk.db"
    store.write_bytes(b"not a database " * 200)
    done = cli("score", rollouts_file(tmp_path / "r.jsonl", 4), "--reward", "gsm8k", "-o", out,
               "--store", store, "--workers", "0", cwd=tmp_path)
    assert done.returncode == 2 and "not a readable rewardsmith store" in done.stderr
    assert out.read_text(encoding="utf-8") == PRECIOUS and leftovers(tmp_path) == []


def test_a_successful_run_replaces_the_output_and_keeps_its_permissions(tmp_path: Path) -> None:
    out = tmp_path / "scored.jsonl"
    out.write_text(PRECIOUS, encoding="utf-8")
    out.chmod(0o640)
    link = tmp_path / "latest.jsonl"
    link.symlink_to(out.name)
    done = cli("score", rollouts_file(tmp_path / "r.jsonl", 4), "--reward", "gsm8k", "-o", link,
               "--no-store", "--workers", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert link.is_symlink()  # the link's target was replaced, not the link
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == \
        ["r0", "r1", "r2", "r3"]
    assert out.stat().st_mode & 0o777 == 0o640 and leftovers(tmp_path) == []


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stopped_run_leaves_the_output_and_is_marked_interrupted(
        tmp_path: Path, signum: int, code: int) -> None:
    (tmp_path / "slow.py").write_text(SLOW_REWARD, encoding="utf-8")
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text("components:\n  slow: {reward: slow.py:score}\n", encoding="utf-8")
    out = tmp_path / "scored.jsonl"
    out.write_text(PRECIOUS, encoding="utf-8")
    marker = tmp_path / "started"
    store = tmp_path / "run.db"
    child = subprocess.Popen(
        [*CLI, "score", str(rollouts_file(tmp_path / "r.jsonl", 400)), "--rubric", str(rubric),
         "-o", str(out), "--store", str(store), "--workers", "0"],
        cwd=tmp_path, env={**os.environ, "SLOW_MARKER": str(marker)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # A test run started in the background inherits SIGINT ignored, as shells set it for
        # background jobs; the CLI rightly keeps it so. Here it must be the default.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert child.poll() is None, child.communicate()[1]
        child.send_signal(signum)
        _, stderr = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == code, stderr
    assert out.read_text(encoding="utf-8") == PRECIOUS and leftovers(tmp_path) == []
    assert run_statuses(store) == ["interrupted"]
    listed = cli("runs", "--store", store, "--json", cwd=tmp_path)
    assert [run["status"] for run in json.loads(listed.stdout)] == ["interrupted"]


def test_a_run_killed_with_sigkill_reads_as_killed(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW_REWARD, encoding="utf-8")
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text("components:\n  slow: {reward: slow.py:score}\n", encoding="utf-8")
    marker = tmp_path / "started"
    store = tmp_path / "run.db"
    child = subprocess.Popen(
        [*CLI, "score", str(rollouts_file(tmp_path / "r.jsonl", 400)), "--rubric", str(rubric),
         "-o", str(tmp_path / "out.jsonl"), "--store", str(store), "--workers", "0"],
        cwd=tmp_path, env={**os.environ, "SLOW_MARKER": str(marker)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()
    assert run_statuses(store) == ["running"]  # nothing could mark it: the process is gone
    listed = cli("runs", "--store", store, "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    [run] = json.loads(listed.stdout)
    assert run["status"] == "killed" and run["pid"] == child.pid
    assert "killed" in cli("runs", "--store", store, cwd=tmp_path).stdout


def test_a_running_run_of_a_live_process_stays_running(tmp_path: Path) -> None:
    from rewardsmith import Rollout
    from rewardsmith.store import Store

    with Store(tmp_path / "run.db") as store:
        run_id = store.begin_run([Rollout("1", "g", "q", "a")])
        assert store.get_run(run_id).status == "running"  # this very process runs it
    with sqlite3.connect(tmp_path / "run.db") as db:  # a pid reused by another process
        db.execute("UPDATE store_runs SET process_start = '1' WHERE id = ?", (run_id,))
    with Store(tmp_path / "run.db") as store:
        assert store.get_run(run_id).status == "killed"


def same_path(path: Path) -> Path:
    return path


def via_symlink(path: Path) -> Path:
    link = path.with_name("link-" + path.name)
    link.symlink_to(path.name)
    return link


def via_hard_link(path: Path) -> Path:
    link = path.with_name("hard-" + path.name)
    os.link(path, link)
    return link


@pytest.mark.parametrize("alias", [same_path, via_symlink, via_hard_link])
def test_score_refuses_to_write_over_its_input(tmp_path: Path, alias: object) -> None:
    rollouts = rollouts_file(tmp_path / "r.jsonl", 4)
    before = rollouts.read_bytes()
    output = alias(rollouts)  # type: ignore[operator]
    done = cli("score", rollouts, "--reward", "gsm8k", "-o", output, "--workers", "0",
               cwd=tmp_path)
    assert done.returncode == 2 and "would destroy the input" in done.stderr
    assert rollouts.read_bytes() == before
    assert not (tmp_path / "rewardsmith.db").exists()  # refused before anything was read


@pytest.mark.parametrize("alias", [same_path, via_symlink, via_hard_link])
def test_rescore_and_import_refuse_to_write_over_their_inputs(tmp_path: Path,
                                                               alias: object) -> None:
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text("components:\n  correct: {reward: gsm8k}\n", encoding="utf-8")
    store = tmp_path / "run.db"
    scored = tmp_path / "scored.jsonl"
    score_into_store(rollouts_file(tmp_path / "r.jsonl", 4), rubric, store, scored)
    store_bytes, scored_bytes = store.read_bytes(), scored.read_bytes()
    rescored = cli("rescore", "--store", store, "--rubric", rubric, "-o", alias(store),  # type: ignore[operator]
                   cwd=tmp_path)
    assert rescored.returncode == 2 and "would destroy the input" in rescored.stderr
    assert store.read_bytes() == store_bytes
    imported = cli("import-scores", scored, "--rubric", rubric, "--rollouts",
                   tmp_path / "r.jsonl", "--store", alias(scored), cwd=tmp_path)  # type: ignore[operator]
    assert imported.returncode == 2 and "would destroy the input" in imported.stderr
    assert scored.read_bytes() == scored_bytes


def test_parquet_output_is_replaced_only_when_complete(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    out = tmp_path / "scored.parquet"
    out.write_bytes(b"PAR1 last week's table")
    bad = cli("score", rollouts_file(tmp_path / "r.jsonl", 4, bad_line=2), "--reward", "gsm8k",
              "-o", out, "--no-store", "--workers", "0", cwd=tmp_path)
    assert bad.returncode == 2 and out.read_bytes() == b"PAR1 last week's table"
    good = cli("score", tmp_path / "r.jsonl", "--reward", "gsm8k", "-o", out, "--no-store",
               "--workers", "0", "--on-bad-line", "skip", "--max-error-rate", "1", cwd=tmp_path)
    assert good.returncode == 0, good.stderr
    import pyarrow.parquet as pq

    assert pq.read_table(out).num_rows == 3 and leftovers(tmp_path) == []
