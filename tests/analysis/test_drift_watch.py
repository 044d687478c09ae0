"""The drift watch fed step by step from Python: each warning on made-up steps whose figures are
known, its threshold, and the log."""

from __future__ import annotations

import logging

import pytest

from rewardsmith import ConfigError, Rollout, Score
from rewardsmith.analysis import DriftThresholds, DriftWatch
from rewardsmith.analysis.drift_stats import variance_shares


def score(rollout_id: str, group: str, reward: float | None, *, length: float | None = None,
          **components: float | None) -> Score:
    metrics = {} if length is None else {"length": length}
    return Score(rollout_id, group, reward, components=dict(components), metrics=metrics)


def weighted(a: list[float], b: list[float], group: str = "g", wb: float = 0.2) -> list[Score]:
    return [score(f"{group}-{i}", group, x + wb * y, a=x, b=y)
            for i, (x, y) in enumerate(zip(a, b))]


def test_variance_shares_of_a_hand_worked_group() -> None:
    # a = [1, 1, 0, 0], b = [1, 0, 1, 0], reward = a + 0.2 b. Deviations from the group mean:
    # cov(a, R) = 1.0, cov(b, R) = 0.2, var(R) = 1.04, so the shares are 1/1.04 and
    # 0.2 * 0.2 / 1.04; fitted weights recover (1, 0.2) exactly.
    scores = weighted([1, 1, 0, 0], [1, 0, 1, 0])
    fitted = variance_shares(scores, ["a", "b"])
    assert fitted is not None and fitted.fitted
    assert fitted.shares == pytest.approx({"a": 1 / 1.04, "b": 0.04 / 1.04})
    assert fitted.weights == pytest.approx({"a": 1.0, "b": 0.2})
    assert fitted.fit == pytest.approx(1.0)
    given = variance_shares(scores, ["a", "b"], {"a": 1.0, "b": 0.2})
    assert given is not None and not given.fitted
    assert given.shares == pytest.approx(fitted.shares)
    # only within-group spread counts: a second group at another level changes nothing
    shifted = [score(f"h-{i}", "h", s.reward + 5, a=s.components["a"] + 5,  # type: ignore[operator]
                     b=s.components["b"]) for i, s in enumerate(scores)]
    both = variance_shares(scores + shifted, ["a", "b"])
    assert both is not None and both.shares == pytest.approx(fitted.shares)
    # no within-group variance: nothing to split
    assert variance_shares(weighted([1, 1], [0, 0]), ["a", "b"]) is None


def test_dominance_warns_once_while_it_lasts(caplog: pytest.LogCaptureFixture) -> None:
    watch = DriftWatch()
    balanced = weighted([1, 0, 1, 0], [1, 1, 0, 0], wb=1.0)  # a and b: 50% each
    dominated = weighted([1, 1, 0, 0], [1, 0, 1, 0])  # a: 96%
    with caplog.at_level(logging.WARNING, logger="rewardsmith.drift"):
        assert watch.observe(balanced) == []
        first = watch.observe(dominated)
        assert watch.observe(dominated) == []  # still holds: not repeated
        assert watch.observe(balanced) == []
        again = watch.observe(dominated)
    assert [(w.kind, w.step, w.target) for w in first + again] == [
        ("dominance", 2, "a"), ("dominance", 5, "a")]
    assert first[0].value == pytest.approx(1 / 1.04) and first[0].threshold == 0.8
    assert str(first[0]).startswith("step 2: component 'a' holds 96% of the reward's "
                                    "within-group variance (threshold 80%; b 4%)")
    assert [r.getMessage() for r in caplog.records] == [str(first[0]), str(again[0])]
    assert watch.history[0].shares == pytest.approx({"a": 0.5, "b": 0.5})
    # a higher threshold: no warning for 96%
    quiet = DriftWatch(thresholds=DriftThresholds(dominance=0.97))
    assert quiet.observe(dominated) == []


def test_one_component_never_dominates_alone() -> None:
    watch = DriftWatch()
    assert watch.observe([score("x", "g", 1.0, a=1.0), score("y", "g", 0.0, a=0.0)]) == []
    assert watch.history[0].shares == {}


def _groups(flat: int, varied: int) -> list[Score]:
    out = []
    for g in range(flat + varied):
        values = [1.0, 1.0] if g < flat else [1.0, 0.0]
        out += [score(f"{g}-{i}", f"g{g}", v, a=v) for i, v in enumerate(values)]
    return out


def test_zero_variance_groups_past_the_threshold() -> None:
    watch = DriftWatch()
    fractions = [(1, 9), (3, 7), (6, 4), (7, 3), (2, 8), (5, 5)]
    found = [watch.observe(_groups(flat, varied)) for flat, varied in fractions]
    assert [[w.step for w in step] for step in found] == [[], [], [3], [], [], [6]]
    warning = found[2][0]
    assert (warning.kind, warning.value, warning.threshold) == ("zero_variance", 0.6, 0.5)
    assert "6 of 10 groups (60%) have rewards that are all equal" in warning.message
    assert watch.history[0].zero_variance_fraction == 0.1
    # masked rewards do not count as equal ones; a group of one reward is not counted
    lone = DriftWatch()
    lone.observe([score("a", "g", 1.0), score("b", "g", None), score("c", "h", 1.0),
                  score("d", "h", 0.0)])
    assert (lone.history[0].groups, lone.history[0].zero_variance_groups) == (1, 0)


