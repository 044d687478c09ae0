"""Testing a reward before a run: hand-labeled cases, edge cases and hack probes, scored through
the same loader and engine as a real run (worker processes, hard timeouts).

The steps:

1. Load the reward as ``rewardsmith score`` would (``Rubric.single`` or ``Rubric.from_yaml``),
   with the same errors. Built-ins that need params get the ones in ``profiles``.
2. Smoke test: one ordinary correct answer. If it hangs, stop here (every other call would hang
   too, each costing the full timeout).
3. Calibrate: score a correct and a wrong answer of each kind the reward grades (declared for
   built-ins, detected for a user's function). A correct answer's reward is that kind's *full
   credit*, which hack probes must stay below.
4. Score the cases, edge cases and probes, then score them all a second time: a different result
   is non-determinism. Async rewards are scored one at a time first, then all at once, so shared
   state that breaks under concurrency shows up as a difference too.
5. Judge every check (``judge.py``) into a ``TestReport``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardsmith.rubric import Rubric
from rewardsmith.workers import default_worker_count

from ..engine import Engine
from ..errors import ConfigError
from ..rewards import get_builtin
from ..types import Rollout, Score, Status
from .cases import Case, cases_range, load_cases
from .checks import Check, make_rollout
from .edges import edge_checks
from .judge import Judgement, judge
from .judge_probes import judge_probe_rows
from .kinds import DETECTABLE_KINDS, KIND_NAMES, Kind, make_kind, pad_settings
from .probes import probe_checks
from .profiles import default_params, finite_range, rubric_profile, signature_defaults
from .report import TestReport
from .slime_forms import slime_call

__all__ = ["run_reward_tests", "load_reward_for_test"]

RewardSpec = str | Path | Callable[..., Any] | Rubric


def load_reward_for_test(reward: RewardSpec, params: Mapping[str, Any] | None = None,
                         timeout: float | None = None, *, group_rm: bool | None = None,
                         reward_key: str | None = None) -> Rubric:
    """The rubric a run would build for ``reward``: a built-in name, an import path, a rubric
    file (.yaml/.yml), a function or a ``Rubric``. Raises ``LoadError``/``RubricError``.

    A function written as slime's ``custom_rm(args, sample)`` (or ``samples``), or any import
    path with ``group_rm``/``reward_key`` set, is called as slime calls it (``slime_forms``)."""
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise ConfigError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if isinstance(reward, Path):
        reward = str(reward)
    if isinstance(reward, Rubric) or (isinstance(reward, str)
                                      and reward.strip().endswith((".yaml", ".yml"))):
        if params:
            raise ConfigError("params go with a single reward; put them in the rubric file")
        rubric = reward if isinstance(reward, Rubric) else Rubric.from_yaml(reward.strip())
    elif isinstance(reward, str) and get_builtin(reward.strip()) is None and (
            call := slime_call(reward.strip(), group_rm=group_rm, reward_key=reward_key)):
        if params:
            raise ConfigError("a slime custom_rm takes no params: slime calls it with "
                              "(args, sample) only")
        rubric = Rubric.single(call, timeout=timeout, name=reward.strip())
    elif group_rm or reward_key is not None:
        raise ConfigError("--group-rm and --reward-key test a slime custom_rm given by its "
                          "import path (module:func or path/file.py:func)")
    else:
        merged = dict(params or {})
        if isinstance(reward, str) and get_builtin(reward.strip()) is not None:
            merged = {**default_params(reward.strip()), **merged}
        rubric = Rubric.single(reward, params=merged, timeout=timeout)
    if timeout is not None:
        for component in rubric.components:
            component.timeout = timeout
    return rubric


def _reward_name(reward: RewardSpec, rubric: Rubric) -> str:
    if isinstance(reward, (str, Path)):
        return str(reward).strip()
    if isinstance(reward, Rubric):
        return rubric.source if rubric.source != "<python>" else rubric.name
    return rubric.name


class _Scorer:
    """Scores checks with one engine; async rewards one at a time or all at once."""

    def __init__(self, engine: Engine, has_async: bool):
        self.engine = engine
        self.has_async = has_async
        self._count = 0

    def stamp(self, check: Check) -> Check:
        self._count += 1
        name = f"check-{self._count}"
        return dataclasses.replace(check, rollout=dataclasses.replace(check.rollout, id=name,
                                                                      group=name))

    def score(self, rollouts: Sequence[Rollout], *, together: bool) -> list[Score]:
        if not rollouts:
            return []
        if self.has_async and together:
            return self.engine.score(rollouts)  # one batch: every async call at once
        if self.has_async:
            return [self.engine.score_group([r])[0] for r in rollouts]
        return [s for group in self.engine.stream([r] for r in rollouts) for s in group]


def _kind_params(rubric: Rubric) -> tuple[dict[str, Any], tuple[int, str] | None]:
    """The first component's params (for kinds named by the user) and the rubric's length limit."""
    first: dict[str, Any] = {}
    pads: list[tuple[int, str]] = []
    for index, component in enumerate(rubric.components):
        params = {**signature_defaults(component.func), **component.params}
        if index == 0:
            first = params
        pad = pad_settings(params)
        if pad is not None:
            pads.append(pad)
    return first, (min(pads) if pads else None)


def _candidate_kinds(rubric: Rubric, kinds: Sequence[str] | None
                     ) -> tuple[list[Kind], set[str], list[str]]:
    """(kinds to calibrate, the names of those to detect rather than take as declared, notes)."""
    first_params, pad = _kind_params(rubric)
    pad = pad or (4096, "chars")
    if kinds is not None:
        names = [k.strip() for k in kinds if k.strip()]
        if names == ["none"]:
            return [], set(), ["no kind named: hack probes are not run"]
        if "auto" in names:
            return [make_kind(n, first_params, pad) for n in DETECTABLE_KINDS], \
                set(DETECTABLE_KINDS), []
        unknown = [n for n in names if n not in KIND_NAMES]
        if unknown:
            raise ConfigError(f"unknown kind(s) {', '.join(map(repr, unknown))}; known kinds: "
                              f"{', '.join(KIND_NAMES)}, or 'auto' / 'none'")
        return [make_kind(n, first_params, pad) for n in dict.fromkeys(names)], set(), []
    profile = rubric_profile(rubric)
    declared: dict[str, Kind] = {}
    for name, params in profile.declared:
        declared.setdefault(name, make_kind(name, params, pad))
    if not profile.detect:
        return list(declared.values()), set(), []
    detected = [make_kind(n, first_params, pad) for n in DETECTABLE_KINDS if n not in declared]
    return list(declared.values()) + detected, {k.name for k in detected}, []


def run_reward_tests(
    reward: RewardSpec,
    *,
    cases: str | Path | Sequence[Case] | None = None,
    params: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    edges: bool = True,
    probes: bool = True,
    kinds: Sequence[str] | None = None,
    value_range: tuple[float, float] | None = None,
    workers: int | None = None,
    group_rm: bool | None = None,
    reward_key: str | None = None,
) -> TestReport:
    """Test ``reward`` on ``cases`` (a JSONL path or ``Case`` list), edge cases and hack probes.

    ``kinds`` names what the reward grades (see ``KIND_NAMES``; ``["auto"]`` to detect,
    ``["none"]`` for no probes); by default built-ins use their declared kinds and other rewards
    are detected. ``value_range`` is the allowed (low, high); by default a built-in's own range,
    else the span of the cases' expected values, else any finite number. ``group_rm`` and
    ``reward_key`` call a slime/Miles ``custom_rm`` as slime does with ``--group-rm`` and
    ``--reward-key`` (``slime_forms``). Load errors raise
    (``LoadError``, ``RubricError``, ``InputError`` for a bad cases file); a reward's failures
    never do: they are rows of the report.
    """
    started = time.perf_counter()
    case_list = list(load_cases(cases) if isinstance(cases, (str, Path)) else (cases or []))
    rubric = load_reward_for_test(reward, params, timeout, group_rm=group_rm,
                                  reward_key=reward_key)
    if value_range is not None and not (value_range[0] <= value_range[1]):
        raise ConfigError(f"the range {value_range!r} is empty: low must be <= high")
    declared_range = value_range or rubric_profile(rubric).value_range or cases_range(case_list)
    candidates, detecting, notes = _candidate_kinds(rubric, kinds)
    timeouts = sorted({f"{c.timeout:g} s" for c in rubric.components if c.timeout is not None})
    report = TestReport(_reward_name(reward, rubric), [], declared_range,
                        ", ".join(timeouts) or f"{rubric.timeout:g} s", notes=notes)
    if any(c.group for c in rubric.components):
        report.notes.append("group reward: each input is scored as a group of one")
    has_async = any(c.is_async for c in rubric.components)
    # Every failure is reported case by case here, even one that repeats on every input.
    with Engine(rubric, workers=min(2, default_worker_count()) if workers is None else workers,
                stop_on_systematic=False) as engine:
        engine.check()
        scorer = _Scorer(engine, has_async)
        _run(scorer, report, candidates, detecting, case_list, edges, probes)
        if probes:  # a rubric with LLM judges: completions that try to sway them
            report.rows.extend(judge_probe_rows(scorer, rubric,
                                                [case.rollout for case in case_list]))
    report.seconds = time.perf_counter() - started
    return report


def _run(scorer: _Scorer, report: TestReport, candidates: list[Kind], detecting: set[str],
         case_list: list[Case], edges: bool, probes: bool) -> None:
    smoke_kind = candidates[0] if candidates else make_kind("number")
    smoke = scorer.stamp(Check("calibration", "smoke test: an ordinary correct answer",
                               make_rollout(smoke_kind.correct, smoke_kind.label,
                                            prompt=smoke_kind.question,
                                            state=smoke_kind.state), key="smoke"))
    [smoke_score] = scorer.score([smoke.rollout], together=False)
    if smoke_score.status is Status.TIMEOUT:
        verdict = judge(smoke, smoke_score, None, Judgement({}, {}, None, None))
        report.rows.append(verdict)
        report.notes.append("stopped after the smoke test: the reward hangs on an ordinary "
                            "answer, so every other check would hang too")
        return
    calibration = _calibration_checks(candidates, detecting)
    calibration = [scorer.stamp(c) for c in calibration]
    first = dict(zip((c.key for c in calibration),
                     scorer.score([c.rollout for c in calibration], together=False)))
    confirmed, full = _confirm(candidates, detecting, first, report)
    report.kinds = [k.name for k in confirmed]
    shown = [c for c in calibration if c.key.split(":")[1] in report.kinds
             and not c.key.endswith(":unmarked")]
    checks = [scorer.stamp(c) for c in _checks(confirmed, case_list, edges, probes)]
    first.update(zip((c.key for c in checks),
                     scorer.score([c.rollout for c in checks], together=False)))
    table = shown + checks
    again = [c for c in table if first[c.key].status is not Status.TIMEOUT]
    second = dict(zip((c.key for c in again),
                      scorer.score([c.rollout for c in again], together=True)))
    # Answer-free edge cases must stay below the least any graded kind's correct answer gets.
    graded = [full[k.name] for k in confirmed if k.grades_answers]
    edge_threshold = min((v for v in graded if v is not None), default=None)
    context = Judgement(first, full, edge_threshold, report.value_range,
                        concurrent=scorer.has_async)
    report.rows.extend(judge(c, first[c.key], second.get(c.key), context) for c in table)


def _calibration_checks(candidates: list[Kind], detecting: set[str]) -> list[Check]:
    out: list[Check] = []
    for kind in candidates:
        if not kind.calibrated:
            continue
        prefix = f"cal:{kind.name}"
        out.append(Check("calibration", f"{kind.name}: a correct answer",
                         make_rollout(kind.correct, kind.label, prompt=kind.question,
                                      state=kind.state),
                         key=f"{prefix}:correct", calibrates=f"{prefix}:wrong",
                         rule="above the wrong answer"))
        wrong_rule = "any value" if not kind.wrong_truncated else "any value (cut at the limit)"
        out.append(Check("calibration", f"{kind.name}: a wrong answer",
                         make_rollout(kind.wrong, kind.label, prompt=kind.question,
                                      truncated=kind.wrong_truncated, state=kind.state),
                         key=f"{prefix}:wrong", rule=wrong_rule))
        if kind.name in detecting and kind.unmarked is not None:
            out.append(Check("calibration", f"{kind.name}: the answer without its marker",
                             make_rollout(kind.unmarked, kind.label, prompt=kind.question),
                             key=f"{prefix}:unmarked"))
    return out


def _value(score: Score | None) -> float | None:
    if score is None or score.status is not Status.OK or score.reward is None:
        return None
    return score.reward if math.isfinite(score.reward) else None


def _confirm(candidates: list[Kind], detecting: set[str], first: dict[str, Score],
             report: TestReport) -> tuple[list[Kind], dict[str, float | None]]:
    """Which kinds the reward grades, and each one's full credit (None when unknown)."""
    confirmed: list[Kind] = []
    full: dict[str, float | None] = {}
    for kind in candidates:
        prefix = f"cal:{kind.name}"
        if not kind.calibrated:
            confirmed.append(kind)
            span = report.value_range
            full[kind.name] = span[1] if span is not None and finite_range(span) else None
            if full[kind.name] is None:
                report.notes.append(f"{kind.name}: probes are not judged without a range "
                                    f"(give --range LOW,HIGH; full credit is HIGH)")
            continue
        correct, wrong = _value(first.get(f"{prefix}:correct")), _value(first.get(f"{prefix}:wrong"))
        unmarked = _value(first.get(f"{prefix}:unmarked"))
        above = correct is not None and wrong is not None and correct > wrong
        if kind.name in detecting:
            marked = kind.unmarked is None or (
                correct is not None and unmarked is not None and correct > unmarked)
            if above and marked:
                confirmed.append(kind)
                full[kind.name] = correct
            continue
        confirmed.append(kind)
        full[kind.name] = correct if above else None
        if not above:
            report.notes.append(f"{kind.name}: probes are not judged, because a correct answer "
                                f"did not score above a wrong one")
    if detecting:
        found = [k for k in confirmed if k.name in detecting]
        if found:
            described = "; ".join(f"{k.name} ({k.description})" for k in found)
            report.notes.append(f"detected what the reward grades: {described}")
        elif not confirmed:
            report.notes.append("could not tell what this reward grades (no known kind of correct "
                                "answer scored above a wrong one), so hack probes were not run "
                                "and edge cases are not checked for full credit; name the kind "
                                f"with --kind ({', '.join(KIND_NAMES)})")
    return confirmed, full


def _checks(confirmed: list[Kind], case_list: list[Case], edges: bool,
            probes: bool) -> list[Check]:
    out = [Check("case", case.name, case.rollout, key=f"case:{index}", expect=case.expected,
                 allow_error=case.expected.kind == "error",
                 rule=case.expected.describe())
           for index, case in enumerate(case_list)]
    if edges:
        primary = confirmed[0] if confirmed else make_kind("number")
        out.extend(edge_checks(primary, judged=bool(confirmed)))
    if probes:
        for kind in confirmed:
            out.extend(probe_checks(kind))
    return out

