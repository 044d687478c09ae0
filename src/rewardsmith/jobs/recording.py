"""Recording runs in the store: a scoring run as it goes, or a scored file made elsewhere.

The engine stores each rollout's per-component results itself (it is given the store as its
cache). What it cannot store are group rewards, whose value for a rollout depends on the whole
group: the recorder keeps those from the finished scores, under keys that name the group's
content (``store.group_result_keys``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardsmith.errors import (
    ConfigError,
    InputError,
)
from rewardsmith.files.digests import FileDigests
from rewardsmith.files.parquet import (
    read_records,
    read_rollouts_any,
    read_scores_any,
)
from rewardsmith.files.rollouts import rollout_from_dict
from rewardsmith.jobs.summary import (
    RunSummary,
    SummaryBuilder,
)
from rewardsmith.rubric import Rubric
from rewardsmith.store import (
    ContentCache,
    RecordingRun,
    Store,
    group_result_keys,
)
from rewardsmith.types import (
    ComponentResult,
    Rollout,
    Score,
    Status,
    content_hash,
    key_of_content,
)

__all__ = [
    "ImportResult",
    "RunRecorder",
    "component_records",
    "group_positions",
    "import_scores",
    "reusable_result",
    "start_recording",
    "summarize",
]


def component_records(rubric: Rubric) -> list[dict[str, Any]]:
    """How a run describes its rubric's components in the store: with what makes each one's
    identity (its code files, each param's hash, timeout, version), so that a later rescore
    can say what changed."""
    records = []
    for c in rubric.components:
        record: dict[str, Any] = {
            "name": c.name, "identity": c.identity(), "spec": c.spec, "weight": c.weight,
            "group": c.group, "requires": c.requires}
        code = c.code()
        if code is not None:
            record.update({
                "code": code.record(),
                "params": {str(k): content_hash(v, length=12) for k, v in c.params.items()},
                "timeout": c.timeout, "reward_key": c.reward_key, "version": c.version})
        records.append(record)
    return records


def group_positions(groups: Sequence[str]) -> list[list[int]]:
    """Positions of each group, groups in order of first appearance (as the score job has it)."""
    by_group: dict[str, list[int]] = {}
    for position, group in enumerate(groups):
        by_group.setdefault(group, []).append(position)
    return list(by_group.values())


def summarize(rubric: Rubric, scores: Sequence[Score], groups: list[list[int]]) -> RunSummary:
    builder = SummaryBuilder(rubric.names, rubric_name=rubric.name, rubric_id=rubric.id)
    for group in groups:
        builder.add_group([scores[p] for p in group])
    return builder.build()


def reusable_result(score: Score, name: str, names: Sequence[str]) -> ComponentResult | None:
    """What a scored rollout says about component ``name``, when it can be reused: its value
    (with its metrics) when ok, an abstention when masked; None for a failure or no entry."""
    if name not in score.components:
        return None
    value = score.components[name]
    if value is None:
        if name in score.errors:
            return None  # an error or a timeout: computed again next time
        return ComponentResult(None, Status.MASKED)
    prefix = f"{name}."
    # Metrics are flattened as "component.metric"; a longer component name that starts with
    # this one owns its own keys.
    others = [f"{n}." for n in names if n != name and n.startswith(prefix)]
    metrics = {
        key[len(prefix):]: number for key, number in score.metrics.items()
        if key.startswith(prefix) and not any(key.startswith(o) for o in others)
    }
    return ComponentResult(float(value), Status.OK, None, metrics)


class RunRecorder:
    """Keeps the results of a run's group rewards as its groups finish, about ``batch``
    rollouts per transaction, and marks the run done at the end."""

    def __init__(self, run: RecordingRun, rubric: Rubric, *, batch: int = 1024,
                 keys: Mapping[int, str] | None = None, known: ContentCache | None = None):
        self.run = run
        self.run_id = run.run_id
        self.names = rubric.names
        self.group_components = [(c.name, c.identity()) for c in rubric.components if c.group]
        self.batch = batch
        self._keys = dict(keys or {})  # id() of a recorded rollout -> its content key
        # Or, while the store records the run in the background, shared with it: id() ->
        # (content JSON, key), filled by whichever side encodes a rollout first.
        self._known = known
        self._pending: dict[str, dict[str, ComponentResult]] = {
            identity: {} for _, identity in self.group_components}
        self._size = 0

    def content_key(self, rollout: Rollout) -> str:
        """``rollout.content_key()``, without hashing again for a rollout of this run (the
        engine's ``content_key`` hook)."""
        key = self._keys.get(id(rollout))
        if key is not None:
            return key
        known = self._known
        if known is None:
            return rollout.content_key()
        pair = known.get(id(rollout))
        if pair is None:
            text = rollout.content_json()
            pair = known[id(rollout)] = (text, key_of_content(text))
        return pair[1]

    def add_group(self, rollouts: Sequence[Rollout], scores: Sequence[Score]) -> None:
        if not self.group_components:
            return
        keys = group_result_keys([self.content_key(r) for r in rollouts])
        for name, identity in self.group_components:
            pending = self._pending[identity]
            for key, score in zip(keys, scores, strict=True):
                result = reusable_result(score, name, self.names)
                if result is not None:
                    pending[key] = result
        self._size += len(rollouts)
        if self._size >= self.batch:
            self.flush()

    def flush(self) -> None:
        for identity, pending in self._pending.items():
            if pending:
                self.run.record(identity, pending)
                self._pending[identity] = {}
        self._size = 0

    def scoring_done(self) -> None:
        """Every rollout is scored: the store may record the run's rollouts now."""
        self.run.scoring_done()

    def finish(self, summary: Mapping[str, Any] | None = None) -> None:
        self.flush()
        self.run.finish(summary)


def start_recording(store: Store, rubric: Rubric, rollouts: Sequence[Rollout], *,
                    kind: str = "score", source: str = "") -> RunRecorder:
    """Record a new run of ``rollouts`` scored with ``rubric`` (its rollouts, in order, in one
    transaction, beside the scoring: call the recorder's ``scoring_done`` when it ends) and
    return the recorder that keeps its group rewards' results and answers the engine's content
    keys."""
    known: ContentCache = {}
    run = store.begin_recording(
        rollouts, kind=kind, rubric_name=rubric.name, rubric_id=rubric.id,
        components=component_records(rubric), source=source, known=known)
    return RunRecorder(run, rubric, known=known)


# ------------------------------------------------------------------ importing scored files


@dataclass
class ImportResult:
    run_id: str
    rollouts: int
    imported: dict[str, int]  # component -> results stored for reuse
    not_reusable: dict[str, int]  # component -> failures or missing entries (computed later)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def import_scores(
    store: Store | str | Path,
    scores: str | Path | Sequence[Score],
    rubric: Rubric,
    *,
    rollouts: str | Path | Sequence[Rollout] | None = None,
    source: str = "",
) -> ImportResult:
    """Store a scored file made elsewhere as a run, so a rescore reuses its component values.

    ``rubric`` is the one that produced the scores: it says what each component name means
    (its identity). ``rollouts`` holds their content, matched by ``id``; without it the scored
    file itself must carry the rollout fields (``completion`` and the rest)."""
    if isinstance(store, (str, Path)):
        with Store(store) as opened:
            return import_scores(opened, scores, rubric, rollouts=rollouts, source=source)
    rubric.resolve()
    if isinstance(scores, (str, Path)):
        source = source or str(scores)
        if rollouts is None:
            rollouts = _rollouts_in_scored_file(scores)
        scores = read_scores_any(scores)
    if isinstance(rollouts, (str, Path)):
        rollouts = read_rollouts_any(rollouts)
    if rollouts is None:
        raise ConfigError("importing scores needs the rollouts they score (their content)")
    ordered = _match(scores, rollouts)
    names = rubric.names
    unknown = sorted({n for s in scores for n in s.components} - set(names))
    if unknown:
        raise ConfigError(f"the scores have component(s) {', '.join(map(repr, unknown))} that "
                          f"rubric {rubric.name!r} does not define ({', '.join(names)}): "
                          f"give the rubric that produced them")
    keys = [r.content_key() for r in ordered]
    run_id = store.begin_run(ordered, kind="import", rubric_name=rubric.name,
                             rubric_id=rubric.id, components=component_records(rubric),
                             source=source, keys=keys)
    groups = group_positions([r.group for r in ordered])
    imported: dict[str, int] = {}
    digests = FileDigests()
    for component in rubric.components:
        # A reward that reads files is keyed on what they hold now (at the import).
        result_keys = component.result_keys(ordered, keys, digests)
        if component.group:
            result_keys = [""] * len(keys)
            for group in groups:
                for position, key in zip(group, group_result_keys([keys[p] for p in group]),
                                         strict=True):
                    result_keys[position] = key
        found = {}
        for key, score in zip(result_keys, scores, strict=True):
            result = reusable_result(score, component.name, names)
            if result is not None:
                found[key] = result
        store.record(component.identity(), found)
        imported[component.name] = len(found)
    store.finish_run(run_id, summarize(rubric, scores, groups).to_dict())
    return ImportResult(run_id, len(ordered), imported,
                        {name: len(ordered) - count for name, count in imported.items()})


_SCORE_FIELDS = ("reward", "status", "components", "errors", "advantage", "metrics")


def _rollouts_in_scored_file(path: str | Path) -> list[Rollout]:
    """The rollouts of a file that holds both (a trainer's table, say); the score fields are
    left out, so each rollout's content, and so its key, is what the rollouts alone give."""
    out = []
    for number, record in enumerate(read_records(path), start=1):
        fields = {k: v for k, v in record.items() if k not in _SCORE_FIELDS}
        try:
            out.append(rollout_from_dict(fields, default_id=str(number)))
        except ValueError as exc:
            raise InputError(f"{exc}; a scored file without the rollout fields needs the "
                             f"rollouts file too (--rollouts)", source=str(path),
                             line=number) from exc
    return out


def _match(scores: Sequence[Score], rollouts: Sequence[Rollout]) -> list[Rollout]:
    """The rollouts in the scores' order, matched by id (and checked by group)."""
    by_id: dict[str, Rollout] = {}
    for rollout in rollouts:
        if rollout.id in by_id:
            raise InputError(f"rollout id {rollout.id!r} appears twice: ids must be unique "
                             f"to match scores to rollouts")
        by_id[rollout.id] = rollout
    ordered = []
    for number, score in enumerate(scores, start=1):
        found = by_id.get(score.id)
        if found is None:
            raise InputError(f"score {number} (id {score.id!r}) has no rollout with that id")
        if score.group and score.group != found.group:
            raise InputError(f"score {number} (id {score.id!r}) is in group {score.group!r} "
                             f"but its rollout is in group {found.group!r}")
        ordered.append(found)
    return ordered
