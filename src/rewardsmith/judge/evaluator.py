"""The judge as rubric components: one evaluator per criterion, one call per rollout.

Criterion evaluators of one judge share a ``Judge``. The engine asks each criterion for a group
at about the same moment; the judge gathers those requests for a few event-loop turns, then
makes one call per rollout asking for every criterion whose grade is not recorded yet.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardsmith.rubric import Component

from ..errors import ConfigError, JudgeError, RewardsmithError
from ..types import ComponentResult, Rollout, Status, content_hash
from .asking import Outcomes, ask
from .client import JudgeClient
from .comparing import Comparer
from .components import CriterionEvaluator
from .config import DEFAULT_STORE, JudgeConfig
from .ledger import CallRecord, Ledger, Owner
from .limits import Limits, LimitSettings
from .pending import Pending, wait_all
from .prompt import MissingField, Template
from .ranking import combine_samples
from .usage import Usage
from .waiting import Watcher

__all__ = ["Judge"]

_QUIET_TURNS = 2  # event-loop turns without new requests before a batch is sent
_MAX_ROUNDS = 5  # times a rollout may go back to claiming after another process let go


@dataclass
class _Entry:
    """One rollout's prompt fields and the criteria asked for it in this batch."""

    values: dict[str, str]
    key: str
    sample: int = 0
    wanted: dict[str, Pending] = field(default_factory=dict)