def test_length_drift_from_a_metric() -> None:
    watch = DriftWatch()
    steps = [[100, 120], [115, 125], [150, 160]]  # means 110, 120 (+9%), 155 (+41%)
    found = [watch.observe([score(f"r{i}", "g", float(i), length=n)
                            for i, n in enumerate(lengths)]) for lengths in steps]
    assert [len(f) for f in found] == [0, 0, 1]
    warning = found[2][0]
    assert warning.kind == "length" and warning.value == pytest.approx(155 / 110 - 1)
    assert "mean completion length 155 (metric length) is +41% from the first steps' 110" \
        in warning.message
    shorter = DriftWatch(thresholds=DriftThresholds(length_change=0.5))
    for lengths in [[100], [40]]:
        found_short = shorter.observe([score("r", "g", 1.0, length=lengths[0])])
    assert [w.kind for w in shorter.warnings] == ["length"]  # a group of one: no variance
    assert found_short[0].value == pytest.approx(-0.6)


def test_length_from_rollouts_in_characters_and_from_a_named_metric() -> None:
    watch = DriftWatch(thresholds=DriftThresholds(baseline_steps=2))
    for text in ["x" * 10, "x" * 12, "x" * 30]:
        rollouts = [Rollout("r", "g", completion=text)]
        found = watch.observe([score("r", "g", 1.0)], rollouts=rollouts)
    assert watch.history[0].length_source == "characters"
    assert found[0].value == pytest.approx(30 / 11 - 1)  # baseline: mean of the first two
    tokens = DriftWatch(length_metric="completion_tokens")
    tokens.observe([Score("r", "g", 1.0, metrics={"completion_tokens": 7.0})])
    assert (tokens.history[0].mean_length, tokens.history[0].length_source) == (
        7.0, "metric completion_tokens")
    unknown = DriftWatch()
    unknown.observe([score("r", "g", 1.0)])
    assert unknown.history[0].mean_length is None


def _agreeing(rate: float, rollouts: int = 20) -> list[Score]:
    """A verifier and a judge that disagree on ``rate`` of the rollouts (judge passes them)."""
    disagree = round(rate * rollouts)
    out = []
    for i in range(rollouts):
        verifier = float(i % 2) if i >= disagree else 0.0
        judge = 1.0 if i < disagree else verifier
        out.append(score(f"r{i}", f"g{i // 4}", verifier + judge, correct=verifier,
                         judge=judge))
    return out


def test_a_verifier_and_a_judge_disagreeing_more_and_more() -> None:
    watch = DriftWatch(pairs=[("correct", "judge")])
    rates = [0.05, 0.1, 0.15, 0.25, 0.3]
    found = [watch.observe(_agreeing(rate)) for rate in rates]
    kinds = [[w.kind for w in step if w.kind == "disagreement"] for step in found]
    assert kinds == [[], [], [], ["disagreement"], []]
    warning = next(w for w in found[3] if w.kind == "disagreement")
    assert warning.target == "correct~judge" and warning.value == pytest.approx(0.2)
    assert "'correct' and 'judge' disagree on 25% of rollouts, up from 5%" in warning.message
    figures = watch.history[3].agreement["correct~judge"]
    assert figures["disagreement"] == 0.25 and figures["rollouts"] == 20


def test_high_but_steady_disagreement_is_not_a_trend() -> None:
    watch = DriftWatch(pairs=[("correct", "judge")])
    found = [watch.observe(_agreeing(rate)) for rate in [0.05, 0.3, 0.3, 0.25, 0.25]]
    disagreement = [[w.step for w in step if w.kind == "disagreement"] for step in found]
    # the jump at step 2 is a rise and rising; afterwards it is flat or falling
    assert disagreement == [[], [2], [], [], []]


def test_scored_line_dicts_steps_and_bad_settings() -> None:
    watch = DriftWatch()
    watch.observe([{"id": "a", "group": "g", "reward": 1.0}], step=10)
    watch.observe([{"id": "a", "group": "g", "reward": 0.0}])
    assert [s.step for s in watch.history] == [10, 11]
    with pytest.raises(ConfigError, match="steps must increase: step 11 after step 11"):
        watch.observe([], step=11)
    assert watch.observe([]) == [] and watch.history[-1].reward_mean is None
    with pytest.raises(ConfigError, match="dominance"):
        DriftThresholds(dominance=1.5)
    with pytest.raises(ConfigError, match="trend window"):
        DriftThresholds(trend_window=1)
    with pytest.raises(ConfigError, match="two components"):
        DriftWatch(pairs=[("a", "a")])
    assert watch.to_dict()["steps"][0]["step"] == 10
