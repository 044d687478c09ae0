"""Run rewardsmith's TRL adapter inside a real ``GRPOTrainer`` and check how TRL uses it.

Needs TRL in an environment that has torch (rewardsmith itself depends on neither)::

    pip install trl            # brings transformers, datasets, accelerate, tokenizers
    pip install -e .           # rewardsmith
    python scripts/check_trl_grpo.py [--out-dir /tmp/trlcheck/run]

Nothing is downloaded: a character-level tokenizer and a tiny Llama model are built here from
scratch (seeded), given a few seconds of supervised warm-up on "What is a+b? c" so that some
answers are right, and then trained for a few GRPO steps on CPU with
``trl_reward_funcs(rubric)`` as ``reward_funcs`` (and once more with ``per_component=False``).
Each reward function is wrapped to record what TRL passes it and what it returns. The script checks
that TRL calls the functions as the adapter expects, that the groups rewardsmith sees have
``num_generations`` members, that TRL's logged ``rewards/<component>/mean`` and ``reward`` agree
with the rubric (weighted sum of the components), and that the rubric's own engine gives the same
rewards for the recorded completions. One prompt has an unreadable reference answer, so its
completions are masked (None from every function) and the NaN path of TRL is exercised too.
A last one-step run with ``multi_objective_aggregation="normalize_then_sum"`` checks that the
adapter reads that setting from the trainer calling it and warns once.

Exit status: 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import functools
import math
import random
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

NUM_GENERATIONS = 4
BATCH_SIZE = 8  # completions per step: 2 prompts x 4 generations
MAX_COMPLETION_LENGTH = 12
TOL = 1e-5

RUBRIC = {
    "name": "trl-check",
    "components": {
        "number": {"reward": "number", "weight": 1.0},
        # 0 for one character, then -1/3 per extra character down to -1 at 4 characters
        "length": {"reward": "length", "params": {"max_length": 4, "buffer": 3}, "weight": 0.2},
        # only the bare number counts, and only when it is right
        "bare": {"reward": "regex", "params": {"pattern": "[0-9]+", "full": True},
                 "weight": 0.1, "requires": "number"},
    },
}

# Six prompts with distinct texts: 3 steps x 2 prompts cover them all (one epoch).
PROBLEMS = [("2+3", "5"), ("4+4", "8"), ("1+6", "7"), ("3+1", "4"), ("2+2", "4")]
MASKED_PROBLEM = ("5+1", "unknown")  # the reference answer has no number: masked by the rubric

Check = tuple[str, bool, str]


# --------------------------------------------------------------------------- tiny model


def build_tokenizer() -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = list("0123456789+-=?:#. ") + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    chars += [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for ch in chars:
        vocab.setdefault(ch, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>",
        padding_side="left",
    )
    return tokenizer


def prompt_text(question: str) -> str:
    return f"What is {question}? "


def build_model(tokenizer: Any, seed: int) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None, tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = None
    return model


def warm_up(model: Any, tokenizer: Any, seed: int, steps: int) -> float:
    """A few seconds of supervised training on 'What is a+b? c<eos>' (plain torch)."""
    import torch

    rng = random.Random(seed)
    texts = []
    for _ in range(512):
        a, b = rng.randint(0, 4), rng.randint(0, 4)
        texts.append(prompt_text(f"{a}+{b}") + str(a + b) + tokenizer.eos_token)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    loss_value = float("nan")
    for step in range(steps):
        batch = [texts[(step * 32 + i) % len(texts)] for i in range(32)]
        enc = tokenizer(batch, return_tensors="pt", padding=True)
        labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
        out = model(**enc, labels=labels)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        loss_value = float(out.loss)
    return loss_value


# --------------------------------------------------------------------------- recording


class Recorder:
    """Wraps reward functions; records each call's keyword arguments and result."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def wrap(self, func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = func(*args, **kwargs)
            state = kwargs.get("trainer_state")
            self.calls.append({
                "func": func.__name__,
                "positional": len(args),
                "kwargs": {k: _describe(v) for k, v in kwargs.items()},
                "prompts": list(kwargs.get("prompts") or []),
                "completions": list(kwargs.get("completions") or []),
                "answer": list(kwargs.get("answer") or []),
                "completion_ids": [list(ids) for ids in kwargs.get("completion_ids") or []],
                "step": getattr(state, "global_step", None),
                "result": list(result),
                "result_type": type(result).__name__,
            })
            return result

        return wrapper


