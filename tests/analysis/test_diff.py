"""``diff`` on a small example worked out by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardsmith import InputError, Rollout, Score, Status
from rewardsmith.analysis.diff import diff_files, diff_scores, spearman
from rewardsmith.cli import app
from rewardsmith.files.parquet import write_rollouts_any, write_scores_any
from rewardsmith.files.scored import write_scores
from rewardsmith.store import Store

# (id, group, old reward, new reward, old advantage, new advantage)
ROWS = [
    ("a", "g1", 1.0, 1.0, 0.5, -0.5),   # g1: old order b < c < a, new c < b < a: rho 0.5
    ("b", "g1", 0.0, 0.5, 0.0, 0.7),
    ("c", "g1", 0.5, 0.0, 0.4, 0.0),
    ("d", "g2", 1.0, 1.0, None, None),  # g2: equal before, not after
    ("e", "g2", 1.0, 0.0, None, None),
    ("f", "g3", 0.2, 0.8, None, None),  # g3: not equal before, equal after
    ("g", "g3", 0.8, 0.8, None, None),
    ("h", "g4", 1.0, 0.5, None, None),  # g4: ties; the order is reversed: rho -1
    ("i", "g4", 1.0, 0.5, None, None),
    ("j", "g4", 0.0, 1.0, None, None),
    ("k", "g5", 0.3, None, None, None),  # masked in the new file
]


def scores(new: bool) -> list[Score]:
    out = []
    for rollout_id, group, old_reward, new_reward, old_adv, new_adv in ROWS:
        reward, advantage = (new_reward, new_adv) if new else (old_reward, old_adv)
        status = Status.OK if reward is not None else Status.MASKED
        out.append(Score(rollout_id, group, reward, status, {"x": reward}, advantage=advantage))
    if not new:
        out.append(Score("z", "g6", 0.0, Status.OK, {"x": 0.0}))  # only in the old file
    return out


def test_the_figures_of_a_hand_worked_example() -> None:
    report = diff_scores(scores(False), scores(True), top=3)
    assert (report.matched, report.only_old, report.only_new) == (11, 1, 0)
    reward, x = report.components
    assert reward.name == "reward" and x.name == "x"
    # old: 12 rewards, sum 6.8, sum of squares 6.02; new: 10 rewards, sum 6.1, squares 5.03
    assert reward.old_mean == pytest.approx(6.8 / 12) and reward.new_mean == pytest.approx(0.61)
    assert reward.old_std == pytest.approx(math.sqrt((6.02 - 6.8**2 / 12) / 12))
    assert reward.new_std == pytest.approx(math.sqrt((5.03 - 6.1**2 / 10) / 10))
    assert reward.delta == pytest.approx(0.61 - 6.8 / 12)
    assert (reward.old_count, reward.new_count) == (12, 10)
    assert x.to_dict() == pytest.approx(reward.to_dict() | {"name": "x"})
    assert report.rank_correlation == pytest.approx((0.5 - 1.0) / 2)
    assert (report.groups_ranked, report.groups_constant) == (2, 2)  # g2 and g3 not ranked
    assert report.became_constant == ["g3"] and report.became_varied == ["g2"]
    assert report.status_changes == {"ok -> masked": 1}
    assert [m.id for m in report.movers] == ["e", "j", "f"]
    assert [m.delta for m in report.movers] == pytest.approx([-1.0, 1.0, 0.6])
    assert report.advantages is not None
    assert report.advantages.to_dict() == pytest.approx({
        "rollouts": 3, "mean_abs_delta": 0.7, "max_abs_delta": 1.0, "sign_flips": 1,
        "became_zero": 1, "became_nonzero": 1})


def test_spearman_with_ties_and_constant_sides() -> None:
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 0, 0.5], [1, 0.5, 0]) == pytest.approx(0.5)
    assert spearman([1, 1, 0], [0.5, 0.5, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1], [0, 1]) is None and spearman([0, 1], [2, 2]) is None
    assert spearman([1], [1]) is None


def test_duplicate_ids_are_refused() -> None:
    twice = [Score("a", "g", 1.0), Score("a", "g", 0.0)]
    with pytest.raises(InputError, match="'a' appears twice in the old run"):
        diff_scores(twice, twice)


def test_files_parquet_and_completions_from_a_store_or_a_file(tmp_path: Path) -> None:
    old, new = tmp_path / "old.jsonl", tmp_path / "new.parquet"
    write_scores(old, scores(False))
    write_scores_any(new, scores(True))
    rollouts = [Rollout(r[0], r[1], "p", f"\n  answer of {r[0]}\nmore") for r in ROWS]
    write_rollouts_any(tmp_path / "r.jsonl", rollouts)
    with Store(tmp_path / "run.db") as store:
        store.begin_run(rollouts)
    from_store = diff_files(old, new, top=2, store=tmp_path / "run.db")
    from_file = diff_files(old, new, top=2, rollouts=tmp_path / "r.jsonl")
    assert [m.first_line for m in from_store.movers] == ["answer of e", "answer of j"]
    assert from_file.to_dict() == from_store.to_dict()

    shown = CliRunner().invoke(app, ["diff", str(old), str(new), "--rollouts",
                                     str(tmp_path / "r.jsonl"), "--top", "2"])
    assert shown.exit_code == 0, shown.output
    assert "answer of e" in shown.output and "rank correlation" in shown.output
    as_json = CliRunner().invoke(app, ["diff", str(old), str(new), "--json"])
    assert json.loads(as_json.output)["became_constant"] == ["g3"]
