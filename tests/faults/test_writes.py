"""Writing the results: a full disk is a clear error naming the file, and nothing that fails
after scoring costs the scores.

Before: a full disk while writing ``-o`` was a traceback with exit 1 (which means "too many
errors"); a trainer check that failed after scoring (1,000,000 rollouts in one group asked for
terabytes) discarded the complete output.
"""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

REWARDS = Path(__file__).parent / "fixtures" / "long_run_rewards.py"
CLI = [sys.executable, "-m", "rewardsmith"]


def rollouts(path: Path, count: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"r{i}", "prompt": f"p{i // 4}",
                                        "completion": f"ok:{i}"}) + "\n"
                            for i in range(count)), encoding="utf-8")
    return path


def test_a_full_disk_while_writing_the_output_is_exit_2_naming_the_file(tmp_path: Path) -> None:
    data = rollouts(tmp_path / "in.jsonl", 3000)  # about 90 kB of input, more of output
    out = tmp_path / "scored.jsonl"
    out.write_text("the old results\n", encoding="utf-8")

    def small_disk() -> None:
        # Files may not grow past 40 kB: writes past it fail as on a full disk (EFBIG).
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, 40_000))

    run = subprocess.run(
        [*CLI, "score", str(data), "--reward", f"{REWARDS}:misbehave", "--workers", "0",
         "--no-store", "-o", str(out), "-q"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, preexec_fn=small_disk)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert "cannot write" in run.stderr and "scored.jsonl" in run.stderr
    assert out.read_text(encoding="utf-8") == "the old results\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "scored.jsonl"]


CHECK_FAILS = """
import sys
import rewardsmith.advantages as advantages

def check_trainers(*args, **kwargs):
    raise MemoryError("the check asked for more memory than there is")

advantages.check_trainers = check_trainers
sys.argv = ["rewardsmith", *sys.argv[1:]]
from rewardsmith.cli import main
main()
"""


def test_a_check_that_fails_after_scoring_keeps_the_scores(tmp_path: Path) -> None:
    data = rollouts(tmp_path / "in.jsonl", 200)
    out = tmp_path / "scored.jsonl"
    run = subprocess.run(
        [sys.executable, "-c", CHECK_FAILS, "score", str(data), "--reward",
         f"{REWARDS}:misbehave", "--workers", "0", "--no-store", "-o", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "trainer check failed after scoring" in run.stderr
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["id"] for line in lines] == [f"r{i}" for i in range(200)]


def test_a_full_disk_while_writing_a_parquet_output_is_exit_2_naming_the_file(
        tmp_path: Path) -> None:
    data = rollouts(tmp_path / "in.jsonl", 3000)
    out = tmp_path / "scored.parquet"
    out.write_bytes(b"the old results")

    def small_disk() -> None:
        # The Parquet file of 3,000 scores is about 30 kB: it may not pass 10 kB (EFBIG).
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (10_000, 10_000))

    run = subprocess.run(
        [*CLI, "score", str(data), "--reward", f"{REWARDS}:misbehave", "--workers", "0",
         "--no-store", "-o", str(out), "-q"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, preexec_fn=small_disk)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert f"cannot write '{out}': File too large" in run.stderr, run.stderr
    assert "Detail" not in run.stderr  # the system's words once, not Arrow's wrapping
    assert out.read_bytes() == b"the old results"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "scored.parquet"]
