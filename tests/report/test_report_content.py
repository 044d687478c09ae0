"""The HTML report's content: numbers on a small hand-made scored file, the compare section,
the latency section with and without timing, and bad inputs (library and command line)."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from rewardsmith.advantages import check_advantages, trainer_names
from rewardsmith.errors import ConfigError, InputError
from rewardsmith.report import build_report, collect

# group a: varied; b: three equal rewards (zero variance; float32 leaves a residue); c: nothing unmasked; d: one rollout
ROWS: list[dict[str, Any]] = [
    {"id": "a0", "group": "a", "reward": 1.0, "components": {"correct": 1.0, "format": 1.0},
     "timing": {"correct": 0.010, "format": 0.001}},
    {"id": "a1", "group": "a", "reward": 0.0, "components": {"correct": 0.0, "format": 1.0},
     "timing": {"correct": 0.020, "format": 0.002}},
    {"id": "a2", "group": "a", "reward": 1.0, "components": {"correct": 1.0, "format": 0.0},
     "timing": {"correct": 0.030, "format": 0.003}},
    {"id": "a3", "group": "a", "reward": 0.0, "components": {"correct": 0.0, "format": 0.0},
     "timing": {"correct": 0.040, "format": 0.004}},
    {"id": "b0", "group": "b", "reward": 0.9, "components": {"correct": 0.9, "format": 0.0},
     "timing": {"correct": 0.050, "format": 0.001}},
    {"id": "b1", "group": "b", "reward": 0.9, "components": {"correct": 0.9, "format": 0.0},
     "timing": {"correct": 0.500, "format": 0.001}},
    {"id": "b2", "group": "b", "reward": 0.9, "components": {"correct": 0.9, "format": 0.0},
     "timing": {"correct": 0.060, "format": 0.001}},
    {"id": "c0", "group": "c", "reward": None, "status": "masked",
     "components": {"correct": 1.0, "format": None}, "timing": {"correct": 0.070}},
    {"id": "c1", "group": "c", "reward": None, "status": "error",
     "components": {"correct": None, "format": 1.0},
     "errors": {"correct": "ValueError: bad answer <b>"}, "timing": {"format": 0.005}},
    {"id": "c2", "group": "c", "reward": None, "status": "timeout",
     "components": {"correct": None, "format": 1.0},
     "errors": {"correct": "timed out after 5s"}},
    {"id": "d0", "group": "d", "reward": 0.5, "components": {"correct": 0.5, "format": 0.0},
     "timing": {"correct": 0.080, "format": 0.001}},
]


def write_rows(path: Path, rows: list[dict[str, Any]], *, timing: bool = True) -> Path:
    with path.open("w") as handle:
        for row in rows:
            line = {"status": "ok", "errors": {}, "advantage": None, **row}
            if not timing:
                line.pop("timing", None)
            handle.write(json.dumps(line) + "\n")
    return path


class Tables(HTMLParser):
    """Each section's tables as rows of cell text; also every element id and every link."""

    def __init__(self, text: str):
        super().__init__()
        self.section = ""
        self.tables: dict[str, list[list[list[str]]]] = {}
        self.ids: set[str] = set()
        self.links: list[str] = []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._header = False
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(str(values["id"]))
        if tag == "a" and values.get("href"):
            self.links.append(str(values["href"]))
        if tag == "section":
            self.section = str(values.get("id"))
        elif tag == "table":
            self.tables.setdefault(self.section, []).append([])
        elif tag == "tr":
            self._row = []
            self._header = True
        elif tag in ("td", "th"):
            self._cell = []
            self._header = self._header and tag == "th"

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if not self._header:  # header rows are left out
                self.tables[self.section][-1].append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def rows(self, section: str, index: int = 0) -> dict[str, list[str]]:
        """Table ``index`` of ``section``, keyed by its first column."""
        return {row[0]: row[1:] for row in self.tables[section][index]}


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Tables]:
    folder = tmp_path_factory.mktemp("report")
    scored = write_rows(folder / "scored.jsonl", ROWS)
    text = build_report(scored, output=folder / "report.html",
                        warnings=["format dominates the reward's variance"])
    return folder, text, Tables(text)