class _Run:
    """What lives on one event loop (one engine): HTTP client, semaphore, batches, counters."""

    def __init__(self, judge: Judge, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.owner = Owner.here()
        self.usage = Usage()
        self.limits = Limits(LimitSettings.of(judge.limits_key, judge.config), judge.store_path)
        self.claim_window = asyncio.Semaphore(2 * judge.config.max_concurrency)
        self.ledger = Ledger(judge.store_path)
        self.watcher = Watcher(self.ledger, self.owner)
        self.client: JudgeClient | None = None
        self.check_error: RewardsmithError | None = None
        self.checked = False
        self.check_lock = asyncio.Lock()
        self.open: dict[str, _Entry] = {}
        self.seen: dict[int, tuple[Rollout, dict[str, str], str]] = {}
        self.inflight: dict[str, Pending] = {}
        self.generation = 0
        self.flush_scheduled = False
        self.tasks: set[asyncio.Task[Any]] = set()
        self.heartbeat: asyncio.Task[None] | None = None
        self.closed = False
        self.comparisons: dict[str, tuple[asyncio.Task[Any], set[str]]] = {}


class Judge:
    """An LLM judge: one model, one prompt template, several criteria graded in one call.

    ``components()`` gives one rubric component per criterion. Grades are recorded in the store
    (``config.store``, else the run's store, else ``./rewardsmith.db``) before they are used,
    under a key made of the model id, template, system prompt, sampling parameters, the
    criterion's name, description and range, and the rollout fields the template reads.
    """

    def __init__(self, name: str, config: JudgeConfig | Mapping[str, Any], *,
                 where: str | None = None):
        where = where or f"judge {name!r}"
        self.name = name
        self.config = JudgeConfig.parse(config, where=where)
        self.template = Template(self.config.template, where=f"{where}.template")
        self.criteria = {c.name: c for c in self.config.criteria}
        c = self.config
        # Mode and logprobs change what a recorded value means; pointwise keys stay as they were.
        extras: list[Any] = []
        if c.mode == "group":
            extras.append(("group", c.group_chunk))
        elif c.mode == "pairwise":
            extras.append(("pairwise",))
        if c.logprobs:
            extras.append(("logprobs", c.top_logprobs))
        self._base = content_hash("rewardsmith-judge/2", c.model, c.template, c.system,
                                  c.sampling(), c.response_format, c.extra_body, *extras,
                                  length=32)
        self._identities = {name: content_hash(self._base, criterion.spec(), length=32)
                            for name, criterion in self.criteria.items()}
        self._attached: str | None = None
        self._run: _Run | None = None
        self.refresh_before: float | None = None
        self._comparer = Comparer(self)

    def __repr__(self) -> str:
        return f"Judge({self.name!r}, model={self.config.model!r}, criteria={list(self.criteria)})"

    # ------------------------------------------------------------------ rubric side

    def components(self, *, weight: float = 1.0, weights: Mapping[str, float] | None = None,
                   requires: str | None = None, prefix: bool = False) -> list[Component]:
        """One component per criterion, named after it (``{judge}_{criterion}`` with ``prefix``)."""
        weights = dict(weights or {})
        unknown = sorted(set(weights) - set(self.criteria))
        if unknown:
            raise ConfigError(f"judge {self.name!r}: weights: unknown criteria {unknown}; "
                              f"criteria: {', '.join(self.criteria)}")
        return [
            Component(f"{self.name}_{name}" if prefix else name,
                      weight=float(weights.get(name, weight)), requires=requires,
                      evaluator=CriterionEvaluator(self, name))
            for name in self.criteria
        ]

    def criterion_identity(self, criterion: str) -> str:
        return self._identities[criterion]

    @property
    def limits_key(self) -> str:
        """What processes share this judge's limits by: its name, model and endpoint."""
        return f"judge {self.name!r} ({self.config.model} at {self.config.base_url})"

    @property
    def store_path(self) -> str:
        return self.config.store or self._attached or DEFAULT_STORE

    def attach_store(self, path: str) -> None:
        """The run's store file; used unless the judge config names its own ``store``."""
        self._attached = path

    def usage(self) -> dict[str, float]:
        return (self._run.usage if self._run is not None else Usage()).as_dict()

    def refresh(self, before: float | None = None) -> None:
        """Ask again for grades recorded before ``before`` (default: now) instead of replaying
        them; the old grades are kept in the store's ``judge_history``. Passing the same
        ``before`` to a rerun replays what the interrupted refresh already asked."""
        self.refresh_before = time.time() if before is None else float(before)

    # ------------------------------------------------------------------ lifecycle

    def _current(self) -> _Run:
        loop = asyncio.get_running_loop()
        if self._run is None or self._run.loop is not loop or self._run.closed:
            if self._run is not None and not self._run.closed:
                # Its loop ended without closing it (asyncio.run per call, say): let go of
                # its store connections and thread; its claims go back to the pool.
                self._run.closed = True
                self._run.ledger.abandon(self._run.owner)
                self._run.limits.abandon()
                self._run.owner.retire()
            self._run = _Run(self, loop)  # a new engine is a new run
        return self._run

    async def check(self) -> None:
        """Fail with ``JudgeError`` (or ``StoreError``) now if the judge cannot work."""
        run = self._current()
        async with run.check_lock:
            if not run.checked:
                try:
                    await self._check(run)
                except RewardsmithError as exc:
                    run.check_error = exc
                run.checked = True
        if run.check_error is not None:
            raise run.check_error

    async def _check(self, run: _Run) -> None:
        api_key: str | None = None
        env = self.config.api_key_env
        if env is not None:
            api_key = os.environ.get(env)
            if not api_key:
                raise JudgeError(f"judge {self.name!r}: the environment variable {env} "
                                 f"(api_key_env) is not set")
        await run.ledger.run(run.ledger.open)
        await run.limits.open()
        run.client = JudgeClient(self.config, api_key, label=f"judge {self.name!r}",
                                 limits=run.limits)
        await run.client.check()

    async def close(self) -> None:
        run = self._run
        if run is None or run.closed or run.loop is not asyncio.get_running_loop():
            return
        run.closed = True
        for task in [*run.tasks, run.heartbeat]:
            if task is not None:
                task.cancel()
        await run.watcher.stop()
        if run.client is not None:
            await run.client.close()
        await run.ledger.run(run.ledger.close, run.owner)
        run.ledger.shutdown()
        await run.limits.close()
        run.owner.retire()

    # ------------------------------------------------------------------ grading

    async def grade(self, rollouts: Sequence[Rollout], criterion: str) -> list[ComponentResult]:
        """Grades of ``criterion`` for ``rollouts``, in order; failures are error results."""
        run = self._current()
        if not run.checked or run.check_error is not None:
            try:
                await self.check()
            except RewardsmithError as exc:
                return [ComponentResult.failed(Status.ERROR, str(exc)) for _ in rollouts]
        if self.config.mode != "pointwise":
            return await self._comparer.grade(run, rollouts, criterion)
        waits: list[list[Pending]] = []
        for rollout in rollouts:
            # Each criterion's evaluator passes the same rollout objects: read them once.
            seen = run.seen.get(id(rollout))
            if seen is None or seen[0] is not rollout:
                try:
                    values = self.template.values(rollout)
                except MissingField as exc:
                    waits.append([Pending(ComponentResult.failed(Status.ERROR, str(exc)))])
                    continue
                seen = run.seen[id(rollout)] = (rollout, values, self.template.fingerprint(values))
            _, values, fields_key = seen
            samples: list[Pending] = []
            for sample in range(self.config.samples):
                # Sample 0 keeps the plain key, so adding samples replays the first ask.
                key = fields_key if sample == 0 else f"{fields_key}~{sample}"
                entry = run.open.get(key)
                if entry is None:
                    entry = run.open[key] = _Entry(values, key, sample)
                pending = entry.wanted.get(criterion)
                if pending is None:
                    pending = entry.wanted[criterion] = Pending()
                samples.append(pending)
            waits.append(samples)
        self._request_flush(run)
        await wait_all([p for samples in waits for p in samples])
        return [self._combined(samples, criterion) for samples in waits]

    def _combined(self, samples: list[Pending], criterion: str) -> ComponentResult:
        results = [p.result for p in samples if p.result is not None]
        if len(results) == 1:
            return results[0]
        for number, result in enumerate(results):
            if result.status is not Status.OK or result.value is None:
                return ComponentResult.failed(result.status,
                                              f"sample {number}: {result.error}")
        value, spread = combine_samples([r.value for r in results if r.value is not None],
                                        binary=self.criteria[criterion].binary)
        return ComponentResult(value, metrics={"spread": spread})

    def record_keys(self, rollout: Rollout) -> dict[str, str]:
        """The store key of each criterion's grade of ``rollout``: equal keys, replayed grade.
        Pointwise only: in group and pairwise modes a grade's key depends on the others."""
        if self.config.mode != "pointwise":
            raise JudgeError(f"judge {self.name!r}: in mode {self.config.mode} a grade's record "
                             f"key depends on the rollouts it was judged with")
        key = self.template.fingerprint(self.template.values(rollout))
        return {c: self._record_key(key, c) for c in self.criteria}

    def _record_key(self, fields_key: str, criterion: str) -> str:
        # The criterion's identity (model, template, sampling, criterion text), then the
        # digest of the rollout fields the template reads: two digests side by side.
        return self._identities[criterion] + fields_key

    def _request_flush(self, run: _Run) -> None:
        run.generation += 1
        if not run.flush_scheduled:
            run.flush_scheduled = True
            run.loop.call_soon(self._tick, run, run.generation, 0)

    def _tick(self, run: _Run, seen: int, quiet: int) -> None:
        # Wait until the loop has turned a few times with no new request, so each criterion's
        # evaluator has asked for the same rollouts: then one call covers them all.
        if run.closed:
            return
        if run.generation != seen or quiet < _QUIET_TURNS:
            run.loop.call_soon(self._tick, run, run.generation,
                               0 if run.generation != seen else quiet + 1)
            return
        run.flush_scheduled = False
        entries, run.open = run.open, {}
        run.seen.clear()
        self._spawn(run, self._dispatch(run, list(entries.values())))

    def _spawn(self, run: _Run, coro: Any) -> None:
        task = run.loop.create_task(coro)
        run.tasks.add(task)
        task.add_done_callback(run.tasks.discard)

    async def _dispatch(self, run: _Run, entries: list[_Entry]) -> None:
        try:
            await self._replay_or_settle(run, entries)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every asked grade gets an answer
            failure = ComponentResult.failed(
                Status.ERROR, f"judge {self.name!r}: {type(exc).__name__}: {exc}")
            for entry in entries:
                for pending in entry.wanted.values():
                    pending.resolve(failure)

    async def _replay_or_settle(self, run: _Run, entries: list[_Entry]) -> None:
        keyed: dict[str, Pending] = {}
        for entry in entries:
            for criterion, pending in entry.wanted.items():
                keyed[self._record_key(entry.key, criterion)] = pending
        try:
            grades = run.ledger.grades(list(keyed), since=self.refresh_before)
        except RewardsmithError as exc:
            failure = ComponentResult.failed(Status.ERROR, str(exc))
            for pending in keyed.values():
                pending.resolve(failure)
            return
        run.usage.replayed += len(grades)
        for key, value in grades.items():
            keyed[key].resolve(ComponentResult(value))
        # What is not recorded yet is settled once per run: a key this run is already
        # settling (asked for again in a later batch) shares that outcome.
        todo: dict[str, tuple[_Entry, list[str]]] = {}
        for entry in entries:
            for criterion, pending in entry.wanted.items():
                if pending.done:
                    continue
                key = self._record_key(entry.key, criterion)
                earlier = run.inflight.get(key)
                if earlier is not None:
                    earlier.then(pending.resolve)
                    continue
                run.inflight[key] = pending
                pending.then(functools.partial(_forget, run.inflight, key))
                todo.setdefault(entry.key, (entry, []))[1].append(criterion)
        for entry, criteria in todo.values():
            self._spawn(run, self._settle(run, entry, criteria, 0))

    async def _settle(self, run: _Run, entry: _Entry, criteria: list[str], rounds: int) -> None:
        """Claim, call and record; or wait for the process that holds the claim."""
        try:
            keys = {c: self._record_key(entry.key, c) for c in criteria}
            theirs: list[str] = []
            asked: tuple[CallRecord, Outcomes] | None = None
            # Claims are made a little ahead of free request slots (at most twice as many
            # rollouts are claimed as can be in flight), so claiming costs no slot time.
            async with run.claim_window:
                if self._out_of_budget(run, entry, criteria):
                    return
                claim = await run.ledger.claim(list(keys.values()), run.owner,
                                               {keys[c]: c for c in criteria}, self.config.model,
                                               refresh_before=self.refresh_before,
                                               retry_failed=self.config.retry_failed)
                for c in criteria:
                    record = claim.done.get(keys[c])
                    if record is not None and record.value is not None:
                        run.usage.replayed += 1
                        entry.wanted[c].resolve(ComponentResult(record.value))
                    failed = claim.failed.get(keys[c])
                    if failed is not None:
                        run.usage.failed_replayed += 1
                        entry.wanted[c].resolve(ComponentResult.failed(
                            Status.ERROR, failed.replayed_failure()))
                mine = [c for c in criteria if keys[c] in claim.mine]
                theirs = [c for c in criteria if keys[c] in claim.theirs]
                if mine:
                    self._keep_alive(run)
                    # A ticket bounds calls in flight and reserves the call in the budget, in
                    # the scope the judge's limits hold (this process, the store, a Ray job).
                    async with run.limits.call() as ticket:
                        if ticket.spent is not None:
                            self._refuse(run, entry, mine, ticket.spent)
                            await run.ledger.run(run.ledger.release, [keys[c] for c in mine],
                                                 run.owner)
                        else:
                            run.usage.calls += 1
                            asked = await self._ask(run, entry, mine)
                            ticket.charge(asked[0].tokens_in + asked[0].tokens_out,
                                          asked[0].cost)
            if asked is not None:
                await self._record(run, entry, keys, *asked)
            if theirs:
                await self._wait_for_others(run, entry, theirs, keys, rounds)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every asked grade gets an answer
            for c in criteria:
                entry.wanted[c].resolve(ComponentResult.failed(
                    Status.ERROR, f"judge {self.name!r}: {type(exc).__name__}: {exc}"))

    def _out_of_budget(self, run: _Run, entry: _Entry, criteria: list[str]) -> bool:
        limit = run.limits.spent()
        if limit is None:
            return False
        self._refuse(run, entry, criteria, limit)
        return True

    def _refuse(self, run: _Run, entry: _Entry, criteria: list[str], limit: str) -> None:
        run.usage.budget_exhausted = 1
        run.usage.unscored += len(criteria)
        message = f"judge {self.name!r}: budget spent ({limit}); not scored"
        for c in criteria:
            entry.wanted[c].resolve(ComponentResult.failed(Status.ERROR, message))

    def _keep_alive(self, run: _Run) -> None:
        if run.heartbeat is None or run.heartbeat.done():
            run.heartbeat = run.loop.create_task(self._renew_leases(run))

    async def _renew_leases(self, run: _Run) -> None:
        while not run.closed:
            await asyncio.sleep(run.ledger.lease / 4)
            await run.ledger.run(run.ledger.renew, run.owner)

    async def _ask(self, run: _Run, entry: _Entry,
                   criteria: list[str]) -> tuple[CallRecord, Outcomes]:
        assert run.client is not None
        call, outcomes = await ask(run.client, self.config, self.template, self.name,
                                   entry.values, [self.criteria[c] for c in criteria],
                                   entry.sample)
        call.cost = run.usage.charge(self.config, call.tokens_in, call.tokens_out)
        run.usage.retries += max(0, call.attempts - 1)
        if call.status == "failed":
            run.usage.failed += 1
        return call, outcomes

    async def _record(self, run: _Run, entry: _Entry, keys: dict[str, str], call: CallRecord,
                      outcomes: Outcomes) -> None:
        try:  # recorded before it is used: a crash after this line cannot cost a second call
            await run.ledger.finish(call, {keys[c]: v for c, v in outcomes.items()},
                                    {keys[c]: c for c in outcomes})
        except RewardsmithError as exc:
            outcomes = {c: f"judge {self.name!r}: grade not recorded, so not used: {exc}"
                        for c in outcomes}
        for c, outcome in outcomes.items():
            entry.wanted[c].resolve(ComponentResult(outcome) if isinstance(outcome, float)
                                    else ComponentResult.failed(Status.ERROR, outcome))

    async def _wait_for_others(self, run: _Run, entry: _Entry, criteria: list[str],
                               keys: dict[str, str], rounds: int) -> None:
        records = await run.watcher.wait([keys[c] for c in criteria])
        again: list[str] = []
        for c in criteria:
            record = records.get(keys[c])
            if record is not None and record.state == "ok" and record.value is not None:
                run.usage.shared += 1
                entry.wanted[c].resolve(ComponentResult(record.value))
            elif record is not None and record.state == "failed":
                entry.wanted[c].resolve(ComponentResult.failed(
                    Status.ERROR, f"{record.error or 'judge call failed'} (call made by "
                    f"another process sharing the store)"))
            else:
                again.append(c)  # released or abandoned: claim it ourselves
        if not again:
            return
        if rounds >= _MAX_ROUNDS:
            for c in again:
                entry.wanted[c].resolve(ComponentResult.failed(
                    Status.ERROR, f"judge {self.name!r}: other processes kept claiming and "
                    f"releasing this grade; not scored"))
            return
        await self._settle(run, entry, again, rounds + 1)


def _forget(inflight: dict[str, Pending], key: str, _result: ComponentResult) -> None:
    inflight.pop(key, None)
