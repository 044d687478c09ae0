"""How adapters choose the rubric and share one engine per rubric per process."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from rewardsmith import ConfigError, Rollout, Rubric
from rewardsmith.integrations import close_engines, engine_for, rubric_for
from rewardsmith.integrations.adapters import consecutive_groups


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("REWARDSMITH_WORKERS", "0")
    monkeypatch.delenv("REWARDSMITH_RUBRIC", raising=False)
    yield
    close_engines()


def test_the_sample_beats_the_code_which_beats_the_environment(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("name: from-file\ncomponents:\n  a: {reward: exact}\n")
    monkeypatch.setenv("REWARDSMITH_RUBRIC", str(path))
    assert rubric_for().name == "from-file"
    assert rubric_for("number").name == "number"
    assert rubric_for("number", "f1").name == "f1"
    mine = Rubric.single("choice")
    assert rubric_for(mine) is mine


def test_one_engine_per_rubric_per_process() -> None:
    first = engine_for("gsm8k")
    assert engine_for("gsm8k") is first
    assert engine_for("number") is not first
    close_engines()
    assert engine_for("gsm8k") is not first


def _child(conn: Connection, parent_engine_id: int) -> None:
    engine = engine_for("gsm8k")
    [score] = engine.score_group([Rollout("0", "g", "", "#### 4", "4")])
    conn.send((id(engine) != parent_engine_id, score.reward))
    conn.close()


def test_a_forked_child_gets_its_own_engine() -> None:
    parent = engine_for("gsm8k")
    parent.score_group([])  # start its loop thread, which a forked child does not inherit
    ctx = multiprocessing.get_context("fork")
    ours, theirs = ctx.Pipe()
    process = ctx.Process(target=_child, args=(theirs, id(parent)))
    process.start()
    # Reusing the parent's engine would hang: its loop thread does not exist in the child.
    try:
        assert ours.poll(30), "the forked child could not score"
        assert ours.recv() == (True, 1.0)
    finally:
        process.join(5)
        if process.is_alive():
            process.kill()


def test_bad_worker_count_and_empty_sample_rubric(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARDSMITH_WORKERS", "many")
    with pytest.raises(ConfigError, match="REWARDSMITH_WORKERS='many'"):
        engine_for("gsm8k")
    monkeypatch.setenv("REWARDSMITH_WORKERS", "0")
    assert rubric_for("number", "").name == "number"  # an empty column value means "none"
    with pytest.raises(ConfigError, match="not int"):
        rubric_for("number", 3)


def test_missing_rubric_file_names_the_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARDSMITH_RUBRIC", "/nowhere/rubric.yaml")
    with pytest.raises(ConfigError, match="REWARDSMITH_RUBRIC='/nowhere/rubric.yaml'.*does not"):
        rubric_for()


def test_consecutive_groups() -> None:
    assert consecutive_groups(["a", "a", "b", "b", "a"]) == ["g0", "g0", "g1", "g1", "g2"]
    assert consecutive_groups([]) == []
