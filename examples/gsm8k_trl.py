"""GSM8K rewards for TRL's GRPOTrainer, through rewardsmith's TRL adapter.

In a training script the wiring is three lines (TRL needs torch and a model, so this example
does not import it):

    from rewardsmith.integrations.trl import trl_reward_funcs

    funcs = trl_reward_funcs("examples/rubrics/gsm8k.yaml")     # one function per component
    config = GRPOConfig(..., num_generations=4, reward_weights=funcs.reward_weights)
    trainer = GRPOTrainer(model=..., args=config, reward_funcs=funcs, train_dataset=dataset)

What runs here is the part of a training step that touches rewards, done the way
``GRPOTrainer`` does it: every reward function is called with TRL's own keyword arguments,
``prompts``, ``completions`` and ``completion_ids`` (one entry per completion, the
``num_generations`` completions of a prompt side by side), every other dataset column as a list
(here ``answer`` and ``level``), and ``trainer_state``. TRL then turns ``None`` into NaN,
multiplies each function's column by its entry in ``reward_weights``, adds them with
``nansum`` and normalizes within each group. The script checks that this total equals the
rubric's own reward for every completion, and prints the advantages TRL would train on.

    python examples/gsm8k_trl.py              # 2 prompts x 4 completions
    python examples/gsm8k_trl.py --prompts 8  # a bigger batch

``scripts/check_trl_grpo.py`` runs the same functions inside a real ``GRPOTrainer`` (it needs
``pip install trl``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from rewardsmith import Rollout, Rubric, compute_advantages, score_rollouts
from rewardsmith.integrations.trl import trl_reward_funcs

RUBRIC = Path(__file__).resolve().parent / "rubrics" / "gsm8k.yaml"
NUM_GENERATIONS = 4

QUESTIONS = [
    ("Natalia sold clips to 48 friends in April, and half as many in May. How many in all?",
     "In May she sold 48 / 2 = 24 clips, so 48 + 24 = 72.\n#### 72", 72),
    ("Weng earns $12 an hour babysitting. Yesterday she did 50 minutes. How much did she earn?",
     "12 / 60 = 0.2 a minute, so 0.2 * 50 = 10.\n#### 10", 10),
    ("A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts?",
     "White fiber is 2 / 2 = 1 bolt, so 2 + 1 = 3.\n#### 3", 3),
]


def completions_for(value: int) -> list[str]:
    """Four samples of one prompt: right with the marker, right without, wrong, marker twice."""
    return [
        f"Working it out step by step, the total is {value}.\n#### {value}",
        f"The answer is {value}.",
        f"I think it is {value + 1}.\n#### {value + 1}",
        f"#### {value}\n#### {value}",
    ]


def trl_batch(prompts_wanted: int) -> list[dict[str, Any]]:
    """The rows GRPOTrainer hands to its reward step: each prompt repeated num_generations
    times, each row with its completion (conversational format: chat messages)."""
    rows = []
    for index in range(prompts_wanted):
        question, solution, value = QUESTIONS[index % len(QUESTIONS)]
        question = f"{question} (variant {index})"
        for text in completions_for(value):
            rows.append({"prompt": [{"role": "user", "content": question}],
                         "completion": [{"role": "assistant", "content": text}],
                         "answer": solution, "level": index % 3})
    return rows


def call_like_grpo_trainer(funcs: Any, rows: list[dict[str, Any]]) -> np.ndarray:
    """GRPOTrainer's reward step: the calls it makes and how it combines their outputs."""
    prompts = [row["prompt"] for row in rows]
    completions = [row["completion"] for row in rows]
    # Token ids of each completion: TRL passes its tokenizer's; any list of ints stands in here.
    completion_ids = [list(row["completion"][0]["content"].encode()) for row in rows]
    keys = [key for key in rows[0] if key not in ("prompt", "completion", "completion_ids")]
    reward_kwargs: dict[str, Any] = {key: [row[key] for row in rows] for key in keys}
    reward_kwargs["trainer_state"] = SimpleNamespace(global_step=0, epoch=0.0)  # TrainerState
    columns = []
    for func in funcs:
        output = func(prompts=prompts, completions=completions, completion_ids=completion_ids,
                      **reward_kwargs)
        columns.append([np.nan if value is None else value for value in output])
    rewards_per_func = np.array(columns, dtype=np.float32).T
    weights = np.array(funcs.reward_weights, dtype=np.float32)
    totals: np.ndarray = np.nansum(rewards_per_func * weights, axis=1)
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=2, help="prompts in the batch")
    args = parser.parse_args(argv)

    funcs = trl_reward_funcs(str(RUBRIC))
    print("reward_funcs:", [f.__name__ for f in funcs], "reward_weights:", funcs.reward_weights)
    rows = trl_batch(args.prompts)
    totals = call_like_grpo_trainer(funcs, rows)

    # The rubric's own reward for the same completions, to check TRL's weighted sum against.
    rollouts = [Rollout(id=str(i), group=row["prompt"][0]["content"],
                        prompt=row["prompt"][0]["content"],
                        completion=row["completion"][0]["content"], answer=row["answer"])
                for i, row in enumerate(rows)]
    expected = [score.reward for score in score_rollouts(Rubric.from_yaml(RUBRIC), rollouts,
                                                         workers=0)]
    groups = [i // NUM_GENERATIONS for i in range(len(rows))]
    advantages = compute_advantages([float(t) for t in totals], groups, trainer="trl",
                                    dtype="float32")
    failures = 0
    for i, row in enumerate(rows):
        text = row["completion"][0]["content"].replace("\n", " | ")
        want = expected[i]
        same = want is not None and abs(float(totals[i]) - want) < 1e-6
        failures += not same
        print(f"group {groups[i]}  reward {totals[i]:5.2f}  advantage {advantages[i]:+.3f}  "
              f"{'ok ' if same else 'MISMATCH'} {text[:50]}")
    if failures:
        print(f"{failures} completions where TRL's weighted sum differs from the rubric",
              file=sys.stderr)
        return 1
    print(f"TRL's weighted sum equals the rubric's reward for all {len(rows)} completions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