def test_page_is_self_contained_and_written(small: tuple[Path, str, Tables]) -> None:
    folder, text, page = small
    assert (folder / "report.html").read_text() == text
    assert text.startswith("<!DOCTYPE html>")
    for forbidden in ("<script", "http://", "https://", "<link", "@import", "src="):
        assert forbidden not in text.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
            'xmlns:xlink="http://www.w3.org/1999/xlink"', ""), forbidden
    assert "prefers-color-scheme: dark" in text
    for section in ("warnings", "overview", "statuses", "rewards", "groups", "advantages",
                    "latency", "judges", "rubric", "rollouts"):
        assert section in page.ids, section
    assert "compare" not in page.ids  # no baseline given
    # every plot is an inline SVG with its ids made unique within the page
    assert text.count("<svg ") == text.count('<figure class="plot"') == 7
    ids = [i for i in page.ids if i.startswith("plot")]
    assert len(ids) == len(set(ids))


def test_warnings_come_first_and_only_when_given(small: tuple[Path, str, Tables],
                                                 tmp_path: Path) -> None:
    _, text, _ = small
    assert text.index('id="warnings"') < text.index('id="overview"')
    assert "format dominates the reward&#x27;s variance" in text
    data = collect(write_rows(tmp_path / "s.jsonl", ROWS[:4]))
    assert data.warnings == []


def test_status_and_reward_numbers(small: tuple[Path, str, Tables]) -> None:
    _, _, page = small
    statuses = page.rows("statuses")
    assert statuses["ok"] == ["8", "72.7%"]
    assert statuses["error"] == ["1", "9.1%"]
    assert statuses["timeout"] == ["1", "9.1%"]
    assert statuses["masked"] == ["1", "9.1%"]
    failures = page.rows("statuses", 1)
    assert failures["correct"] == ["1", "1", "0"]  # an error, a timeout
    assert failures["format"] == ["0", "0", "1"]  # abstained
    rewards = page.rows("rewards")
    # values, null, mean, std, min, median (nearest rank), max
    mean = 5.2 / 8
    std = math.sqrt(sum((v - mean) ** 2 for v in [1, 0, 1, 0, .9, .9, .9, .5]) / 8)
    assert rewards["reward"] == ["8", "3", f"{mean:.4g}", f"{std:.4g}", "0", "0.9", "1"]
    assert rewards["correct"][:2] == ["9", "2"]
    assert rewards["format"][:2] == ["10", "1"]


def test_groups_and_sizes(small: tuple[Path, str, Tables]) -> None:
    _, text, page = small
    groups = page.rows("groups")
    assert groups["groups"] == ["4"]
    assert groups["zero variance (two or more equal rewards: teach nothing)"] == [
        "1 (25.0%), 3 rollouts"]
    assert groups["varied rewards"] == ["1"]
    assert groups["one unmasked reward"] == ["1"]
    assert "<code>b</code> (3 &times; 0.9)" in text
    sizes = page.rows("groups", 1)
    assert sizes["1"][:2] == ["1", "0"] and sizes["1"][3] == "0.5"
    assert sizes["3"][:3] == ["2", "1", "50.0%"]  # b (zero variance) and c (all masked)
    assert sizes["4"][:2] == ["1", "0"] and sizes["4"][3] == "0.5"


