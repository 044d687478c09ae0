"""``score --log-to`` and ``rescore --log-to``: the run's statistics as one tracker step,
through the real CLI, read back with TensorBoard's own reader."""

from __future__ import annotations

import glob
import json
import subprocess
import sys
from pathlib import Path

from test_tracking_trackers import tensorboard_scalars


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rewardsmith", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_score_and_rescore_log_one_step_each(tmp_path: Path) -> None:
    rollouts = tmp_path / "r.jsonl"
    rollouts.write_text("".join(
        json.dumps({"id": f"r{i}", "group": f"g{i // 2}", "prompt": "p",
                    "completion": f"#### {i % 2}", "answer": "1"}) + "\n" for i in range(8)))
    rubric = tmp_path / "v1.yaml"
    rubric.write_text("components:\n  correct: {reward: gsm8k}\n")
    scored = _cli("score", str(rollouts), "-r", str(rubric), "-o", "-", "--store", "s.db",
                  "--log-to", "tensorboard", "--log-dir", "tb", "--log-run", "first",
                  "--timing", cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr
    assert all(json.loads(line)["id"] for line in scored.stdout.splitlines())  # stdout clean
    (first,) = glob.glob(str(tmp_path / "tb" / "first*"))
    scalars = tensorboard_scalars(Path(first))
    assert scalars["components/correct/mean"] == [(0, 0.5)]
    assert scalars["groups/zero_variance"] == [(0, 0.0)]
    assert any(tag.startswith("latency/correct/") for tag in scalars)  # from --timing

    rubric2 = tmp_path / "v2.yaml"
    rubric2.write_text("components:\n  correct: {reward: gsm8k}\n"
                       "  format: {reward: marker, weight: 0.5}\n")
    rescored = _cli("rescore", "--store", "s.db", "-r", str(rubric2), "-o", "v2.jsonl",
                    "--log-to", "tensorboard", "--log-dir", "tb", "--log-run", "second",
                    "--log-step", "1", "-q", cwd=tmp_path)
    assert rescored.returncode == 0, rescored.stderr
    (second,) = glob.glob(str(tmp_path / "tb" / "second*"))
    scalars = tensorboard_scalars(Path(second))
    assert scalars["components/format/mean"] == [(1, 1.0)] and scalars["reward/mean"] == [(1, 1.0)]
