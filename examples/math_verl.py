"""Math rewards for verl, through rewardsmith's verl adapter, called the way verl calls it.

In verl's config (verl 0.9; before 0.9 the same keys without the ``reward.`` prefix):

    reward.custom_reward_function.path=pkg://rewardsmith.integrations.verl
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.rubric=examples/rubrics/math.yaml

verl loads ``compute_score`` from the module's file and binds ``reward_kwargs`` to it. Its
``naive`` reward manager then calls it once per response, with keyword arguments::

    compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...)

puts ``score`` at the response's last token and every other key into ``reward_extra_info``.
The ``batch`` manager (verl before 0.9) calls it once per batch, with numpy object arrays::

    compute_score(data_sources=..., solution_strs=..., ground_truths=..., extra_infos=...)

This script does both, on MATH-style responses (equivalent answers in other spellings, a wrong
one, one without a box, one cut at the length limit), and checks they agree. verl itself is not
needed; ``scripts/check_verl_reward.py`` runs the adapter inside verl's own managers.

    python examples/math_verl.py
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np

import rewardsmith.integrations.verl as verl_adapter

RUBRIC = Path(__file__).resolve().parent / "rubrics" / "math.yaml"

# (prompt, response, ground truth): responses as verl decodes them (special tokens skipped).
SAMPLES = [
    ("What is 1/2 + 1/4?", "We add: 2/4 + 1/4 = 3/4, so the answer is $\\boxed{\\frac{3}{4}}$.",
     "\\frac{3}{4}"),
    ("What is 1/2 + 1/4?", "In decimals: 0.5 + 0.25 = \\boxed{0.75}", "\\frac{3}{4}"),
    ("What is 1/2 + 1/4?", "It is \\boxed{\\frac{2}{6}}", "\\frac{3}{4}"),
    ("What is 1/2 + 1/4?", "The answer is 3/4.", "\\frac{3}{4}"),
    ("Expand (x+1)^2.", "Squaring gives \\boxed{x^2+2x+1}", "(x+1)^2"),
    ("Solve x^2 = 4 for x > 0.", "So $x = \\boxed{2}$", "x=2"),
    ("Solve x^2 = 4 for x > 0.", "Let me think step by step. " * 170, "2"),
]


def load_like_verl() -> Any:
    """What verl's ``get_custom_reward_fn`` does: import the file, bind ``reward_kwargs``."""
    path = verl_adapter.__file__
    spec = importlib.util.spec_from_file_location("custom_module", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["custom_module"] = module
    spec.loader.exec_module(module)
    return functools.partial(module.compute_score, rubric=str(RUBRIC))


def main() -> int:
    compute_score = load_like_verl()
    per_sample = []
    for index, (prompt, response, truth) in enumerate(SAMPLES):
        # the naive manager: one call per response, keyword arguments
        result = compute_score(data_source="math", solution_str=response, ground_truth=truth,
                               extra_info={"index": index // 4, "question": prompt})
        per_sample.append(result)
        shown = response if len(response) < 60 else response[:45] + "..."
        print(f"score {result['score']:5.2f}  acc {result['acc']:.0f}  correct "
              f"{result['correct']:.0f}  overlong {result['overlong']:+.2f}  {shown}")

    # the batch manager: one call for the whole batch, numpy object arrays
    batch = compute_score(
        data_sources=np.array(["math"] * len(SAMPLES), dtype=object),
        solution_strs=np.array([s[1] for s in SAMPLES], dtype=object),
        ground_truths=np.array([s[2] for s in SAMPLES], dtype=object),
        extra_infos=np.array([{"index": i // 4, "question": s[0]} for i, s in enumerate(SAMPLES)],
                             dtype=object))
    batch_scores = [item["score"] if isinstance(item, dict) else item for item in batch]
    if [r["score"] for r in per_sample] != batch_scores:
        print(f"the batch form disagrees: {batch_scores}", file=sys.stderr)
        return 1
    expected_correct = [1, 1, 0, 0, 1, 1, 0]
    got = [round(r["correct"]) for r in per_sample]
    if got != expected_correct:
        print(f"unexpected verdicts {got}, expected {expected_correct}", file=sys.stderr)
        return 1
    print(f"{len(SAMPLES)} samples: the per-sample and batch forms agree; keys of each sample: "
          + ", ".join(sorted(per_sample[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