def _describe(value: Any) -> tuple[str, int | None, str]:
    """(type, length, type of the first element) of an argument."""
    if isinstance(value, (list, tuple)):
        first = type(value[0]).__name__ if value else "-"
        if value and isinstance(value[0], (list, tuple)) and value[0]:
            first += f"[{type(value[0][0]).__name__}]"
        return type(value).__name__, len(value), first
    return type(value).__name__, None, "-"


class LogCatcher:
    def __init__(self) -> None:
        self.logs: list[dict[str, Any]] = []

    def callback(self) -> Any:
        from transformers import TrainerCallback

        catcher = self

        class _Catch(TrainerCallback):
            def on_log(self, args: Any, state: Any, control: Any, logs: Any = None,
                       **kwargs: Any) -> None:
                if logs and any(k.startswith("rewards/") or k == "reward" for k in logs):
                    catcher.logs.append(dict(logs))

        return _Catch()


# --------------------------------------------------------------------------- run


def run_grpo(funcs: Any, recorder: Recorder, tokenizer: Any, model: Any, dataset: Any,
             out_dir: str, steps: int, seed: int,
             aggregation: str = "sum_then_normalize") -> LogCatcher:
    from trl import GRPOConfig, GRPOTrainer

    wrapped = [recorder.wrap(f) for f in funcs]
    config = GRPOConfig(
        output_dir=out_dir, reward_weights=list(funcs.reward_weights),
        num_generations=NUM_GENERATIONS, per_device_train_batch_size=BATCH_SIZE,
        max_completion_length=MAX_COMPLETION_LENGTH, max_steps=steps, logging_steps=1,
        report_to=[], use_cpu=True, bf16=False, fp16=False, seed=seed, learning_rate=1e-4,
        save_strategy="no", disable_tqdm=True, temperature=1.0, dataloader_num_workers=0,
        multi_objective_aggregation=aggregation,
    )
    catcher = LogCatcher()
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=wrapped,
                          args=config, train_dataset=dataset, callbacks=[catcher.callback()])
    trainer.train()
    return catcher


# --------------------------------------------------------------------------- checks