def test_advantages_agree_with_the_advantage_check(small: tuple[Path, str, Tables]) -> None:
    _, _, page = small
    table = page.rows("advantages")
    rewards = [row["reward"] for row in ROWS]
    groups = [row["group"] for row in ROWS]
    assert set(table) == set(trainer_names())
    for trainer in trainer_names():
        expected = check_advantages(rewards, groups, trainer=trainer)
        assert table[trainer][8] == str(expected.broken_groups), trainer
    # float32 leaves a residue in 3 x 0.9 under verl; rewardsmith's zero is exact
    assert table["verl"][8] == "1" and table["rewardsmith"][8] == "0"


def test_latency_numbers_and_links_to_the_slowest(small: tuple[Path, str, Tables]) -> None:
    _, _, page = small
    latency = page.rows("latency")
    # correct: 9 timed values; nearest-rank p50 is the 5th smallest (0.05), p99 the 9th (0.5)
    assert latency["correct"] == ["9", "50 ms", "500 ms", "500 ms", f"{0.86 / 9 * 1e3:.3g} ms",
                                  "860 ms"]
    assert latency["format"][0] == "9"
    slowest = page.tables["latency"][1]
    assert slowest[0][0] == "b1" and slowest[0][3] == "correct"
    assert [row[0] for row in slowest[:3]] == ["b1", "d0", "c0"]
    for link in page.links:
        if link.startswith("#"):
            assert link[1:] in page.ids, link
    assert "#rollout-5" in page.links and "rollout-5" in page.ids


def test_rollout_details_escape_text(small: tuple[Path, str, Tables]) -> None:
    _, text, _ = small
    assert "ValueError: bad answer &lt;b&gt;" in text
    assert "pass <code>--store</code> or <code>--rollouts</code>" in text


def test_without_timing_the_latency_section_says_how_to_record_it(tmp_path: Path) -> None:
    scored = write_rows(tmp_path / "scored.jsonl", ROWS, timing=False)
    text = build_report(scored)
    page = Tables(text)
    assert "Timing was not recorded" in text and "--timing" in text
    assert "latency" not in page.tables and "rollouts" not in page.ids


def test_rollouts_file_gives_the_linked_rollouts_text(tmp_path: Path) -> None:
    scored = write_rows(tmp_path / "scored.jsonl", ROWS)
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("".join(json.dumps({"id": row["id"], "group": row["group"],
                                            "prompt": f"question {row['id']}",
                                            "completion": f"answer of {row['id']} & more"})
                                + "\n" for row in ROWS))
    text = build_report(scored, rollouts=rollouts, top=2)
    assert "answer of b1 &amp; more" in text and "question d0" in text
    assert "answer of a0" not in text  # only the rollouts the page links to


def baseline_rows() -> list[dict[str, Any]]:
    rows = json.loads(json.dumps(ROWS))
    by_id = {row["id"]: row for row in rows}
    by_id["a1"]["reward"] = 1.0  # this file has 0.0: change -1
    by_id["a1"]["components"]["correct"] = 1.0
    by_id["b0"]["reward"] = 0.0  # b was varied in the baseline: change +0.9
    by_id["c0"].update(status="ok", reward=1.0, components={"correct": 1.0, "format": 1.0})
    rows.append({"id": "gone", "group": "e", "reward": 1.0, "components": {"correct": 1.0}})
    return rows


