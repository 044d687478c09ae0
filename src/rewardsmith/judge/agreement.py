"""How far a judge agrees with people: accuracy, Cohen's kappa, Spearman, confusion matrix,
and pair-order agreement within groups. Pure functions over paired lists, no I/O.

Labels for accuracy, kappa and the confusion matrix: the human scores' distinct values are the
categories (a 1-5 scale gives five); a judge score counts as the nearest category (ties go to
the lower). When the people gave only 0 and 1, the judge's score passes at ``threshold``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Agreement", "agreement", "cohen_kappa", "spearman", "pair_order_agreement"]


@dataclass
class Agreement:
    """The agreement of one criterion's judge scores with the human ones."""

    cases: int
    accuracy: float | None
    kappa: float | None
    spearman: float | None
    labels: list[float] = field(default_factory=list)
    confusion: list[list[int]] = field(default_factory=list)  # rows: human label, columns: judge

    def to_dict(self) -> dict[str, object]:
        return {"cases": self.cases, "accuracy": self.accuracy, "kappa": self.kappa,
                "spearman": self.spearman, "labels": self.labels, "confusion": self.confusion}


def _label(value: float, labels: Sequence[float], threshold: float | None) -> float:
    if threshold is not None:
        return 1.0 if value >= threshold else 0.0
    return min(labels, key=lambda label: (abs(label - value), label))


def agreement(judge: Sequence[float], human: Sequence[float], *,
              binary_threshold: float = 0.5) -> Agreement:
    """Agreement over paired scores (same length; at least one pair)."""
    if len(judge) != len(human):
        raise ValueError(f"{len(judge)} judge scores for {len(human)} human scores")
    if not judge:
        return Agreement(0, None, None, None)
    labels = sorted(set(human))
    threshold = binary_threshold if set(labels) <= {0.0, 1.0} else None
    if threshold is not None:
        labels = [0.0, 1.0]
    given = [_label(v, labels, threshold) for v in judge]
    index = {label: i for i, label in enumerate(labels)}
    confusion = [[0] * len(labels) for _ in labels]
    for h, j in zip(human, given, strict=True):
        confusion[index[h]][index[j]] += 1
    accuracy = sum(h == j for h, j in zip(human, given, strict=True)) / len(human)
    return Agreement(len(judge), accuracy, cohen_kappa(confusion), spearman(judge, human),
                     labels, confusion)


def cohen_kappa(confusion: Sequence[Sequence[int]]) -> float | None:
    """Cohen's kappa of a square confusion matrix; None when chance agreement is total."""
    total = sum(sum(row) for row in confusion)
    if total == 0:
        return None
    observed = sum(confusion[i][i] for i in range(len(confusion))) / total
    rows = [sum(row) / total for row in confusion]
    columns = [sum(row[i] for row in confusion) / total for i in range(len(confusion))]
    expected = sum(r * c for r, c in zip(rows, columns, strict=True))
    if math.isclose(expected, 1.0):
        return None  # one label only: agreement by chance is certain
    return (observed - expected) / (1.0 - expected)


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for k in range(start, end + 1):
            ranks[order[k]] = (start + end) / 2 + 1  # ties share their mean rank
        start = end + 1
    return ranks


def spearman(first: Sequence[float], second: Sequence[float]) -> float | None:
    """Spearman's rank correlation (Pearson over mean ranks); None when either is constant."""
    if len(first) < 2:
        return None
    a, b = _ranks(first), _ranks(second)
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    cov = sum((x - mean_a) * (y - mean_b) for x, y in zip(a, b, strict=True))
    var_a = sum((x - mean_a) ** 2 for x in a)
    var_b = sum((y - mean_b) ** 2 for y in b)
    if var_a == 0 or var_b == 0:
        return None
    return cov / math.sqrt(var_a * var_b)


def pair_order_agreement(groups: Sequence[Sequence[tuple[float, float]]]) -> float | None:
    """Over pairs in a group that people ranked apart, the share the judge orders the same
    way (a judge tie counts half); None when no such pair exists."""
    agree = 0.0
    pairs = 0
    for members in groups:
        for i in range(len(members)):
            for j in range(i + 1, len(members)):
                (judge_i, human_i), (judge_j, human_j) = members[i], members[j]
                if human_i == human_j:
                    continue
                pairs += 1
                if judge_i == judge_j:
                    agree += 0.5
                elif (judge_i > judge_j) == (human_i > human_j):
                    agree += 1.0
    return agree / pairs if pairs else None