def check_calls(label: str, recorder: Recorder, names: list[str], steps: int) -> list[Check]:
    from rewardsmith.integrations.adapters import consecutive_groups, prompt_key

    checks: list[Check] = []
    calls = recorder.calls
    expected_calls = steps * len(names)
    checks.append((f"{label}: TRL called the functions {expected_calls} times "
                   f"({steps} steps x {len(names)})", len(calls) == expected_calls,
                   f"{len(calls)} calls"))
    order = [c["func"] for c in calls]
    checks.append((f"{label}: call order is the functions' order each step",
                   order == names * steps, f"{order}"))
    needed = {"prompts", "completions", "completion_ids", "answer", "trainer_state"}
    bad_args, bad_lengths, bad_results, bad_groups, bad_positional = [], [], [], [], []
    for i, call in enumerate(calls):
        kwargs = call["kwargs"]
        size = len(call["completions"])
        if size != BATCH_SIZE:
            bad_lengths.append(f"call {i}: {size} completions")
        missing = needed - set(kwargs)
        if missing:
            bad_args.append(f"call {i}: missing {sorted(missing)}")
        if call["positional"]:
            bad_positional.append(f"call {i}: {call['positional']} positional")
        for name, (_kind, length, _first) in kwargs.items():
            if length is not None and length != size:
                bad_lengths.append(f"call {i}: {name} has {length} for {size}")
        result = call["result"]
        if len(result) != size or not all(
                r is None or (isinstance(r, float) and math.isfinite(r)) for r in result):
            bad_results.append(f"call {i}: {result!r}")
        groups = consecutive_groups([prompt_key(p) for p in call["prompts"]])
        sizes = [groups.count(g) for g in dict.fromkeys(groups)]
        if any(s != NUM_GENERATIONS for s in sizes):
            bad_groups.append(f"call {i}: group sizes {sizes}")
    checks.append((f"{label}: every call got {sorted(needed)} as keywords", not bad_args,
                   "; ".join(bad_args) or "ok"))
    checks.append((f"{label}: no positional arguments", not bad_positional,
                   "; ".join(bad_positional) or "ok"))
    checks.append((f"{label}: every list argument has the batch's length ({BATCH_SIZE})",
                   not bad_lengths, "; ".join(bad_lengths) or "ok"))
    checks.append((f"{label}: each function returned one float or None per completion",
                   not bad_results, "; ".join(bad_results) or "ok"))
    checks.append((f"{label}: rewardsmith's groups (runs of equal prompts) have "
                   f"{NUM_GENERATIONS} members", not bad_groups, "; ".join(bad_groups) or "ok"))
    return checks


def per_step(recorder: Recorder, names: list[str]) -> list[dict[str, list[float | None]]]:
    """The recorded outputs grouped into steps: [{func name: outputs}] in call order."""
    steps: list[dict[str, list[float | None]]] = []
    for call in recorder.calls:
        if not steps or call["func"] in steps[-1]:
            steps.append({})
        steps[-1][call["func"]] = call["result"]
    return steps


def nanmean(values: list[float | None]) -> float:
    valid = [v for v in values if v is not None]
    return sum(valid) / len(valid) if valid else float("nan")


def close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=TOL, abs_tol=TOL)


def check_logs(label: str, recorder: Recorder, catcher: LogCatcher, names: list[str],
               weights: list[float], steps: int) -> list[Check]:
    checks: list[Check] = []
    logs = catcher.logs
    checks.append((f"{label}: one log line per step", len(logs) == steps, f"{len(logs)} logs"))
    missing = [f"rewards/{n}/mean" for n in names if any(f"rewards/{n}/mean" not in g for g in logs)]
    checks.append((f"{label}: logs have rewards/<component>/mean for {names}", not missing,
                   f"missing {missing}" if missing else "ok"))
    if missing or not logs:
        return checks
    sums, from_funcs = [], []
    for step, (log, outputs) in enumerate(zip(logs, per_step(recorder, names))):
        weighted = sum(w * log[f"rewards/{n}/mean"] for n, w in zip(names, weights))
        sums.append(f"step {step + 1}: reward={log['reward']:.6f} "
                    f"sum(w*mean)={weighted:.6f}")
        if not close(log["reward"], weighted):
            sums[-1] += "  MISMATCH"
        for n in names:
            mine = nanmean(outputs.get(n, []))
            if not close(log[f"rewards/{n}/mean"], mine):
                from_funcs.append(f"step {step + 1} {n}: logged {log[f'rewards/{n}/mean']} "
                                  f"vs returned mean {mine}")
    checks.append((f"{label}: TRL's reward == sum(weight * rewards/<c>/mean)",
                   not any("MISMATCH" in s for s in sums), "; ".join(sums)))
    checks.append((f"{label}: rewards/<c>/mean == nan-mean of what the function returned",
                   not from_funcs, "; ".join(from_funcs) or "ok"))
    return checks


