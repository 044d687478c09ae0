"""Regenerate the bundled demo rollouts (deterministic): python scripts/make_demo_data.py"""

from __future__ import annotations

import json
import random
from pathlib import Path

QUESTIONS = [
    ("Natalia sold clips to 48 friends in April, and half as many in May. How many in all?", 72,
     "In May she sold 48 / 2 = 24 clips. In all she sold 48 + 24 = 72 clips."),
    ("Weng earns $12 an hour babysitting. Yesterday she did 50 minutes. How much did she earn?",
     10, "She earns 12 / 60 = $0.2 a minute, so 0.2 * 50 = $10."),
    ("Betty needs $100 for a wallet. She has half of it, her parents give $15 and her "
     "grandparents twice that. How much more does she need?", 5,
     "She has 100 / 2 = 50. Grandparents give 15 * 2 = 30. 100 - 50 - 15 - 30 = 5."),
    ("James writes a 3-page letter to 2 friends twice a week. How many pages a year?", 624,
     "Each week he writes 3 * 2 * 2 = 12 pages, so 12 * 52 = 624 pages a year."),
    ("A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts?", 3,
     "White fiber is 2 / 2 = 1 bolt, so the total is 2 + 1 = 3 bolts."),
    ("Josh buys a house for $80,000 and spends $50,000 on repairs, raising its value by 150%. "
     "What is his profit?", 70000,
     "The value rises by 80,000 * 1.5 = 120,000 to 200,000. Cost 130,000. Profit 70,000."),
    ("Toulouse has twice as many sheep as Charleston, who has 4 times as many as Seattle, "
     "which has 20. How many sheep together?", 260,
     "Charleston 4 * 20 = 80, Toulouse 2 * 80 = 160. Together 20 + 80 + 160 = 260."),
    ("Carla downloads a 200 GB file at 2 GB a minute, but a restart 40% through costs 20 "
     "minutes and starts over. How long in minutes?", 160,
     "40% of 200 is 80 GB: 40 minutes. Restart 20 minutes. Then 200 / 2 = 100 minutes. "
     "40 + 20 + 100 = 160."),
]


def completion(rng: random.Random, reasoning: str, answer: int, kind: str) -> dict[str, object]:
    shown = f"{answer:,}" if rng.random() < 0.3 else str(answer)
    if kind == "correct":
        return {"completion": f"{reasoning}\n#### {shown}"}
    if kind == "no_marker":
        return {"completion": f"{reasoning} So the answer is {shown}."}
    if kind == "wrong":
        return {"completion": f"{reasoning}\n#### {answer + rng.choice([-10, -1, 1, 2, 12])}"}
    if kind == "empty":
        return {"completion": ""}
    if kind == "truncated":
        return {"completion": reasoning[: len(reasoning) // 2], "finish_reason": "length"}
    if kind == "chat":
        return {"completion": [{"role": "assistant", "content": f"{reasoning}\n#### {shown}"}]}
    if kind == "dollars":
        return {"completion": f"{reasoning}\n#### ${answer}.00"}
    raise ValueError(kind)


def main() -> None:
    rng = random.Random(7)
    kinds = ["correct", "correct", "no_marker", "wrong", "wrong", "empty", "truncated", "chat",
             "dollars"]
    lines = []
    for q_index, (question, answer, reasoning) in enumerate(QUESTIONS):
        # Some groups all right or all wrong: they teach nothing, and the summary says so.
        group_kinds = (["correct"] * 8 if q_index == 4 else ["wrong"] * 8 if q_index == 6
                       else [rng.choice(kinds) for _ in range(8)])
        for sample, kind in enumerate(group_kinds):
            record = {"id": f"q{q_index}-s{sample}", "group_id": f"q{q_index}", "prompt": question,
                      "label": f"#### {answer}"}
            record.update(completion(rng, reasoning, answer, kind))
            lines.append(json.dumps(record, ensure_ascii=False))
    target = Path(__file__).resolve().parent.parent / "src/rewardsmith/data/demo_rollouts.jsonl"
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(lines)} rollouts to {target}")


if __name__ == "__main__":
    main()
