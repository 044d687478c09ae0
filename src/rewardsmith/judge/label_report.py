"""The ``judge-eval`` report: a rubric's judges measured against hand labels. It scores
hand-labeled cases with the judges and reports how far to trust each judged criterion (see
``agreement`` for the statistics). Not to be confused with ``evaluator``, which runs a judge.
(Formerly ``rewardsmith.judge.evaluation``, still importable by that name.)

A case is a rollout JSONL line with ``human``: a number (the human score for every judged
criterion) or an object mapping criterion (or component) names to numbers. Besides agreement,
the report holds the position-bias rate (pairwise judges: the mean share of a rollout's pairs
whose verdict followed the order shown), self-consistency (``samples`` > 1: the mean spread of
the samples, and the share of rollouts whose samples all agreed), and what the judges cost.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardsmith.files.rollouts import rollout_from_dict
from rewardsmith.rubric import Rubric

from ..errors import ConfigError, InputError
from ..files.jsonl import read_json_objects
from ..types import Rollout, Score, Status
from .agreement import agreement, pair_order_agreement
from .components import CriterionEvaluator

__all__ = ["Case", "read_cases", "judged_components", "eval_report"]


@dataclass
class Case:
    rollout: Rollout
    human: float | dict[str, float]


def read_cases(path: str | Path) -> list[Case]:
    """The cases of a JSONL file; a line without a usable ``human`` is an error naming it."""
    cases: list[Case] = []
    source = str(path)
    for number, data in read_json_objects(path):
        if "human" not in data:
            raise InputError("missing 'human' (the human score, or an object of scores by "
                             "criterion)", source=source, line=number)
        raw = data.pop("human")
        try:
            human = _human(raw)
            rollout = rollout_from_dict(data, default_id=f"case{number}")
        except ValueError as exc:
            raise InputError(str(exc), source=source, line=number) from None
        cases.append(Case(rollout, human))
    if not cases:
        raise InputError("holds no cases", source=source)
    return cases


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, not {value!r}")
    return float(value)


def _human(raw: Any) -> float | dict[str, float]:
    if isinstance(raw, Mapping):
        return {str(k): _number(v, f"'human.{k}'") for k, v in raw.items()}
    return _number(raw, "'human'")


def _human_for(case: Case, component: str, criterion: str) -> float | None:
    if isinstance(case.human, float):
        return case.human
    return case.human.get(component, case.human.get(criterion))


def judged_components(rubric: Rubric) -> list[tuple[str, CriterionEvaluator]]:
    """Each judged component of ``rubric``: its name and evaluator (an error when none)."""
    found = [(c.name, c.evaluator) for c in rubric.components
             if isinstance(c.evaluator, CriterionEvaluator)]
    if not found:
        raise ConfigError(f"rubric {rubric.name!r} has no judge: component to evaluate")
    return found


def eval_report(rubric: Rubric, cases: list[Case], scores: list[Score],
                usage: Mapping[str, Mapping[str, float]], *,
                binary_threshold: float = 0.5) -> dict[str, Any]:
    """The report over ``cases`` scored by ``rubric`` (``scores`` in case order)."""
    criteria = {name: _criterion_report(name, evaluator, cases, scores, binary_threshold)
                for name, evaluator in judged_components(rubric)}
    costs = {key: dict(value) for key, value in usage.items() if key.startswith("judge:")}
    return {"rubric": rubric.name, "cases": len(cases), "criteria": criteria, "cost": costs}


def _criterion_report(component: str, evaluator: CriterionEvaluator, cases: list[Case],
                      scores: list[Score], threshold: float) -> dict[str, Any]:
    judge_values: list[float] = []
    human_values: list[float] = []
    groups: dict[str, list[tuple[float, float]]] = {}
    unscored = unlabeled = 0
    for case, score in zip(cases, scores, strict=True):
        human = _human_for(case, component, evaluator.criterion)
        value = score.components.get(component)
        if human is None:
            unlabeled += 1
            continue
        if value is None or score.status is Status.ERROR and component in score.errors:
            unscored += 1
            continue
        judge_values.append(value)
        human_values.append(human)
        groups.setdefault(case.rollout.group, []).append((value, human))
    found = agreement(judge_values, human_values, binary_threshold=threshold)
    bias = [s.metrics[f"{component}.position_bias"] for s in scores
            if f"{component}.position_bias" in s.metrics]
    spreads = [s.metrics[f"{component}.spread"] for s in scores
               if f"{component}.spread" in s.metrics]
    config = evaluator.judge.config
    return {
        "judge": evaluator.judge.name, "mode": config.mode, "samples": config.samples,
        **found.to_dict(),
        "pair_order_agreement": pair_order_agreement(list(groups.values())),
        "position_bias_rate": statistics.fmean(bias) if bias else None,
        "self_consistency": ({"mean_spread": statistics.fmean(spreads),
                              "all_samples_agree": sum(s == 0 for s in spreads) / len(spreads)}
                             if spreads else None),
        "unscored": unscored, "unlabeled": unlabeled,
    }