def test_compare_section(tmp_path: Path) -> None:
    scored = write_rows(tmp_path / "scored.jsonl", ROWS)
    baseline = write_rows(tmp_path / "baseline.jsonl", baseline_rows())
    text = build_report(scored, compare_with=baseline)
    page = Tables(text)
    assert "compare" in page.ids
    assert "11 paired, 0 only here, 1 only in the baseline" in text
    moves = page.rows("compare")
    # paired, baseline mean, mean, delta, changed, mean |change|
    assert moves["reward"][0] == "8"
    assert moves["reward"][4] == "2"
    assert moves["reward"][5] == f"{1.9 / 8:.4g}"
    assert moves["correct"][4] == "1"
    facts = page.rows("compare", 1)
    assert facts["groups that lost all reward variance"] == ["1"]
    assert facts["status ok -&gt; masked".replace("&gt;", ">")] == ["1"]
    advantages = page.rows("compare", 2)
    assert set(advantages) == set(trainer_names())
    movers = page.tables["compare"][3]
    assert [row[0] for row in movers] == ["a1", "b0"]
    assert movers[0][2:] == ["1", "0", "-1"]
    for link in page.links:
        if link.startswith("#"):
            assert link[1:] in page.ids
    assert text.count('<figure class="plot"') == 9  # two compare plots more


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "scored.jsonl:2: not valid JSON"),
    ('["a"]', "scored.jsonl:2: expected a JSON object"),
    ('{"group": "a", "reward": 1}', "scored.jsonl:2: missing 'id'"),
    ('{"id": "x", "reward": 1}', "scored.jsonl:2: missing 'group'"),
    ('{"id": "x", "group": "a", "reward": "high"}', "scored.jsonl:2: 'reward' must be a number"),
    ('{"id": "x", "group": "a", "reward": true}', "scored.jsonl:2: 'reward' must be a number"),
    ('{"id": "x", "group": "a", "reward": NaN}', "scored.jsonl:2: 'reward' is nan"),
    ('{"id": "x", "group": "a", "reward": 1, "status": "fine"}', "status must be one of"),
    ('{"id": "x", "group": "a", "reward": 1, "components": [1]}', "'components' must be an"),
    ('{"id": "x", "group": "a", "reward": 1, "timing": {"c": -1}}', "cannot be negative"),
    ('{"id": "x", "group": "a", "reward": 1, "timing": {"c": "1s"}}', "timing of 'c' must be"),
    ('{"id": "a0", "group": "a", "reward": 1}', "scored.jsonl:2: id 'a0' was already used on "
                                                "line 1"),
])
def test_bad_lines_name_the_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    scored = tmp_path / "scored.jsonl"
    scored.write_text(json.dumps(ROWS[0]) + "\n" + line + "\n")
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace("[", r"\[")):
        build_report(scored, output=tmp_path / "out.html")
    assert not (tmp_path / "out.html").exists()


def test_bad_options(tmp_path: Path) -> None:
    scored = write_rows(tmp_path / "scored.jsonl", ROWS)
    before = scored.read_bytes()
    with pytest.raises(ConfigError, match="the output .* is the scored file"):
        build_report(scored, output=scored)
    link = tmp_path / "link.html"
    link.symlink_to(scored)
    with pytest.raises(ConfigError, match="through a link"):
        build_report(scored, output=link)
    assert scored.read_bytes() == before
    with pytest.raises(ConfigError, match="is a folder"):
        build_report(scored, output=tmp_path)
    with pytest.raises(ConfigError, match="not both"):
        build_report(scored, store=tmp_path / "x.db", rollouts=scored)
    with pytest.raises(InputError, match="cannot open"):
        build_report(tmp_path / "missing.jsonl")
    (tmp_path / "blank.jsonl").write_text("\n\n")
    with pytest.raises(InputError, match="blank.jsonl: holds no scored rollouts"):
        build_report(scored, compare_with=tmp_path / "blank.jsonl")


def test_a_file_with_every_reward_masked(tmp_path: Path) -> None:
    rows = [{"id": f"m{i}", "group": "g", "reward": None, "status": "masked",
             "components": {"c": None}} for i in range(3)]
    page = Tables(build_report(write_rows(tmp_path / "masked.jsonl", rows)))
    assert page.rows("rewards")["reward"] == ["0", "3", "-", "-", "-", "-", "-"]
    assert page.rows("statuses")["masked"] == ["3", "100.0%"]
    assert page.rows("advantages")["verl"][2:] == ["-", "-", "-", "-", "0", "0", "0", "0",
                                                     "-"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rewardsmith", "report", *args],
                          capture_output=True, text=True, timeout=120)


