"""A file that writes its groups two ways is a warning naming the lines, or an error when strict.

Before: a rollout without ``group`` was silently grouped by a hash of its prompt next to
rollouts with one, and ``"group": 1`` and ``"group": "1"`` were silently one group (ids are
text once read): GRPO then normalized over groups nobody meant.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from rewardsmith.files.parquet import read_rollouts_any
from rewardsmith.files.rollouts import MixedGroups, read_rollouts

CLI = [sys.executable, "-m", "rewardsmith"]


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


MIXED = [
    {"id": "a", "group": 1, "prompt": "p1", "completion": "x"},
    {"id": "b", "group": "1", "prompt": "p2", "completion": "y"},
    {"id": "c", "prompt": "p3", "completion": "z"},
    {"id": "d", "group": 2, "prompt": "p4", "completion": "w"},
    {"id": "e", "group": None, "prompt": "p5", "completion": "v"},
]


def test_score_warns_naming_the_lines_and_still_scores(tmp_path: Path) -> None:
    write(tmp_path / "r.jsonl", MIXED)
    done = cli("score", "r.jsonl", "--reward", "length", "-o", "out.jsonl", "--no-store", "-q",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 5
    warned = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warned) == 2, done.stderr
    assert "2 rollout(s) have no group (lines 3, 5)" in warned[0]
    assert "3 have one (lines 1, 2, 4)" in warned[0]
    assert "1 (line 1) and '1' (line 2)" in warned[1]


def test_strict_groups_refuses_the_file_before_scoring(tmp_path: Path) -> None:
    write(tmp_path / "r.jsonl", MIXED)
    done = cli("score", "r.jsonl", "--reward", "length", "-o", "out.jsonl", "--no-store", "-q",
               "--strict-groups", cwd=tmp_path)
    assert done.returncode == 2
    assert "lines 3, 5" in done.stderr and "1 (line 1) and '1' (line 2)" in done.stderr
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("records", [
    [{"id": "a", "group": 1, "completion": "x"}, {"id": "b", "group": 2, "completion": "y"}],
    [{"id": "a", "group": "1", "completion": "x"}, {"id": "b", "group": "2", "completion": "y"}],
    [{"id": "a", "completion": "x"}, {"id": "b", "completion": "y"}],
    # a number and a text that differ once read are two groups, as written: nothing to say
    [{"id": "a", "group": 1, "completion": "x"}, {"id": "b", "group": "one", "completion": "y"}],
])
def test_groups_written_one_way_say_nothing(tmp_path: Path, records: list[dict[str, Any]]
                                            ) -> None:
    path = write(tmp_path / "r.jsonl", records)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(read_rollouts(path, strict_groups=True)) == 2
    done = cli("score", "r.jsonl", "--reward", "length", "-o", "-", "--no-store", "-q",
               "--strict-groups", cwd=tmp_path)
    assert done.returncode == 0 and "warning" not in done.stderr


def test_the_library_reader_warns_or_raises(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", MIXED)
    with pytest.warns(UserWarning) as caught:
        assert len(read_rollouts(path)) == 5
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2 and "lines 3, 5" in messages[0] and "(line 2)" in messages[1]
    with pytest.raises(MixedGroups, match=r"r.jsonl: .*1 \(line 1\) and '1' \(line 2\)"):
        read_rollouts(path, strict_groups=True)


def test_lines_read_past_a_skipped_bad_line_are_watched_too(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "a", "group": "g", "completion": "x"}\nnot json\n'
                    '{"id": "b", "completion": "y"}\n', encoding="utf-8")
    found: list[str] = []
    bad: list[Any] = []
    rollouts = read_rollouts_any(path, on_bad_line="skip", bad_lines=bad, warnings=found)
    assert len(rollouts) == 2 and len(bad) == 1
    assert found and "line 3" in found[0] and "line 1)" in found[0]


def test_many_lines_are_counted_and_a_few_named(tmp_path: Path) -> None:
    records = [{"id": str(i), "completion": "x", **({"group": "g"} if i % 3 else {})}
               for i in range(300)]
    found: list[str] = []
    read_rollouts_any(write(tmp_path / "r.jsonl", records), warnings=found)
    assert "100 rollout(s) have no group (lines 1, 4, 7, 10, 13 and 95 more)" in found[0]


def test_parquet_rows_are_named(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"id": ["a", "b", "c"], "group": ["g", None, "g"],
                      "completion": ["x", "y", "z"]})
    pq.write_table(table, tmp_path / "r.parquet")
    found: list[str] = []
    assert len(read_rollouts_any(tmp_path / "r.parquet", warnings=found)) == 3
    assert "1 rollout(s) have no group (row 2)" in found[0] and "(rows 1, 3)" in found[0]
    with pytest.raises(MixedGroups, match="row 2"):
        read_rollouts_any(tmp_path / "r.parquet", strict_groups=True)
