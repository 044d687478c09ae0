"""Bad input is a clear error naming the file and line, never a guess.

Before: invalid UTF-8 was silently replaced, duplicate rollout ids were accepted by ``score``
(and refused later by ``diff``), skipped lines did not count towards ``--max-error-rate``, an
empty input file scored nothing and exited 0, and the cases reader split lines on U+2028.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rewardsmith import InputError
from rewardsmith.files.parquet import read_rollouts_any, write_rollouts_parquet
from rewardsmith.files.rollouts import read_rollouts
from rewardsmith.files.scored import read_scores
from rewardsmith.testing.cases import load_cases
from rewardsmith.types import Rollout

CLI = [sys.executable, "-m", "rewardsmith"]


def cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def line(rollout_id: str, completion: str = "#### 4") -> bytes:
    return (json.dumps({"id": rollout_id, "prompt": "q", "completion": completion,
                        "answer": "4"}) + "\n").encode()


def test_invalid_utf8_is_a_bad_line_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(line("a") + b'{"id": "b", "completion": "caf\xe9"}\n' + line("c"))
    with pytest.raises(InputError, match=r"r\.jsonl:2: not valid UTF-8 \(byte 0xe9"):
        read_rollouts(path)
    done = cli("score", path, "--reward", "gsm8k", "--workers", "0", "--no-store", cwd=tmp_path)
    assert done.returncode == 2 and "r.jsonl:2: not valid UTF-8" in done.stderr
    skipped = cli("score", path, "--reward", "gsm8k", "--workers", "0", "--no-store",
                  "--on-bad-line", "skip", "--max-error-rate", "0.5", cwd=tmp_path)
    assert skipped.returncode == 0, skipped.stderr
    assert [json.loads(x)["id"] for x in skipped.stdout.splitlines()] == ["a", "c"]
    assert "r.jsonl:2: not valid UTF-8" in " ".join(skipped.stderr.split())  # table wraps


def test_invalid_utf8_in_scored_and_cases_files_is_reported_too(tmp_path: Path) -> None:
    scored = tmp_path / "s.jsonl"
    scored.write_bytes(b'{"id": "1", "group": "g", "reward": 1.0, "status": "ok", '
                       b'"errors": {"x": "\xff"}}\n')
    with pytest.raises(InputError, match=r"s\.jsonl:1: not valid UTF-8"):
        read_scores(scored)
    cases = tmp_path / "c.jsonl"
    cases.write_bytes(b'{"completion": "ok", "expected": 1}\n{"completion": "\xc3", '
                      b'"expected": 0}\n')
    with pytest.raises(InputError, match=r"c\.jsonl:2: not valid UTF-8"):
        load_cases(cases)


def test_a_utf8_byte_order_mark_and_crlf_line_ends_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + line("a").replace(b"\n", b"\r\n") + line("b"))
    assert [r.id for r in read_rollouts(path)] == ["a", "b"]


def test_duplicate_ids_are_refused_naming_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(line("a") + line("b") + line("c") + line("b"))
    with pytest.raises(InputError, match=r"r\.jsonl:4: rollout id 'b' is also the id of line 2"):
        read_rollouts(path)
    for on_bad_line in ("fail", "skip"):  # which of the two is right cannot be guessed
        done = cli("score", path, "--reward", "gsm8k", "--workers", "0", "--no-store",
                   "--on-bad-line", on_bad_line, cwd=tmp_path)
        assert done.returncode == 2
        assert "r.jsonl:4: rollout id 'b' is also the id of line 2" in done.stderr
        assert done.stdout == ""


def test_a_default_id_that_collides_with_an_explicit_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"completion": "x"}\n' + line("1"))  # line 1's id is "1" by default
    with pytest.raises(InputError, match="rollout id '1' is also the id of line 1"):
        read_rollouts(path)


def test_duplicate_ids_in_parquet_are_refused_naming_both_rows(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    path = tmp_path / "r.parquet"
    write_rollouts_parquet(path, [Rollout("a", "g", "q", "x"), Rollout("b", "g", "q", "y"),
                                  Rollout("a", "g", "q", "z")])
    with pytest.raises(InputError, match="row 3: rollout id 'a' is also the id of row 1"):
        read_rollouts_any(path)


def test_skipped_lines_count_towards_the_error_rate(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(line("a") + b"{broken\n" + b"[1, 2]\n" + line("d"))
    done = cli("score", path, "--reward", "gsm8k", "--workers", "0", "--no-store",
               "--on-bad-line", "skip", "--max-error-rate", "0.4", "-o", tmp_path / "o.jsonl",
               "--json", cwd=tmp_path)
    assert done.returncode == 1  # 2 of 4 lines skipped: 50% > 40%
    check = json.loads(done.stdout)["check"]
    assert check["skipped_lines"] == 2 and check["error_rate"] == 0.5
    assert "2 input line(s) were skipped" in check["message"]
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 2  # written all the same


def test_every_line_skipped_fails_the_gate(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"{broken\n{also broken\n")
    done = cli("score", path, "--reward", "gsm8k", "--workers", "0", "--no-store",
               "--on-bad-line", "skip", "--max-error-rate", "0.99", cwd=tmp_path)
    assert done.returncode == 1 and "2 input line(s) were skipped" in done.stderr


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"])
def test_an_empty_input_file_is_an_error_unless_allowed(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(content)
    done = cli("score", path, "--reward", "gsm8k", "--workers", "0", "-o",
               tmp_path / "o.jsonl", cwd=tmp_path)
    assert done.returncode == 2 and "holds no rollouts" in done.stderr
    assert not (tmp_path / "o.jsonl").exists() and not (tmp_path / "rewardsmith.db").exists()
    allowed = cli("score", path, "--reward", "gsm8k", "--workers", "0", "--no-store", "-o",
                  tmp_path / "o.jsonl", "--allow-empty", cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert (tmp_path / "o.jsonl").read_text() == ""


def test_cases_are_split_on_newlines_only_not_on_unicode_line_separators(
        tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    completion = "first part\u2028second part\u2029third\x85fourth"
    path.write_text(json.dumps({"completion": completion, "expected": 1.0},
                               ensure_ascii=False) + "\n", encoding="utf-8")
    [case] = load_cases(path)
    assert case.rollout.completion == completion and case.line == 1


def test_every_reader_reports_the_same_way(tmp_path: Path) -> None:
    """Rollouts, scores and cases read through one reader: one wording for one fault."""
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"id": "1", "group": "g", "completion": "x", "expected": 1}\n{oops\n')
    messages = []
    for read in (read_rollouts, read_scores, load_cases):
        with pytest.raises(InputError) as caught:
            read(path)
        messages.append(str(caught.value))
    assert all("x.jsonl:2: not valid JSON" in message for message in messages), messages
