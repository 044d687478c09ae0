"""The store file deleted or replaced during a run is found before the run reports success.

Before: ``rewardsmith score`` exited 0 while the results it recorded were gone with the file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REWARDS = Path(__file__).parent / "fixtures" / "long_run_rewards.py"
CLI = [sys.executable, "-m", "rewardsmith"]


@pytest.mark.parametrize("how", ["delete", "replace"])
def test_a_store_deleted_or_replaced_during_the_run_fails_it(tmp_path: Path, how: str) -> None:
    store = tmp_path / "runs.db"
    data = tmp_path / "in.jsonl"
    texts = ["a", "b", how, "c"]
    data.write_text("".join(json.dumps({"id": f"r{i}", "prompt": "p", "completion": t}) + "\n"
                            for i, t in enumerate(texts)), encoding="utf-8")
    out = tmp_path / "scored.jsonl"
    run = subprocess.run(
        [*CLI, "score", str(data), "--reward", f"{REWARDS}:meddle", "-p", f"target={store}",
         "--workers", "0", "--store", str(store), "-o", str(out), "-q"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, (run.returncode, run.stderr)
    assert str(store) in run.stderr
    assert ("deleted" if how == "delete" else "replaced") in run.stderr
    # The scores themselves are not lost with the store.
    assert len(out.read_text(encoding="utf-8").splitlines()) == len(texts)
