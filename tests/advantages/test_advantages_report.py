"""``check_advantages`` and the ``rewardsmith advantages`` verb."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from rewardsmith.advantages import check_advantages, quantize
from rewardsmith.errors import ConfigError

REWARDS = [0.3] * 16 + [1.0, 0.0, None, 0.5] + [0.7] + [0.1 + 0.2, 0.3]
GROUPS = ["flat"] * 16 + ["mixed"] * 4 + ["solo"] + ["noise"] * 2


def test_report_finds_broken_groups() -> None:
    report = check_advantages(REWARDS, GROUPS, trainer="slime")
    assert (report.rollouts, report.masked, report.groups) == (23, 1, 4)
    assert report.singleton_groups == 1
    assert report.zero_variance_groups == 1
    assert report.noise_groups == 1
    assert report.broken_groups == 1 and report.broken_rollouts == 16
    assert report.worst_magnitude == pytest.approx(0.0298, rel=1e-2)
    assert report.example is not None and report.example.group == "flat"
    assert report.example.rewards == [0.3] * 16
    assert report.exit_code == 1
    assert not report.on_exact_grid and report.suggested_step == 2.0**-10


def test_rewardsmith_and_quantized_rewards_pass() -> None:
    ours = check_advantages(REWARDS, GROUPS)
    assert ours.broken_groups == 0 and ours.exit_code == 0
    assert ours.zero_variance_groups == 1
    fixed = [None if r is None else quantize(r) for r in REWARDS]
    report = check_advantages(fixed, GROUPS, trainer="openrlhf")
    assert report.exit_code == 0
    assert report.on_exact_grid and report.grid_step == 2.0**-10
    assert report.suggested_step is None


def test_report_distribution_and_json() -> None:
    report = check_advantages(REWARDS, GROUPS, trainer="verl", ids=[f"r{i}" for i in range(23)])
    dist = report.distribution
    assert dist.count == 22 and dist.min == 0.0 and dist.max == 1.0
    assert sum(b.count for b in dist.histogram) == 22
    data = report.to_dict()
    json.dumps(data, allow_nan=False)
    assert data["exit_code"] == 1
    assert data["example"]["ids"][0] == "r0"
    many = check_advantages([i / 100 for i in range(100)], ["g"] * 100)
    assert len(many.distribution.histogram) == 10


def test_singletons_are_counted_not_broken() -> None:
    # trl's std of a lone rollout is NaN and verl gives it its reward; a group of one has no
    # variance to speak of, so it is reported apart rather than as broken.
    for trainer in ("trl", "verl"):
        report = check_advantages([1.0, 0.3, None], ["a", "b", "b"], trainer=trainer)
        assert report.singleton_groups == 2 and report.broken_groups == 0
        assert report.zero_variance_groups == 0


def test_render_shows_the_verdict() -> None:
    console = Console(record=True, width=120)
    check_advantages(REWARDS, GROUPS, trainer="openrlhf").render(console)
    text = console.export_text()
    assert "broken groups" in text and "29.8" in text and "2**-10" in text
    console = Console(record=True, width=120)
    check_advantages([], []).render(console)
    assert "rollouts" in console.export_text()


def test_report_rejects_bad_options() -> None:
    with pytest.raises(ConfigError, match="expected one of"):
        check_advantages([1.0], ["g"], trainer="nope")
    with pytest.raises(ConfigError, match="2 rewards but 1 group"):
        check_advantages([1.0, 2.0], ["g"])


# The verb, driven through typer. Importing the module registers the command on the app.
cli = pytest.importorskip("rewardsmith.cli.advantages_cmd")


def _write(path: Path, rows: list[object]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _scored(path: Path, reward: float) -> Path:
    rows: list[object] = [
        {"id": f"a{i}", "group": "p", "reward": reward, "status": "ok"} for i in range(16)
    ]
    rows += [{"id": "m", "group": "q", "reward": None, "status": "masked"}, ""]
    return _write(path, rows)


def test_cli_exit_codes(tmp_path: Path) -> None:
    from rewardsmith.cli._app import app

    runner = CliRunner()
    scored = _scored(tmp_path / "s.jsonl", 0.3)
    result = runner.invoke(app, ["advantages", str(scored), "--trainer", "verl"])
    assert result.exit_code == 1, result.output
    assert "broken groups" in result.output
    result = runner.invoke(app, ["advantages", str(scored), "--trainer", "rewardsmith"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["advantages", str(scored), "--trainer", "miles", "--json"])
    assert result.exit_code == 1
    assert json.loads(result.output)["broken_groups"] == 1
    binary = _scored(tmp_path / "b.jsonl", 1.0)
    assert runner.invoke(app, ["advantages", str(binary), "-t", "openrlhf"]).exit_code == 0


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("{not json", "s.jsonl:2: not valid JSON"),
        ('{"id": "x", "reward": 1}', "s.jsonl:2: missing 'group'"),
        ('{"id": "x", "group": "p"}', "s.jsonl:2: missing 'reward'"),
        ('{"id": "x", "group": "p", "reward": "high"}', "s.jsonl:2: 'reward' must be a number"),
        ('{"id": "x", "group": "p", "reward": NaN}', "s.jsonl:2: 'reward' is nan"),
        ("[1, 2]", "s.jsonl:2: expected a JSON object"),
    ],
)
def test_cli_bad_lines_exit_2_with_line_number(tmp_path: Path, row: str, message: str) -> None:
    from rewardsmith.cli._app import app

    path = _write(tmp_path / "s.jsonl", [{"id": "ok", "group": "p", "reward": 1.0}, row])
    result = CliRunner().invoke(app, ["advantages", str(path)])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_cli_without_trainer_checks_every_trainer(tmp_path: Path) -> None:
    """A file that is sound under rewardsmith's exact formula but breaks float32 trainers fails
    when no trainer is named, and the table names each trainer that breaks."""
    from rewardsmith.cli._app import app
    from rewardsmith.cli.advantages_cmd import TRAINER_NAMES

    runner = CliRunner()
    scored = _scored(tmp_path / "s.jsonl", 0.3)
    result = runner.invoke(app, ["advantages", str(scored)])
    assert result.exit_code == 1, result.output
    assert "broken under" in result.output and "verl" in result.output
    data = json.loads(runner.invoke(app, ["advantages", str(scored), "--json"]).output)
    assert set(data["trainers"]) == set(TRAINER_NAMES) and data["exit_code"] == 1
    assert data["trainers"]["rewardsmith"]["broken_groups"] == 0
    assert data["trainers"]["verl"]["broken_groups"] == 1
    binary = _scored(tmp_path / "b.jsonl", 1.0)
    result = runner.invoke(app, ["advantages", str(binary)])
    assert result.exit_code == 0, result.output
    assert "broken under" not in result.output
    # --method or --scale speak of rewardsmith's own formula, checked alone as before.
    assert runner.invoke(app, ["advantages", str(scored), "--method", "grpo"]).exit_code == 0


def test_cli_bad_usage_exits_2(tmp_path: Path) -> None:
    from rewardsmith.cli._app import app

    scored = _scored(tmp_path / "s.jsonl", 0.5)
    runner = CliRunner()
    assert runner.invoke(app, ["advantages", str(scored), "--trainer", "x"]).exit_code == 2
    assert runner.invoke(app, ["advantages", str(scored), "--dtype", "int4"]).exit_code == 2
    assert runner.invoke(app, ["advantages", str(tmp_path / "missing.jsonl")]).exit_code == 2
    ids = cli.read_scored_rewards(scored)[2]
    assert ids[:2] == ["a0", "a1"] and len(ids) == 17


def test_check_trainers_matches_one_check_per_trainer() -> None:
    from rewardsmith.advantages import check_trainers, trainer_names

    ids = [f"r{i}" for i in range(len(REWARDS))]
    names = trainer_names()
    reports = check_trainers(REWARDS, GROUPS, names, ids=ids)
    assert list(reports) == list(names)
    for name in names:
        assert reports[name].to_dict() == check_advantages(REWARDS, GROUPS, trainer=name,
                                                           ids=ids).to_dict()
    assert reports["slime"].broken_groups == 1 and reports["rewardsmith"].broken_groups == 0
    with pytest.raises(ConfigError, match="2 group labels"):
        check_trainers([1.0], ["a", "b"], names)