def check_recompute(label: str, recorder: Recorder, rubric: Any, names: list[str],
                    weights: list[float]) -> list[Check]:
    """Score the recorded completions with the rubric's own engine and compare."""
    from rewardsmith import Rollout, score_rollouts
    from rewardsmith.integrations.adapters import consecutive_groups, prompt_key

    firsts = [c for c in recorder.calls if c["func"] == names[0]]
    mismatches: list[str] = []
    compared = masked = 0
    for step, (call, outputs) in enumerate(zip(firsts, per_step(recorder, names))):
        groups = consecutive_groups([prompt_key(p) for p in call["prompts"]])
        rollouts = [Rollout(id=str(i), group=groups[i], prompt=p, completion=c, answer=a)
                    for i, (p, c, a) in enumerate(zip(call["prompts"], call["completions"],
                                                      call["answer"]))]
        scores = score_rollouts(rubric, rollouts, workers=0)
        for i, score in enumerate(scores):
            values = [outputs[n][i] for n in names]
            if any(v is None for v in values):
                total = None if all(v is None for v in values) else float("nan")
            else:
                total = sum(w * v for w, v in zip(weights, values))
            compared += 1
            masked += score.reward is None
            if not close(score.reward, total):
                mismatches.append(f"step {step + 1} #{i} {call['completions'][i]!r}: rubric "
                                  f"{score.reward} vs functions {values} -> {total}")
    checks = [(f"{label}: rubric.score == weighted sum of the functions' outputs "
               f"({compared} completions, {masked} masked)",
               compared > 0 and not mismatches, "; ".join(mismatches) or "ok")]
    return checks


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default="/tmp/trlcheck/run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup-steps", type=int, default=30)
    opts = parser.parse_args()
    started = time.monotonic()
    warnings.filterwarnings("ignore")

    import datasets
    import torch
    import transformers
    import trl
    from transformers import set_seed

    import rewardsmith.integrations.trl as adapter
    from rewardsmith import Rubric
    from rewardsmith.integrations.trl import trl_reward_funcs

    # Count how often the adapter scores a batch (it should once per step, for all functions).
    scorings: list[int] = []
    real_score = adapter.score_rollouts

    def counting_score(rollouts: Any, **kwargs: Any) -> Any:
        scorings.append(len(rollouts))
        return real_score(rollouts, **kwargs)

    adapter.score_rollouts = counting_score

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    set_seed(opts.seed)
    datasets.disable_progress_bars()
    print(f"versions: trl {trl.__version__}, transformers {transformers.__version__}, "
          f"torch {torch.__version__}, datasets {datasets.__version__}")

    tokenizer = build_tokenizer()
    model = build_model(tokenizer, opts.seed)
    n_params = sum(p.numel() for p in model.parameters())
    loss = warm_up(model, tokenizer, opts.seed, opts.warmup_steps)
    print(f"model: LlamaForCausalLM, {n_params} parameters, vocab {len(tokenizer)}, "
          f"warm-up loss {loss:.3f} after {opts.warmup_steps} steps")

    problems = PROBLEMS + [MASKED_PROBLEM]
    dataset = datasets.Dataset.from_dict({
        "prompt": [prompt_text(q) for q, _ in problems],
        "answer": [a for _, a in problems],
    })
    rubric = Rubric.from_dict(RUBRIC)

    checks: list[Check] = []
    calls_seen: dict[str, tuple[str, int | None, str]] = {}

    # 1. one function per component
    funcs = trl_reward_funcs(rubric)
    names, weights = funcs.names, funcs.reward_weights
    print(f"per-component: functions {names}, reward_weights {weights}")
    recorder = Recorder()
    base_state = {k: v.clone() for k, v in model.state_dict().items()}
    catcher = run_grpo(funcs, recorder, tokenizer, model, dataset,
                       f"{opts.out_dir}/per_component", opts.steps, opts.seed)
    checks += check_calls("per-component", recorder, names, opts.steps)
    checks += check_logs("per-component", recorder, catcher, names, weights, opts.steps)
    checks += check_recompute("per-component", recorder, rubric, names, weights)
    checks.append(("per-component: the adapter scored each batch once for all functions",
                   scorings == [BATCH_SIZE] * opts.steps, f"batch sizes scored: {scorings}"))
    nonzero = [n for n in names if any(any(v for v in r if v is not None)
                                       for r in (c["result"] for c in recorder.calls
                                                 if c["func"] == n))]
    masked = sum(r is None for c in recorder.calls for r in c["result"])
    print(f"components with a non-zero value: {nonzero}; None values returned: {masked}")
    # TRL's own truncation test (mask_truncated_completions): the last id is not EOS or pad.
    # TRL passes no truncation flag to reward functions, so the adapter sees truncated=False.
    stop = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    cut = sum(bool(ids) and ids[-1] not in stop
              for c in recorder.calls if c["func"] == names[0] for ids in c["completion_ids"])
    print(f"completions TRL would call truncated (no EOS within {MAX_COMPLETION_LENGTH} "
          f"tokens): {cut}; reward functions get no truncation flag for them")
    if recorder.calls:
        calls_seen = recorder.calls[0]["kwargs"]
    first_log = catcher.logs[0] if catcher.logs else {}

    # 2. one function returning the total
    model.load_state_dict(base_state)
    total = trl_reward_funcs(rubric, per_component=False)
    print(f"total: functions {total.names}, reward_weights {total.reward_weights}")
    recorder2 = Recorder()
    catcher2 = run_grpo(total, recorder2, tokenizer, model, dataset,
                        f"{opts.out_dir}/total", 2, opts.seed)
    checks += check_calls("total", recorder2, total.names, 2)
    checks += check_logs("total", recorder2, catcher2, total.names, total.reward_weights, 2)
    checks += check_recompute("total", recorder2, rubric, total.names, total.reward_weights)
    same = [a["completions"] == b["completions"] for a, b in
            zip([c for c in recorder.calls if c["func"] == names[0]], recorder2.calls)]
    pairs = [(a["reward"], b["reward"]) for a, b, s in zip(catcher.logs, catcher2.logs, same) if s]
    checks.append(("total vs per-component: same logged reward on steps with the same completions",
                   all(close(a, b) for a, b in pairs),
                   f"{len(pairs)} step(s) compared: {pairs}"))

    # 3. normalize_then_sum with per-component functions: the adapter must say it changes training
    model.load_state_dict(base_state)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_grpo(trl_reward_funcs(rubric), Recorder(), tokenizer, model, dataset,
                 f"{opts.out_dir}/normalize_then_sum", 1, opts.seed,
                 aggregation="normalize_then_sum")
    said = [str(w.message) for w in caught if "normalize_then_sum" in str(w.message)
            and issubclass(w.category, UserWarning)]
    checks.append(("normalize_then_sum: the adapter found the trainer's setting and warned once",
                   len(said) == 1, f"{len(said)} warning(s)"))

    # ---- report
    print("\nTRL passed these keyword arguments (first call): name: type, length, element type")
    for name, (kind, length, first) in calls_seen.items():
        print(f"  {name}: {kind}, {'-' if length is None else length}, {first}")
    firsts = [c for c in recorder.calls if c["func"] == names[0]]
    for step, (call, outputs) in enumerate(zip(firsts, per_step(recorder, names))):
        print(f"step {step + 1} batch (prompt | completion | answer | " + " | ".join(names) + "):")
        for i, (p, c, a) in enumerate(zip(call["prompts"], call["completions"], call["answer"])):
            values = " | ".join(f"{outputs[n][i]}" for n in names)
            print(f"  {p!r} | {c!r} | {a!r} | {values}")
    if first_log:
        keys = {k: v for k, v in first_log.items() if k.startswith("reward")}
        print(f"first per-component log: {keys}")
    print("\nchecks:")
    for what, ok, detail in checks:
        print(f"  [{'PASS' if ok else 'FAIL'}] {what}: {detail}")
    failed = sum(not ok for _, ok, _ in checks)
    print(f"\n{len(checks) - failed}/{len(checks)} checks passed in "
          f"{time.monotonic() - started:.1f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
