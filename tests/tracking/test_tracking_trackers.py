"""Each tracker end to end against its real library, offline, read back with that library's
own reader: a W&B offline run's transaction log, a local MLflow file store through
``MlflowClient``, TensorBoard event files through TensorBoard's ``EventAccumulator``."""

from __future__ import annotations

import glob
import json
import os
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardsmith.errors import ConfigError
from rewardsmith.tracking import (
    MlflowTracker,
    TensorBoardTracker,
    WandbTracker,
    open_trackers,
    score_stats,
)

# Nothing may leave the machine: W&B offline, no error reports, no git or code capture, and
# every tracker's telemetry off; their caches and settings go under the test's folder.
OFFLINE = {
    "WANDB_MODE": "offline",
    "WANDB_SILENT": "true",
    "WANDB_ERROR_REPORTING": "false",
    "WANDB_DISABLE_GIT": "true",
    "WANDB_DISABLE_CODE": "true",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "1",
}


def offline_env(home: Path) -> dict[str, str]:
    return {**OFFLINE, "WANDB_CONFIG_DIR": str(home / "wandb-config"),
            "WANDB_CACHE_DIR": str(home / "wandb-cache"),
            "WANDB_DATA_DIR": str(home / "wandb-data")}


@pytest.fixture(autouse=True)
def _offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in offline_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    for key in ("WANDB_API_KEY", "MLFLOW_TRACKING_URI", "WANDB_PROJECT", "WANDB_DIR"):
        monkeypatch.delenv(key, raising=False)


def step_lines(step: int) -> list[dict[str, Any]]:
    """Two groups of two; the reward rises with the step, group b never varies."""
    high = 0.25 * step
    return [
        {"id": f"{step}-1", "group": "a", "reward": high, "status": "ok",
         "components": {"correct": high, "format score": 1.0}, "timing": {"correct": 0.01}},
        {"id": f"{step}-2", "group": "a", "reward": 0.0, "status": "ok",
         "components": {"correct": 0.0, "format score": 0.0}, "timing": {"correct": 0.03}},
        {"id": f"{step}-3", "group": "b", "reward": 1.0, "status": "ok",
         "components": {"correct": 1.0, "format score": 1.0}},
        {"id": f"{step}-4", "group": "b", "reward": None, "status": "masked",
         "components": {"correct": None, "format score": 1.0}},
    ]


USAGE = {"judge:grader": {"calls": 2.0, "cost": 0.125}}


# ------------------------------------------------------------------ readers


