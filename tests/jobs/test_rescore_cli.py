"""The store on the command line: ``score --store``, ``rescore`` (and ``--dry-run``), ``runs``
and ``import-scores``; Parquet in and out; importing scored files made elsewhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_rescore import base_rubric, calls, component, make_rollouts
from typer.testing import CliRunner

from rewardsmith import ConfigError, InputError, Rubric, ScoreJob
from rewardsmith.cli import app
from rewardsmith.files.parquet import read_scores_parquet, write_rollouts_parquet
from rewardsmith.files.scored import read_scores
from rewardsmith.jobs.recording import import_scores
from rewardsmith.jobs.rescore import rescore
from rewardsmith.store import Store

runner = CliRunner()


def write_rubric(path: Path, rubric: dict[str, object]) -> Path:
    path.write_text(json.dumps(rubric))  # JSON is YAML
    return path


def write_rollouts_jsonl(path: Path) -> Path:
    with path.open("w") as handle:
        for rollout in make_rollouts():
            handle.write(json.dumps(rollout.to_dict()) + "\n")
    return path


def test_score_store_rescore_dry_run_and_runs(tmp_path: Path) -> None:
    log, db = tmp_path / "calls.log", tmp_path / "run.db"
    rollouts = write_rollouts_jsonl(tmp_path / "r.jsonl")
    v1 = write_rubric(tmp_path / "v1.yaml", base_rubric(log))
    done = runner.invoke(app, ["score", str(rollouts), "-r", str(v1), "-o",
                               str(tmp_path / "v1.jsonl"), "--store", str(db), "-w", "0", "-q"])
    assert done.exit_code == 0, done.output
    assert calls(log) == 32

    changed = base_rubric(log)
    changed["components"]["short"]["params"]["limit"] = 10
    v2 = write_rubric(tmp_path / "v2.yaml", changed)
    dry = runner.invoke(app, ["rescore", "--store", str(db), "-r", str(v2), "--dry-run",
                              "--json"])
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.output)["plan"]
    assert [(c["name"], c["reused"], c["compute"]) for c in plan["components"]] == [
        ("format", 16, 0), ("short", 0, 16)]
    assert calls(log) == 32

    out = tmp_path / "v2.jsonl"
    done = runner.invoke(app, ["rescore", "--store", str(db), "-r", str(v2), "-o", str(out),
                               "-w", "0"])
    assert done.exit_code == 0, done.output
    assert "16 reward function calls made" in done.output
    assert calls(log) == 48 and len(read_scores(out)) == 16

    listed = runner.invoke(app, ["runs", "--store", str(db), "--json"])
    assert [r["kind"] for r in json.loads(listed.output)] == ["score", "rescore"]


def test_store_is_on_by_default_and_no_store_turns_it_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "calls.log"
    rollouts = write_rollouts_jsonl(tmp_path / "r.jsonl")
    v1 = write_rubric(tmp_path / "v1.yaml", base_rubric(log))
    done = runner.invoke(app, ["score", str(rollouts), "-r", str(v1), "-o", "a.jsonl",
                               "--no-store", "-w", "0", "-q"])
    assert done.exit_code == 0 and not (tmp_path / "rewardsmith.db").exists()
    done = runner.invoke(app, ["score", str(rollouts), "-r", str(v1), "-o", "a.jsonl", "-w",
                               "0", "-q"])
    assert done.exit_code == 0 and (tmp_path / "rewardsmith.db").exists()
    done = runner.invoke(app, ["score", str(rollouts), "-r", str(v1), "-o", "b.jsonl", "-w",
                               "0", "-q"])
    assert calls(log) == 32 * 2  # the third run was answered from ./rewardsmith.db
    assert read_scores(tmp_path / "a.jsonl") == read_scores(tmp_path / "b.jsonl")


def test_rescore_errors_name_what_is_wrong(tmp_path: Path) -> None:
    v1 = write_rubric(tmp_path / "v1.yaml", base_rubric(tmp_path / "calls.log"))
    missing = runner.invoke(app, ["rescore", "--store", str(tmp_path / "none.db"), "-r",
                                  str(v1), "-o", "x.jsonl"])
    assert missing.exit_code == 2 and "no store at" in missing.output
    no_output = runner.invoke(app, ["rescore", "-r", str(v1)])
    assert no_output.exit_code == 2 and "missing --output" in no_output.output


def test_parquet_in_and_out_of_score(tmp_path: Path) -> None:
    log, db = tmp_path / "calls.log", tmp_path / "run.db"
    rollouts = tmp_path / "r.parquet"
    write_rollouts_parquet(rollouts, make_rollouts())
    v1 = write_rubric(tmp_path / "v1.yaml", base_rubric(log))
    out = tmp_path / "s.parquet"
    done = runner.invoke(app, ["score", str(rollouts), "-r", str(v1), "-o", str(out),
                               "--store", str(db), "-w", "0", "-q"])
    assert done.exit_code == 0, done.output
    scores = read_scores_parquet(out)
    assert [s.id for s in scores] == [r.id for r in make_rollouts()]
    result = rescore(db, Rubric.from_dict({**base_rubric(log), "name": "again"}))
    assert result.reward_calls == 0
    assert [s.to_dict() for s in result.scores] == [s.to_dict() for s in scores]


def test_import_scores_made_elsewhere_then_rescore_for_free(tmp_path: Path) -> None:
    log, db = tmp_path / "calls.log", tmp_path / "run.db"
    rollouts = make_rollouts()
    rubric = base_rubric(log)
    elsewhere = ScoreJob(Rubric.from_dict(rubric), workers=0).run_rollouts(rollouts).scores
    assert calls(log) == 32
    # A trainer's table: rollout fields and score fields on one line.
    combined = tmp_path / "combined.jsonl"
    with combined.open("w") as handle:
        for rollout, score in zip(rollouts, elsewhere, strict=True):
            handle.write(json.dumps({**rollout.to_dict(), **score.to_dict()}) + "\n")
    v1 = write_rubric(tmp_path / "v1.yaml", rubric)
    done = runner.invoke(app, ["import-scores", str(combined), "-r", str(v1), "--store",
                               str(db), "--json"])
    assert done.exit_code == 0, done.output
    imported = json.loads(done.output)
    assert imported["imported"] == {"format": 16, "short": 16}

    rubric["components"]["format"]["weight"] = 2.0
    rubric["components"]["correct"] = component("counted_answer", log)
    result = rescore(db, Rubric.from_dict(rubric), workers=0)
    assert calls(log) == 32 + 16 and calls(log, "answer") == 16  # only the new component
    with Store(db) as store:
        assert store.members(imported["run_id"]).keys == [r.content_key() for r in rollouts]
    assert result.scores[0].components["format"] == elsewhere[0].components["format"]


def test_import_scores_rejects_what_does_not_match(tmp_path: Path) -> None:

    rollouts = make_rollouts()
    rubric = Rubric.from_dict(base_rubric(tmp_path / "calls.log"))
    scores = ScoreJob(rubric, workers=0).run_rollouts(rollouts).scores
    with pytest.raises(InputError, match="has no rollout with that id"):
        import_scores(tmp_path / "s.db", scores, rubric, rollouts=rollouts[:3])
    other = Rubric.from_dict({"components": {"format": base_rubric(tmp_path / "x")[
        "components"]["format"]}})
    with pytest.raises(ConfigError, match="'short'"):
        import_scores(tmp_path / "s.db", scores, other, rollouts=rollouts)
