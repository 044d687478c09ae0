"""The report's sections, each from the numbers in ``ReportData`` to HTML."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..types import Rollout
from .analysis import AdvantageStats, Distribution, GroupStats, Latency
from .compare import Comparison
from .page import Section, count, esc, figure, number, seconds, share, signed, table
from .plots import PALETTE, Plotter
from .scored import ScoredColumns
from .step_section import step_section
from .steps import StepCurve
from .store_info import StoreFacts, spec_text

__all__ = ["ReportData", "linked_ids", "sections"]

_TEXT_LIMIT = 6000  # characters of a prompt or completion shown in a rollout's details
_TIMING_HINT = ("score with <code>rewardsmith score ROLLOUTS --rubric RUBRIC --timing</code> "
                "to record each component's seconds per rollout in the scored file")


@dataclass
class ReportData:
    """Everything the page shows, computed before any HTML is written."""

    scored: ScoredColumns
    statuses: dict[str, int]
    reward: Distribution
    components: list[Distribution]
    groups: GroupStats
    advantages: list[AdvantageStats]
    file_advantage: Distribution | None
    latency: Latency | None
    store: StoreFacts | None = None
    comparison: Comparison | None = None
    other: ScoredColumns | None = None
    texts: dict[str, Rollout] = field(default_factory=dict)
    text_source: str | None = None  # where the rollouts' text came from
    warnings: list[str] = field(default_factory=list)
    steps: StepCurve | None = None  # the reward curve over training steps


def _link(row: int, scored: ScoredColumns) -> str:
    return f'<a href="#rollout-{row}"><code>{esc(scored.ids[row])}</code></a>'


def _warnings(data: ReportData) -> Section | None:
    if not data.warnings:
        return None
    items = "".join(f"<li>{esc(w)}</li>" for w in data.warnings)
    return Section("warnings", "Warnings", f'<div class="warnings"><ul>{items}</ul></div>')


def _overview(data: ReportData) -> Section:
    scored = data.scored
    rows = [("scored file", f"<code>{esc(scored.source)}</code>"),
            ("rollouts", count(len(scored))),
            ("groups", count(data.groups.groups)),
            ("components", esc(", ".join(scored.components) or "none"))]
    if data.store is not None:
        run = data.store.run
        rows += [("rubric", f"{esc(run.rubric_name or '-')} "
                            f"(id <code>{esc(run.rubric_id or '-')}</code>)"),
                 ("run", f"<code>{esc(run.id)}</code> in <code>{esc(data.store.path)}</code> "
                         f"({esc(run.kind)}, {esc(run.status)})")]
    if data.comparison is not None:
        rows.append(("compared with", f"<code>{esc(data.comparison.other)}</code>"))
    body = _glance(data) + table(["", ""], ([esc(k), v] for k, v in rows))
    return Section("overview", "Overview", body)


def _glance(data: ReportData) -> str:
    """The few numbers to read first, as cards."""
    total = len(data.scored)
    failed = data.statuses.get("error", 0) + data.statuses.get("timeout", 0)
    broken = [a.trainer for a in data.advantages if a.broken_groups]
    cards = [("rollouts", count(total), f"{count(data.groups.groups)} groups"),
             ("mean reward", number(data.reward.mean),
              f"std {number(data.reward.std)}, {count(data.reward.missing)} without one"),
             ("failed", share(failed, total), f"{count(failed)} errors and timeouts"),
             ("zero-variance groups", share(data.groups.zero_variance, data.groups.groups),
              f"{count(data.groups.zero_variance)} teach nothing")]
    trainers = ", ".join(broken[:3]) + ("…" if len(broken) > 3 else "")
    cards.append(("trainers with broken groups", str(len(broken)),
                  trainers or "equal rewards get 0 everywhere"))
    if data.latency is not None and data.latency.components:
        slowest = data.latency.components[0]
        cards.append(("slowest component", esc(slowest.name),
                      f"p99 {seconds(slowest.p99)}, {seconds(slowest.total)} in all"))
    if data.comparison is not None:
        moved = data.comparison.components[0]
        cards.append(("reward vs baseline", signed(moved.delta),
                      f"{count(moved.changed)} rollouts changed"))
    return '<div class="cards">' + "".join(
        f'<div class="card"><div class="label">{esc(label)}</div>'
        f'<div class="value">{value}</div><div class="muted">{esc(note)}</div></div>'
        for label, value, note in cards) + "</div>"


def _statuses(data: ReportData, plots: Plotter) -> Section:
    total = len(data.scored)
    rows = [[esc(name), count(n), share(n, total)] for name, n in data.statuses.items()]
    body = '<div class="side">' + table(["status", "rollouts", "share"], rows,
                                        numeric=[False, True, True])
    colors = [PALETTE[2], PALETTE[3], PALETTE[1], PALETTE[7]]
    body += figure(plots.bars(list(data.statuses), list(data.statuses.values()),
                              xlabel="rollouts", colors=colors), "Rollouts per status.",
                   "statuses") + "</div>"
    failures = [[esc(name), count(f["error"]), count(f["timeout"]), count(f["masked"])]
                for name, f in data.scored.failures.items()]
    if failures:
        body += "<h3>Why a component has no value</h3>"
        body += table(["component", "error", "timeout", "abstained (masked)"], failures,
                      numeric=[False, True, True, True])
    return Section("statuses", "Statuses", body)


def _distribution_row(d: Distribution) -> list[str]:
    return [esc(d.name), count(d.count), count(d.missing), number(d.mean), number(d.std),
            number(d.minimum), number(d.median), number(d.maximum)]


def _histogram(plots: Plotter, d: Distribution, color: str) -> str:
    if not d.count:
        return f'<p class="note">{esc(d.name)}: no values.</p>'
    how = "one bar per value" if d.discrete else f"{len(d.counts)} bins"
    return figure(plots.histogram(d.counts, d.edges, discrete=d.discrete, xlabel=d.name,
                                  color=color),
                  f"{d.name}: {d.count:,} values, {how}.", f"hist-{d.name}")


def _rewards(data: ReportData, plots: Plotter) -> Section:
    series = [data.reward, *data.components]
    body = table(["", "values", "null", "mean", "std", "min", "median", "max"],
                 (_distribution_row(d) for d in series),
                 numeric=[False] + [True] * 7)
    body += '<div class="grid">'
    for index, d in enumerate(series):
        body += _histogram(plots, d, PALETTE[index % len(PALETTE)])
    body += "</div>"
    return Section("rewards", "Reward and components", body)


def _groups(data: ReportData, plots: Plotter) -> Section:
    g = data.groups
    rows = [["groups", count(g.groups)],
            ["zero variance (two or more equal rewards: teach nothing)",
             f"{count(g.zero_variance)} ({share(g.zero_variance, g.groups)}), "
             f"{count(g.zero_variance_rollouts)} rollouts"],
            ["varied rewards", count(g.varied)],
            ["one unmasked reward", count(g.singletons)]]
    body = table(["", ""], rows, numeric=[False, True])
    if g.examples:
        shown = ", ".join(f"<code>{esc(label)}</code> ({n} &times; {number(value)})"
                          for label, n, value in g.examples)
        body += f'<p class="note">Zero-variance groups, for example: {shown}.</p>'
    sizes = [[count(r.size), count(r.groups), count(r.zero_variance),
              share(r.zero_variance, r.groups), number(r.mean), number(r.std),
              number(r.minimum), number(r.q1), number(r.median), number(r.q3),
              number(r.maximum)] for r in g.by_size]
    body += "<h3>Rewards by group size</h3>"
    body += table(["size", "groups", "zero variance", "share", "mean", "std", "min", "q1",
                   "median", "q3", "max"], sizes, numeric=[True] * 11)
    boxed = [r for r in g.by_size if r.rewards][-12:]
    if boxed:
        stats = [{"whislo": r.minimum or 0.0, "q1": r.q1 or 0.0, "med": r.median or 0.0,
                  "q3": r.q3 or 0.0, "whishi": r.maximum or 0.0, "mean": r.mean or 0.0}
                 for r in boxed]  # rows with rewards have every quartile
        svg = plots.boxes([str(r.size) for r in boxed], stats,
                          xlabel="rollouts in the group", ylabel="reward")
        body += figure(svg, "Reward distribution per group size (box: quartiles, whiskers: "
                            "min and max, diamond: mean).", "group-sizes")
    return Section("groups", "Groups", body)


def _advantages(data: ReportData, plots: Plotter) -> Section:
    body = ('<p class="note">Advantages as each trainer computes them from these rewards, '
            "emulated in float32 (masked rollouts left out of their group). A zero-variance "
            "group whose advantages are not all 0 is <em>broken</em>: float residue pushes "
            "the policy. <code>rewardsmith</code> is the exact computation.</p>")
    rows = []
    for a in data.advantages:
        broken = count(a.broken_groups)
        if a.broken_groups:
            broken = f'<span class="bad">{broken}</span>'
        worst = "-" if a.worst is None else ("NaN" if a.worst == float("inf")
                                             else number(a.worst))
        rows.append([f"<code>{esc(a.trainer)}</code>", esc(a.formula),
                     number(a.distribution.mean), number(a.distribution.std),
                     number(a.mean_abs), number(a.distribution.minimum),
                     number(a.distribution.maximum), count(a.nonzero), count(a.non_finite),
                     broken, count(a.broken_rollouts), worst])
    body += table(["trainer", "formula", "mean", "std", "mean |A|", "min", "max", "non-zero",
                   "NaN/inf", "broken groups", "their rollouts", "worst |A|"], rows,
                  numeric=[False, False] + [True] * 10)
    with_values = [a for a in data.advantages if a.distribution.count]
    if with_values:
        edges = with_values[0].distribution.edges
        svg = plots.overlaid([(a.trainer, a.distribution.counts) for a in with_values], edges,
                             xlabel="advantage")
        body += figure(svg, "Advantages per trainer, shared bins (counts on a symlog scale).",
                       "advantages")
    if data.file_advantage is not None and data.file_advantage.count:
        d = data.file_advantage
        body += "<h3>The scored file's own advantage column</h3>"
        body += table(["values", "null", "mean", "std", "min", "median", "max"],
                      [_distribution_row(d)[1:]], numeric=[True] * 7)
    return Section("advantages", "Advantages", body)


def _latency(data: ReportData, plots: Plotter) -> Section:
    lat = data.latency
    if lat is None:
        return Section("latency", "Latency",
                       f'<p class="note">Timing was not recorded in this file: {_TIMING_HINT}.'
                       "</p>")
    rows = [[esc(c.name), count(c.count), seconds(c.p50), seconds(c.p99), seconds(c.maximum),
             seconds(c.mean), seconds(c.total)] for c in lat.components]
    body = table(["component", "timed rollouts", "p50", "p99", "max", "mean", "total"], rows,
                 numeric=[False] + [True] * 6)
    names = [c.name for c in lat.components]
    positive = all(min(c.p50, c.p99, c.maximum) > 0 for c in lat.components)
    body += figure(plots.grouped_bars(
        names, [("p50", [c.p50 for c in lat.components]),
                ("p99", [c.p99 for c in lat.components]),
                ("max", [c.maximum for c in lat.components])],
        xlabel="seconds per rollout", log=positive),
        "Seconds per rollout by component (nearest-rank percentiles).", "latency")
    if lat.slowest:
        body += f"<h3>The {len(lat.slowest)} slowest rollouts (all components together)</h3>"
        slow_rows = [[_link(s.row, data.scored), esc(data.scored.groups[s.row]),
                      seconds(s.total), esc(s.slowest),
                      esc(", ".join(f"{n} {seconds(t)}" for n, t in s.times.items()))]
                     for s in lat.slowest]
        body += table(["rollout", "group", "total", "slowest component", "per component"],
                      slow_rows, numeric=[False, False, True, False, False])
    return Section("latency", "Latency", body)


def _judges(data: ReportData) -> Section:
    facts = data.store
    if facts is None:
        return Section("judges", "Judge calls",
                       '<p class="note">Judge calls, tokens and cost are read from the store: '
                       "pass <code>--store</code>.</p>")
    body = ""
    if facts.usage:
        keys = ("calls", "failed", "retries", "replayed", "shared", "unscored", "tokens_in",
                "tokens_out", "cost")
        rows = [[f"<code>{esc(name)}</code>", *(number(u.get(k), 8) if k == "cost"
                                                else count(int(u.get(k, 0) or 0)) for k in keys)]
                for name, u in facts.usage.items()]
        body += "<h3>This run's judge counters</h3>"
        body += table(["judge", *(k.replace("_", " ") for k in keys)], rows,
                      numeric=[False] + [True] * len(keys))
    if not facts.ledger:
        body += '<p class="note">No judge calls are recorded in this store.</p>'
        return Section("judges", "Judge calls", body)
    if facts.judge_calls:
        rows = [[f"<code>{esc(j.judge or '-')}</code>", esc(j.model), count(j.calls),
                 count(j.failed), count(j.retries), count(j.tokens_in), count(j.tokens_out),
                 number(j.cost, 8), seconds(j.p50_seconds), seconds(j.p99_seconds),
                 seconds(j.max_seconds)] for j in facts.judge_calls]
        total_cost = sum(j.cost for j in facts.judge_calls)
        body += ("<h3>Calls in the judge ledger while the run ran</h3>"
                 + table(["judge", "model", "calls", "failed", "retries", "tokens in",
                          "tokens out", "cost", "p50", "p99", "max"], rows,
                         numeric=[False, False] + [True] * 9)
                 + f'<p class="note">Total cost {number(total_cost, 8)}. Calls are matched to '
                   "the run by time (started between the run's start and end): a run scored at "
                   "the same time against the same store would be counted too.</p>")
    else:
        body += ('<p class="note">The judge ledger holds no calls made while this run ran '
                 "(grades replayed from the store cost nothing).</p>")
    return Section("judges", "Judge calls", body)


def _rubric(data: ReportData) -> Section:
    facts = data.store
    if facts is None:
        return Section("rubric", "Rubric", '<p class="note">A scored file does not name its '
                       "rubric: pass <code>--store</code> with the store it was scored with to "
                       "show the rubric and its id.</p>")
    run = facts.run
    body = (f"<p>Rubric <strong>{esc(run.rubric_name or '-')}</strong>, id "
            f"<code>{esc(run.rubric_id or '-')}</code>.</p>")
    rows = [[esc(c.get("name", "")), f"<code>{esc(spec_text(c))}</code>",
             number(c.get("weight")), "yes" if c.get("group") else ""]
            for c in run.components]
    if rows:
        body += table(["component", "spec", "weight", "group reward"], rows,
                      numeric=[False, False, True, False])
    return Section("rubric", "Rubric", body)


def _compare(data: ReportData, plots: Plotter) -> Section | None:
    cmp = data.comparison
    if cmp is None or data.other is None:
        return None
    body = (f'<p class="note">This file against <code>{esc(cmp.other)}</code> (the baseline), '
            f"rollouts paired by id: {count(cmp.paired)} paired, {count(cmp.only_here)} only "
            f"here, {count(cmp.only_other)} only in the baseline. Deltas are this file minus "
            "the baseline.</p>")
    rows = [[esc(m.name), count(m.paired), number(m.baseline_mean), number(m.mean),
             signed(m.delta), count(m.changed), number(m.mean_abs_delta)]
            for m in cmp.components]
    body += table(["", "paired", "baseline mean", "mean", "delta", "changed rollouts",
                   "mean |change|"], rows, numeric=[False] + [True] * 6)
    named = [m for m in cmp.components if m.mean is not None and m.baseline_mean is not None]
    if named:
        body += figure(plots.grouped_bars(
            [m.name for m in named],
            [("baseline", [m.baseline_mean or 0.0 for m in named]),
             ("this file", [m.mean or 0.0 for m in named])], xlabel="mean"),
            "Mean of the reward and each component, baseline and this file.", "compare-means")
    if cmp.delta_counts:
        body += figure(plots.histogram(cmp.delta_counts, cmp.delta_edges, discrete=False,
                                       xlabel="reward change (this file - baseline)",
                                       color=PALETTE[4]),
                       "Reward change of the paired rollouts whose reward changed.",
                       "compare-deltas")
    facts = [["groups that lost all reward variance", count(cmp.became_zero_variance)],
             ["groups that gained reward variance", count(cmp.became_varied)]]
    facts += [[f"status {esc(change)}", count(n)] for change, n in cmp.status_changes.items()]
    body += table(["", ""], facts, numeric=[False, True])
    if cmp.advantages:
        rows = [[f"<code>{esc(a.trainer)}</code>", count(a.paired), number(a.mean_abs_delta),
                 number(a.max_abs_delta), count(a.sign_flips), count(a.became_zero),
                 count(a.became_nonzero)] for a in cmp.advantages]
        body += "<h3>How each trainer's advantages moved</h3>"
        body += table(["trainer", "paired", "mean |change|", "max |change|", "sign flips",
                       "became 0", "left 0"], rows, numeric=[False] + [True] * 6)
    if cmp.movers:
        rows = [[_link(m.row, data.scored), esc(data.scored.groups[m.row]),
                 number(m.baseline), number(m.reward), signed(m.delta)] for m in cmp.movers]
        body += f"<h3>The {len(cmp.movers)} rollouts whose reward changed most</h3>"
        body += table(["rollout", "group", "baseline", "this file", "change"], rows,
                      numeric=[False, False, True, True, True])
    return Section("compare", "Compared with the baseline", body)


def _values(values: dict[str, float | None]) -> str:
    return ", ".join(f"{esc(k)} {number(v)}" for k, v in values.items()) or "-"


def _text(label: str, text: str) -> str:
    cut = text if len(text) <= _TEXT_LIMIT else (
        text[:_TEXT_LIMIT] + f"\n… ({len(text) - _TEXT_LIMIT:,} more characters)")
    return f"<h4>{esc(label)}</h4><pre>{esc(cut)}</pre>"


def _rollouts(data: ReportData, rows: Sequence[int]) -> Section | None:
    if not rows:
        return None
    where = {"store": "the store's run", "rollouts": "the rollouts file"}
    if data.text_source is None:
        body = ('<p class="note">Their text is not in a scored file: pass <code>--store</code> '
                "or <code>--rollouts</code> to show it.</p>")
    else:
        body = f'<p class="note">Text from {esc(where[data.text_source])}.</p>'
    others = {}
    if data.comparison is not None:
        others = {m.row: m.other_row for m in data.comparison.movers}
    for row in rows:
        info = data.scored.row(row)
        facts = [["group", f"<code>{esc(info['group'])}</code>"],
                 ["status", esc(info["status"])], ["reward", number(info["reward"])],
                 ["advantage (file)", number(info["advantage"])],
                 ["components", _values(info["components"])]]
        if info["timing"]:
            facts.append(["seconds", esc(", ".join(f"{n} {seconds(t)}"
                                                   for n, t in info["timing"].items()))])
        if row in others and data.other is not None:
            before = data.other.row(others[row])
            facts.append(["baseline", f"{esc(before['status'])}, reward "
                                      f"{number(before['reward'])}; "
                                      f"{_values(before['components'])}"])
        for name, message in info["errors"].items():
            facts.append([f"error in {esc(name)}", f"<code>{esc(message)}</code>"])
        body += (f'<article class="rollout" id="rollout-{row}"><h3>Rollout '
                 f"<code>{esc(info['id'])}</code></h3>{table(['', ''], facts)}")
        rollout = data.texts.get(info["id"])
        if rollout is not None:
            body += _text("prompt", rollout.prompt_text) + _text("completion", rollout.text)
        body += "</article>"
    return Section("rollouts", "Rollouts named above", body)


def _linked_rows(data: ReportData) -> list[int]:
    rows: list[int] = []
    if data.latency is not None:
        rows += [s.row for s in data.latency.slowest]
    if data.comparison is not None:
        rows += [m.row for m in data.comparison.movers]
    return list(dict.fromkeys(rows))


def linked_ids(data: ReportData) -> list[str]:
    """The ids of the rollouts the page links to (their text is worth fetching)."""
    return [data.scored.ids[row] for row in _linked_rows(data)]


def sections(data: ReportData, plots: Plotter) -> list[Section]:
    """Every section in page order; sections with nothing to say are left out."""
    curve = step_section(data.steps, plots) if data.steps is not None else None
    parts = [_warnings(data), _overview(data), curve, _statuses(data, plots),
             _rewards(data, plots),
             _groups(data, plots), _advantages(data, plots), _latency(data, plots),
             _judges(data), _rubric(data), _compare(data, plots),
             _rollouts(data, _linked_rows(data))]
    return [part for part in parts if part is not None]
