"""One scoring process for the judge-limit tests: ``python limits_worker.py SPEC_JSON``.

SPEC: ``base_url``, ``store``, ``prefix`` (rollout ids and prompts), ``count`` (rollouts),
``judge`` (extra judge config keys). Scores the rollouts with one judge through the engine,
in this process, and prints ``{"statuses", "errors", "usage"}`` as JSON.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rewardsmith import Engine, Rollout, Rubric
from rewardsmith.judge import Judge

MODEL = "judge-2024-01-01"


def judge_config(base_url: str, store: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {"base_url": base_url, "model": MODEL, "store": store,
            "template": "Question: {prompt}\nAnswer: {completion}",
            "criteria": {"helpful": "Does the answer help the user?"}, **extra}


def run(spec: dict[str, Any]) -> dict[str, Any]:
    judge = Judge("quality", judge_config(spec["base_url"], spec["store"], spec["judge"]))
    rubric = Rubric(judge.components())
    prefix, count = spec["prefix"], int(spec["count"])
    rollouts = [Rollout(f"{prefix}-{i}", f"{prefix}-g{i // 4}", f"{prefix}: what is {i} * 2?",
                        f"#### {2 * i}", str(2 * i)) for i in range(count)]
    with Engine(rubric, workers=0) as engine:
        scores = engine.score(rollouts)
        usage = engine.usage()["judge:quality"]
    return {"statuses": [s.status.value for s in scores],
            "errors": sorted({e for s in scores for e in s.errors.values()}),
            "usage": usage}


if __name__ == "__main__":
    print(json.dumps(run(json.loads(sys.argv[1]))), flush=True)


def main_to_file(spec: dict[str, Any], path: str) -> None:
    """``run(spec)``, its result written as JSON to ``path`` (for a multiprocessing child)."""
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(run(spec), handle)


class Rank:
    """A trainer rank as a Ray actor: a process of the job that scores with its own engine."""

    def pid(self) -> int:
        import os

        return os.getpid()

    def score(self, spec: dict[str, Any]) -> dict[str, Any]:
        return run(spec)
