"""Parquet and JSONL by extension: exact round trips, trainers' column names, clear errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardsmith import ConfigError, InputError, Rollout, Score, Status
from rewardsmith.files.parquet import (
    read_records,
    read_rollouts_any,
    read_scores_any,
    score_lines,
    write_rollouts_any,
    write_scores_any,
)
from rewardsmith.files.scored import score_line

ROLLOUTS = [
    Rollout("a", "g1", "What is 2+2?", "4 #### 4", "4"),
    Rollout("b", "g1", "What is 2+2?", [{"role": "assistant", "content": "five"}], 4,
            {"source": "x", "nested": {"k": [1, None]}}, True),
    Rollout("c", "g2", [{"role": "user", "content": "hi"}], "", None, {"other": 1.5}),
]
SCORES = [
    Score("a", "g1", 1.25, Status.OK, {"correct": 1.0, "format": 1.0}, advantage=0.5),
    Score("b", "g1", None, Status.MASKED, {"correct": None, "format": 0.0},
          {"correct": "abstained"}, {"correct.tokens": 3.0}, None),
    Score("c", "g2", -1.0, Status.ERROR, {"correct": None, "format": 1.0},
          {"correct": "ValueError: x"}, advantage=-0.5),
]


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_rollouts_round_trip_exactly(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"r{suffix}"
    assert write_rollouts_any(path, ROLLOUTS) == 3
    back = read_rollouts_any(path)
    assert back == ROLLOUTS
    assert [r.content_key() for r in back] == [r.content_key() for r in ROLLOUTS]


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_scores_round_trip(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"s{suffix}"
    assert write_scores_any(path, SCORES) == 3
    assert read_scores_any(path) == SCORES


def test_parquet_from_a_trainer_uses_the_jsonl_aliases(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "trainer.parquet"
    pq.write_table(pa.table({
        "prompt_id": [7, 7],
        "response": ["#### 3", "no idea"],
        "ground_truth": ["3", "3"],
        "finish_reason": ["stop", "length"],
        "data_source": ["gsm8k", "gsm8k"],
    }), path)
    rollouts = read_rollouts_any(path)
    assert [(r.id, r.group, r.completion, r.answer, r.truncated) for r in rollouts] == [
        ("1", "7", "#### 3", "3", False), ("2", "7", "no idea", "3", True)]
    assert rollouts[0].metadata == {"data_source": "gsm8k"}


def test_bad_rows_and_bad_files_are_named(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"completion": ["ok", None], "group": [[1], [2]]}), path)
    with pytest.raises(InputError, match="row 1: 'group' must be a string or number"):
        read_rollouts_any(path)
    skipped: list[InputError] = []
    assert read_rollouts_any(path, on_bad_line="skip", bad_lines=skipped) == []
    assert len(skipped) == 2
    text = tmp_path / "text.parquet"
    text.write_text("not parquet")
    with pytest.raises(InputError, match="cannot read as Parquet"):
        read_rollouts_any(text)
    with pytest.raises(InputError, match="no such file"):
        read_scores_any(tmp_path / "missing.parquet")
    lines = tmp_path / "x.jsonl"
    lines.write_text('{"a": 1}\n[1]\n')
    with pytest.raises(InputError, match=r"x.jsonl:2: expected a JSON object"):
        read_records(lines)


def test_missing_pyarrow_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'rewardsmith\[parquet\]'"):
        write_scores_any(tmp_path / "s.parquet", SCORES)
    write_scores_any(tmp_path / "s.jsonl", SCORES)  # JSONL needs nothing more


names = st.text(min_size=1, max_size=6)
numbers = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True),
                    st.integers(-5, 5))


@settings(max_examples=200, deadline=None)
@given(st.builds(
    Score, id=st.text(max_size=8), group=st.text(max_size=8), reward=numbers,
    status=st.sampled_from(list(Status)), components=st.dictionaries(names, numbers,
                                                                      max_size=3),
    errors=st.dictionaries(names, st.text(max_size=10), max_size=2),
    metrics=st.dictionaries(names, st.floats(), max_size=2), advantage=numbers))
def test_fast_lines_equal_the_generic_encoder(score: Score) -> None:
    line = score_lines([score])
    assert line == score_line(score) + "\n"
    json.loads(line)


def test_fast_lines_keep_the_sign_of_zero_and_every_digit() -> None:
    # Float texts are remembered between lines: 0.0 and -0.0 (one dict key) must not share.
    scores = [Score("z", "g", value, Status.OK, {"c": value, "d": -value}, advantage=value)
              for value in (0.0, -0.0, 0.0, 0.1, 0.1 + 0.2, -0.0, 1e-300, 5e-324)]
    lines = score_lines(scores).splitlines()
    assert lines == [score_line(s) for s in scores]
    assert '"reward": -0.0' in lines[1] and '"reward": 0.0' in lines[2]
    assert '"reward": 0.30000000000000004' in lines[4]
