"""Rescoring stored rollouts: what is reused and what is computed, counted call by call."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import Rollout, Rubric, ScoreJob, Status, score_rollouts
from rewardsmith.advantages import apply_advantages
from rewardsmith.files.parquet import read_scores_parquet
from rewardsmith.files.scored import read_scores
from rewardsmith.jobs.rescore import rescore
from rewardsmith.store import Store

HELPERS = Path(__file__).parent.parent / "rescore_rewards.py"


def make_rollouts(groups: int = 4, size: int = 4) -> list[Rollout]:
    out = []
    for g in range(groups):
        for s in range(size):
            marker = " #### " if (g + s) % 3 else " "
            text = f"group {g} sample {s}:" + " step" * (s * 3) + f"{marker}{g + s}"
            out.append(Rollout(f"r{g}-{s}", f"q{g}", f"question {g}", text, str(g + s)))
    return out


def component(func: str, log: Path, weight: float = 1.0, **params: Any) -> dict[str, Any]:
    return {"reward": f"{HELPERS}:{func}", "weight": weight, "params": {"log": str(log), **params}}


def base_rubric(log: Path, **extra: Any) -> dict[str, Any]:
    return {"name": "v1", "components": {
        "format": component("counted_marker", log, 0.5),
        "short": component("counted_length", log, 1.0),
    }, **extra}


def calls(log: Path, kind: str | None = None) -> int:
    if not log.exists():
        return 0
    lines = log.read_text().splitlines()
    return len([line for line in lines if kind is None or line.startswith(kind + " ")])


@pytest.fixture
def scored(tmp_path: Path) -> tuple[Path, Path, list[Rollout]]:
    """A store holding one scored run of 16 rollouts (two components: 32 calls)."""
    log, db = tmp_path / "calls.log", tmp_path / "run.db"
    rollouts = make_rollouts()
    ScoreJob(Rubric.from_dict(base_rubric(log)), workers=0, store=str(db)).run_rollouts(rollouts)
    assert calls(log) == 32
    return log, db, rollouts


def expected_scores(rubric: dict[str, Any], rollouts: list[Rollout]) -> list[dict[str, Any]]:
    scores = score_rollouts(Rubric.from_dict(rubric), rollouts, workers=0)
    apply_advantages(scores, method="grpo")
    return [s.to_dict() for s in scores]


def test_new_name_weights_formula_and_gate_call_nothing(scored: tuple[Path, Path, list[Rollout]],
                                                         tmp_path: Path) -> None:
    log, db, rollouts = scored
    new = base_rubric(log, name="v2", formula="2 * format - short")
    new["components"]["short"]["weight"] = 3.0
    new["components"]["format"]["requires"] = "short"
    result = rescore(db, Rubric.from_dict(new), output=tmp_path / "v2.jsonl")
    assert calls(log) == 32  # not one reward call
    assert result.reward_calls == 0
    assert [(c.reused, c.compute) for c in result.plan.components] == [(16, 0), (16, 0)]
    written = [s.to_dict() for s in read_scores(tmp_path / "v2.jsonl")]
    assert written == [s.to_dict() for s in result.scores]
    assert written == expected_scores(new, rollouts)  # exactly what scoring afresh gives
    with Store(db) as store:
        runs = store.runs()
        assert [r.kind for r in runs] == ["score", "rescore"]
        assert runs[1].status == "done" and runs[1].parent == runs[0].id


def test_changed_params_rerun_only_that_component(scored: tuple[Path, Path, list[Rollout]],
                                                  tmp_path: Path) -> None:
    log, db, rollouts = scored
    new = base_rubric(log)
    new["components"]["format"]["params"]["marker"] = "step"
    out = tmp_path / "v2.parquet"
    result = rescore(db, Rubric.from_dict(new), workers=1, output=out)  # real worker process
    assert calls(log, "marker") == 16 + 16 and calls(log, "length") == 16
    assert [(c.name, c.reused, c.compute) for c in result.plan.components] == [
        ("format", 0, 16), ("short", 16, 0)]
    assert [s.to_dict() for s in read_scores_parquet(out)] == expected_scores(new, rollouts)
    again = rescore(db, Rubric.from_dict(new), workers=1)
    assert again.reward_calls == 0 and calls(log, "marker") == 32 + 16  # the +16: expected_scores


def test_a_new_component_computes_only_itself(scored: tuple[Path, Path, list[Rollout]]) -> None:
    log, db, _ = scored
    new = base_rubric(log)
    new["components"]["correct"] = component("counted_answer", log, 2.0)
    result = rescore(db, Rubric.from_dict(new), workers=0)
    assert calls(log, "answer") == 16 and calls(log) == 32 + 16
    assert result.reward_calls == 16
    assert [c.compute for c in result.plan.components] == [0, 0, 16]


def test_dry_run_spends_nothing_and_records_nothing(scored: tuple[Path, Path, list[Rollout]],
                                                    tmp_path: Path) -> None:
    log, db, _ = scored
    new = base_rubric(log)
    new["components"]["short"]["params"]["limit"] = 10
    out = tmp_path / "never.jsonl"
    result = rescore(db, Rubric.from_dict(new), dry_run=True, output=out)
    assert result.dry_run and result.run_id is None and result.scores == []
    assert [(c.reused, c.compute) for c in result.plan.components] == [(16, 0), (0, 16)]
    assert result.plan.groups_to_score == 4 and result.plan.judge_calls == 0
    assert calls(log) == 32 and not out.exists()
    with Store(db) as store:
        assert len(store.runs()) == 1


def test_group_rewards_are_reused_when_their_group_is(tmp_path: Path) -> None:
    log, db = tmp_path / "calls.log", tmp_path / "run.db"
    rubric = base_rubric(log)
    rubric["components"]["shortest"] = component("counted_shortest", log)
    rollouts = make_rollouts()
    ScoreJob(Rubric.from_dict(rubric), workers=0, store=str(db)).run_rollouts(rollouts)
    assert calls(log, "group") == 4
    rubric["components"]["shortest"]["weight"] = 5.0
    result = rescore(db, Rubric.from_dict(rubric), workers=0)
    assert calls(log, "group") == 4 and result.reward_calls == 0
    assert [s.to_dict() for s in result.scores] == expected_scores(rubric, rollouts)


def test_failures_are_computed_again_and_only_they(tmp_path: Path) -> None:
    log, db = tmp_path / "calls.log", tmp_path / "run.db"
    rollouts = make_rollouts()
    rollouts[5].completion = "boom"
    rubric = {"name": "v1", "components": {"crash": component("counted_crash", log)},
              "on_error": -1.0}
    first = ScoreJob(Rubric.from_dict(rubric), workers=1, store=str(db)).run_rollouts(rollouts)
    assert first.scores[5].status is Status.ERROR and calls(log) == 16
    result = rescore(db, Rubric.from_dict({**rubric, "name": "v2"}), workers=1)
    assert calls(log) == 17 and result.reward_calls == 1  # only the failed rollout
    assert result.scores[5].status is Status.ERROR and result.scores[5].reward == -1.0


def test_an_unknown_run_or_an_empty_store_is_a_clear_error(tmp_path: Path) -> None:
    from rewardsmith import StoreError

    rubric = Rubric.from_dict(base_rubric(tmp_path / "calls.log"))
    with pytest.raises(StoreError, match="holds no runs yet"):
        rescore(tmp_path / "empty.db", rubric)
    with pytest.raises(StoreError, match="not in this store"):
        rescore(tmp_path / "empty.db", rubric, run="score-123")


KILLABLE = textwrap.dedent("""
    import json, sys
    from rewardsmith import Rubric
    from rewardsmith.jobs.rescore import rescore
    rescore(sys.argv[1], Rubric.from_dict(json.loads(sys.argv[2])), workers=0)