def tensorboard_scalars(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {tag: [(event.step, event.value) for event in accumulator.Scalars(tag)]
            for tag in accumulator.Tags()["scalars"]}


def wandb_records(directory: Path) -> list[Any]:
    """The records of the finished offline run under ``directory``. W&B's service writes the
    transaction log on its own schedule, after ``finish()`` returns: wait (10 s at most) for
    the run's closing ``exit`` record."""
    [path] = glob.glob(str(directory / "wandb" / "offline-run-*" / "run-*.wandb"))
    deadline = time.monotonic() + 10
    while True:
        records = _transaction_log(Path(path))
        if any(r.WhichOneof("record_type") == "exit" for r in records):
            return records
        assert time.monotonic() < deadline, "the W&B run was never written out"
        time.sleep(0.05)


def _transaction_log(path: Path) -> list[Any]:
    """A W&B transaction log (a LevelDB-style log: 7-byte header, 32 KiB blocks, CRC-checked
    chunks) as the ``Record`` protobufs W&B defines."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    ident, magic, _version = struct.unpack("<4sHB", data[:7])
    assert (ident, magic) == (b":W&B", 0xBEE1)
    records: list[Any] = []
    position, pending, block = 7, b"", 32768
    while position + 7 <= len(data):
        left = block - position % block
        if left < 7:  # a block's tail too short for a chunk header is padding
            position += left
            continue
        checksum, length, kind = struct.unpack("<IHB", data[position:position + 7])
        if (checksum, length, kind) == (0, 0, 0):
            position += left
            continue
        if position + 7 + length > len(data):
            break  # still being written
        chunk = data[position + 7:position + 7 + length]
        assert zlib.crc32(chunk, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF == checksum
        position += 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):  # a full record, or the last chunk of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def wandb_history(directory: Path) -> tuple[Any, list[dict[str, Any]]]:
    records = wandb_records(directory)
    [run] = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    rows = []
    for record in records:
        if record.WhichOneof("record_type") == "history":
            rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                         for item in record.history.item})
    return run, rows


# ------------------------------------------------------------------ trackers


def test_tensorboard_event_files_read_back(tmp_path: Path) -> None:
    with TensorBoardTracker(tmp_path / "tb", run="run-1") as tracker:
        logged = [tracker.log_scores(step_lines(step)) for step in range(3)]
    scalars = tensorboard_scalars(tmp_path / "tb" / "run-1")
    assert set(scalars) == set(logged[0])
    assert [step for step, _ in scalars["reward/mean"]] == [0, 1, 2]
    for step, metrics in enumerate(logged):
        for key, value in metrics.items():
            # TensorBoard stores scalars as float32.
            assert scalars[key][step] == (step, pytest.approx(value, rel=1e-6)), key
    assert scalars["components/format_score/mean"][0][1] == pytest.approx(0.75)
    assert scalars["latency/correct/max"][0][1] == pytest.approx(0.03)
    assert scalars["groups/zero_variance"][2][1] == 0  # b has one reward: not ranked


def test_mlflow_file_store_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    # Unset: naming a directory is what asks for the file store (the tracker sets it).
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    store = tmp_path / "mlruns"
    with MlflowTracker(experiment="rewards", run="rubric-v2", tracking_uri=store) as tracker:
        assert not tracker.attached
        first = tracker.log_scores(step_lines(0), usage=USAGE)
        second = tracker.log_scores(step_lines(1), step=10)
    client = MlflowClient(tracking_uri=store.resolve().as_uri())
    run = client.get_run(tracker.run_id)
    assert run.info.run_name == "rubric-v2"
    assert run.info.status == "FINISHED"
    assert client.get_experiment(run.info.experiment_id).name == "rewards"
    history = client.get_metric_history(tracker.run_id, "reward/mean")
    assert [(m.step, m.value) for m in history] == [(0, first["reward/mean"]),
                                                    (10, second["reward/mean"])]
    assert run.data.metrics["judge/grader/cost"] == 0.125
    assert run.data.metrics["cost/total"] == 0.125
    assert set(run.data.metrics) == set(first)
    # A second run in the same experiment: found by name, not created twice.
    with MlflowTracker(experiment="rewards", tracking_uri=store) as again:
        again.log_metrics({"x": 1.0})
    assert client.get_run(again.run_id).info.experiment_id == run.info.experiment_id


def test_mlflow_attaches_to_the_callers_active_run(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import mlflow

    uri = (tmp_path / "mlruns").resolve().as_uri()
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri(uri)
    try:
        with mlflow.start_run(run_name="trainer") as active:
            mlflow.log_metric("loss", 1.5, step=0)
            with MlflowTracker() as tracker:
                assert tracker.attached and tracker.run_id == active.info.run_id
                tracker.log_scores(step_lines(1))
            assert mlflow.active_run() is not None  # still the trainer's to end
            # A store of its own asks for a run of its own.
            with MlflowTracker(tracking_uri=tmp_path / "elsewhere") as separate:
                assert not separate.attached and separate.run_id != active.info.run_id
        metrics = mlflow.tracking.MlflowClient(uri).get_run(active.info.run_id).data.metrics
        assert metrics["loss"] == 1.5
        assert metrics["rewardsmith/reward/mean"] == score_stats(step_lines(1))["reward/mean"]
    finally:
        mlflow.set_tracking_uri(None)


def test_wandb_offline_run_read_back(tmp_path: Path) -> None:
    with WandbTracker(project="rewards", run="rubric-v2", directory=tmp_path / "wb",
                      config={"rubric": "v2"}) as tracker:
        assert not tracker.attached
        logged = [tracker.log_scores(step_lines(step), usage=USAGE) for step in range(2)]
    run, rows = wandb_history(tmp_path / "wb")
    assert (run.display_name, run.project, run.run_id) == ("rubric-v2", "rewards",
                                                           tracker.run_id)
    assert [row["_step"] for row in rows] == [0, 1]
    for row, metrics in zip(rows, logged):
        assert {k: v for k, v in row.items() if not k.startswith("_")} == metrics


def test_wandb_attaches_to_a_trainers_run(tmp_path: Path) -> None:
    import wandb

    # A plain wandb.init, as trainers call it, makes the process's current run.
    trainer = wandb.init(project="training", dir=str(tmp_path),
                         settings=wandb.Settings(console="off"))
    try:
        trainer.log({"loss": 2.0})
        with WandbTracker(directory=tmp_path / "unused") as tracker:
            assert tracker.attached
            tracker.log_scores(step_lines(1))
            tracker.log_scores(step_lines(2))
        trainer.log({"loss": 1.0})
    finally:
        trainer.finish()
    _, rows = wandb_history(tmp_path)
    ours = [row for row in rows if "rewardsmith/step" in row]
    assert [row["rewardsmith/step"] for row in ours] == [0, 1]
    assert ours[1]["rewardsmith/reward/mean"] == score_stats(step_lines(2))["reward/mean"]
    assert [row["loss"] for row in rows if "loss" in row] == [2.0, 1.0]


def test_several_trackers_share_a_directory(tmp_path: Path) -> None:
    with open_trackers(["tensorboard", "mlflow", "tensorboard"], run="r",
                       directory=tmp_path) as trackers:
        assert [t.name for t in trackers.trackers] == ["tensorboard", "mlflow"]
        trackers.log_scores(step_lines(1))
    assert tensorboard_scalars(tmp_path / "tensorboard" / "r")["reward/mean"][0][0] == 0
    assert (tmp_path / "mlruns").is_dir()
    with pytest.raises(ConfigError, match="unknown tracker 'neptune'"):
        open_trackers(["neptune"])


# ------------------------------------------------------------------ the command line


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in lines))
    return path


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WANDB_", "MLFLOW_"))}
    env.update(offline_env(cwd))
    return subprocess.run([sys.executable, "-m", "rewardsmith", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def scored_steps(tmp_path: Path) -> Iterator[list[Path]]:
    yield [_write(tmp_path / f"step{step}.jsonl", step_lines(step)) for step in range(3)]


def test_log_verb_to_all_three_trackers(tmp_path: Path, scored_steps: list[Path]) -> None:
    done = _cli(["log", *map(str, scored_steps), "--to", "tensorboard,mlflow", "--to", "wandb",
                 "--project", "rewards", "--run", "nightly", "--dir", "logs", "--first-step",
                 "5", "--json"], tmp_path)
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout)
    assert [s["step"] for s in steps] == [5, 6, 7]
    assert [s["source"] for s in steps] == list(map(str, scored_steps))
    expected = [score_stats(step_lines(step)) for step in range(3)]
    assert [s["metrics"] for s in steps] == expected

    scalars = tensorboard_scalars(tmp_path / "logs" / "tensorboard" / "rewards" / "nightly")
    assert [(s, pytest.approx(v)) for s, v in scalars["reward/mean"]] == [
        (5, e["reward/mean"]) for e in expected[:1]] + [
        (6 + i, e["reward/mean"]) for i, e in enumerate(expected[1:])]

    from mlflow.tracking import MlflowClient

    client = MlflowClient((tmp_path / "logs" / "mlruns").resolve().as_uri())
    experiment = client.get_experiment_by_name("rewards")
    [run] = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == "nightly" and run.info.status == "FINISHED"
    history = client.get_metric_history(run.info.run_id, "groups/zero_variance")
    assert [(m.step, m.value) for m in history] == [(5 + i, e["groups/zero_variance"])
                                                    for i, e in enumerate(expected)]

    wandb_run, rows = wandb_history(tmp_path / "logs")
    assert (wandb_run.display_name, wandb_run.project) == ("nightly", "rewards")
    assert [row["_step"] for row in rows] == [5, 6, 7]
    assert rows[2]["components/correct/mean"] == expected[2]["components/correct/mean"]


def test_log_verb_rejects_bad_input_before_opening_a_tracker(
        tmp_path: Path, scored_steps: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from rewardsmith.cli import app

    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "1", "group": "g", "reward": "high"}) + "\n")
    runner = CliRunner()
    done = runner.invoke(app, ["log", str(scored_steps[0]), str(bad), "--to", "tensorboard",
                               "--dir", "tb"])
    assert done.exit_code == 2
    assert "bad.jsonl: line 1" in done.output and "'reward' must be a number" in done.output
    assert not (tmp_path / "tb").exists()  # nothing was opened, so no empty run
    done = runner.invoke(app, ["log", str(scored_steps[0]), "--to", "comet"])
    assert done.exit_code == 2
    assert "--to 'comet': choose wandb, mlflow, tensorboard or jsonl" in done.output
    done = runner.invoke(app, ["log", str(tmp_path / "nope.jsonl"), "--to", "tensorboard"])
    assert done.exit_code == 2 and "no such file" in done.output


def test_an_unreachable_tracking_server_is_a_named_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from rewardsmith.tracking import TrackingError

    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    with pytest.raises(TrackingError, match=f"mlflow: cannot start a run at http://127.0.0.1:{port}"):
        MlflowTracker(tracking_uri=f"http://127.0.0.1:{port}")