def test_command_line(tmp_path: Path) -> None:
    scored = write_rows(tmp_path / "scored.jsonl", ROWS)
    out = tmp_path / "report.html"
    done = run_cli(str(scored), "-o", str(out), "--top", "3")
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stderr and out.read_text().startswith("<!DOCTYPE html>")
    assert out.read_text().count('class="rollout"') == 3

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ROWS[0]) + "\n\n{oops\n")
    done = run_cli(str(bad), "-o", str(tmp_path / "bad.html"))
    assert done.returncode == 2
    assert "bad.jsonl:3: not valid JSON" in done.stderr
    assert not (tmp_path / "bad.html").exists()


@pytest.mark.parametrize(("extra", "message"), [
    (["-o", "{scored}"], "would destroy the input"),
    (["-o", "{folder}/r.html", "--store", "{folder}/none.db"], "no store at"),
    (["-o", "{folder}/r.html", "--top", "-1"], "--top"),
    ([], "--output"),
])
def test_command_line_refusals_exit_2(tmp_path: Path, extra: list[str], message: str) -> None:
    from typer.testing import CliRunner

    from rewardsmith.cli import app

    scored = write_rows(tmp_path / "scored.jsonl", ROWS)
    before = scored.read_bytes()
    args = [a.format(scored=scored, folder=tmp_path) for a in extra]
    result = CliRunner().invoke(app, ["report", str(scored), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert scored.read_bytes() == before and not (tmp_path / "r.html").exists()


@pytest.mark.slow
def test_benchmark_runs_small(tmp_path: Path) -> None:
    script = Path(__file__).parent.parent.parent / "benchmarks" / "bench_report.py"
    done = subprocess.run([sys.executable, str(script), "--rollouts", "3200"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "x floor" in done.stdout and "page:" in done.stdout


def test_names_are_text_not_markup(tmp_path: Path) -> None:
    name = "cost$\\frac{<b>&"  # "$...$" would be TeX to matplotlib, "<b>" markup to the page
    rows = [{"id": f"r{i}", "group": "g", "reward": float(i),
             "components": {name: float(i % 2)}, "timing": {name: 0.01 * (i + 1)}}
            for i in range(4)]
    text = build_report(write_rows(tmp_path / "odd.jsonl", rows))
    assert "cost$\\frac{&lt;b&gt;&amp;" in text and "<b>&" not in text
    assert text.count("<svg ") == 6
    assert "mathdefault" not in text  # the log axis's powers of ten are drawn, not spelled


def test_page_size_does_not_grow_with_the_run(tmp_path: Path) -> None:
    def page(count: int) -> str:
        rng = random.Random(count)
        rows = [{"id": f"r{i}", "group": f"g{i // 8}", "reward": rng.random(),
                 "components": {"score": rng.random()}, "timing": {"score": rng.random()}}
                for i in range(count)]
        return build_report(write_rows(tmp_path / f"{count}.jsonl", rows), top=5)

    small, large = page(64), page(8000)
    assert small.count("<svg ") == large.count("<svg ") == 6
    # continuous values are binned: the large page is not much larger than the small one
    assert len(large) < 1.25 * len(small) + 20_000, (len(small), len(large))


def test_parquet_scored_file_gives_the_same_numbers(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    from rewardsmith.files.parquet import write_scores_parquet
    from rewardsmith.files.scored import read_scores

    scored = write_rows(tmp_path / "scored.jsonl", ROWS)
    parquet = tmp_path / "scored.parquet"
    write_scores_parquet(parquet, read_scores(scored))
    from_jsonl, from_parquet = collect(scored), collect(parquet)
    assert from_parquet.statuses == from_jsonl.statuses
    assert from_parquet.reward == from_jsonl.reward
    assert from_parquet.components == from_jsonl.components
    assert from_parquet.scored.failures == from_jsonl.scored.failures
    assert from_parquet.latency is None  # Parquet carries no timing