""")


def test_a_rescore_killed_with_sigkill_resumes_without_redoing_finished_work(
        tmp_path: Path) -> None:
    log, db = tmp_path / "calls.log", tmp_path / "run.db"
    rollouts = make_rollouts(groups=256, size=16)  # 4,096 rollouts: four engine batches
    ScoreJob(Rubric.from_dict(base_rubric(log)), workers=0, store=str(db)).run_rollouts(rollouts)
    log.unlink()
    slow = base_rubric(log)
    slow["components"]["format"]["params"]["delay"] = 0.0003
    identity = Rubric.from_dict(slow).components[0].identity()
    child = subprocess.Popen([sys.executable, "-c", KILLABLE, str(db), json.dumps(slow)],
                             stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while stored_results(db, identity) == 0 and child.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)  # as soon as the first finished batches are stored
    child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL, "the rescore ended before it was killed"
    computed_before_kill = calls(log)
    with sqlite3.connect(db) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    plan = rescore(db, Rubric.from_dict(slow), dry_run=True).plan
    stored = plan.components[0].reused
    assert 1024 <= stored < 4096 and stored + plan.components[0].compute == 4096
    assert computed_before_kill >= stored

    resumed = rescore(db, Rubric.from_dict(slow), workers=0)
    assert resumed.reward_calls == 4096 - stored  # nothing that finished is done again
    assert calls(log) == computed_before_kill + 4096 - stored
    assert calls(log, "length") == 0
    with Store(db) as store:
        assert [r.status for r in store.runs()] == ["done", "killed", "done"]  # its process died
    assert rescore(db, Rubric.from_dict(slow), dry_run=True).plan.computes_nothing


def stored_results(db: Path, identity: str) -> int:
    """Results of ``identity`` stored so far: rows, and cells in pending blocks."""
    with sqlite3.connect(db) as raw:
        row = raw.execute("SELECT count(*) FROM store_results r JOIN store_components c "
                          "ON c.id = r.component WHERE c.identity = ?", (identity,)).fetchone()
        pending = raw.execute("SELECT coalesce(sum(length(p.vals)), 0) / 8 FROM "
                              "store_pending_results p JOIN store_components c "
                              "ON c.id = p.component WHERE c.identity = ?", (identity,)).fetchone()
    return int(row[0]) + int(pending[0])
