"""Judges that see several rollouts at once: ``mode: group`` and ``mode: pairwise``.

The criterion evaluators of one judge each ask for the same groups; the first to ask starts
the group's work (every criterion at once) and the others share it. Each call is paid once:
its record keys are claimed in the store before calling and its grades recorded before use.

- group: key = criterion identity + digest of the chunk's rollouts (in order) + position.
  A rerun, or a new weight, replays; one changed rollout re-asks its chunk (its group when
  the group fits one call).
- pairwise: key = criterion identity + digest of (first shown, second shown). A changed
  rollout re-asks only the pairs it is in.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import RewardsmithError
from ..types import ComponentResult, Rollout, Status, content_hash
from .asking import sample_overrides
from .client import CallFailed
from .compare_prompts import (
    group_prompt,
    group_schema,
    pair_prompt,
    pair_schema,
    read_group_reply,
    read_pair_reply,
)
from .config import Criterion
from .ledger import CallRecord
from .prompt import MissingField
from .ranking import (
    align_chunks,
    combine_samples,
    pair_scores,
    plan_chunks,
    plan_pairs,
    position_flip,
)

if TYPE_CHECKING:
    from .evaluator import Judge, _Run

__all__ = ["Comparer"]

Asker = Callable[[list[Criterion]], Awaitable[tuple[CallRecord, dict[str, "float | str"]]]]


@dataclass
class _Member:
    values: dict[str, str]
    key: str


class Comparer:
    """Group and pairwise grading for one ``Judge`` (which holds the client and the store)."""

    def __init__(self, judge: Judge):
        self.judge = judge

    async def grade(self, run: _Run, rollouts: Sequence[Rollout],
                    criterion: str) -> list[ComponentResult]:
        results: list[ComponentResult | None] = [None] * len(rollouts)
        groups: dict[str, list[int]] = {}
        for index, rollout in enumerate(rollouts):
            groups.setdefault(rollout.group, []).append(index)
        waits: list[tuple[list[int], asyncio.Task[Any]]] = []
        for indices in groups.values():
            members: list[_Member] = []
            kept: list[int] = []
            for index in indices:
                try:
                    values = self.judge.template.values(rollouts[index])
                except MissingField as exc:
                    results[index] = ComponentResult.failed(Status.ERROR, str(exc))
                    continue
                members.append(_Member(values, self.judge.template.fingerprint(values)))
                kept.append(index)
            if not members:
                continue
            signature = content_hash(*(m.key for m in members), length=32)
            shared = run.comparisons.get(signature)
            if shared is None:
                task = run.loop.create_task(self._group(run, members))
                run.tasks.add(task)  # cancelled if the judge closes first
                task.add_done_callback(run.tasks.discard)
                shared = run.comparisons[signature] = (task, set())
            task, fetched = shared
            fetched.add(criterion)
            if fetched >= set(self.judge.criteria):
                del run.comparisons[signature]  # every criterion has it now
            waits.append((kept, task))
        for kept, task in waits:
            try:
                by_criterion: dict[str, list[ComponentResult]] = await asyncio.shield(task)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - every asked grade gets an answer
                failure = ComponentResult.failed(
                    Status.ERROR, f"judge {self.judge.name!r}: {type(exc).__name__}: {exc}")
                by_criterion = {criterion: [failure] * len(kept)}
            for index, result in zip(kept, by_criterion[criterion], strict=True):
                results[index] = result
        return [r if r is not None else ComponentResult.failed(Status.ERROR, "not graded")
                for r in results]

    async def _group(self, run: _Run, members: list[_Member]) -> dict[str, list[ComponentResult]]:
        if self.judge.config.mode == "group":
            return await self._whole_group(run, members)
        return await self._pairwise(run, members)

    # ------------------------------------------------------------------ group mode

    async def _whole_group(self, run: _Run,
                           members: list[_Member]) -> dict[str, list[ComponentResult]]:
        judge = self.judge
        chunks = plan_chunks(len(members), judge.config.group_chunk)
        samples = judge.config.samples
        jobs = []
        for sample in range(samples):
            for chunk in chunks:
                jobs.append(self._ask_chunk(run, [members[i] for i in chunk], sample))
        outcomes = await asyncio.gather(*jobs)
        out: dict[str, list[ComponentResult]] = {}
        for name, criterion in judge.criteria.items():
            per_sample: list[list[float | None]] = []
            errors: dict[int, str] = {}
            for sample in range(samples):
                grades: list[list[float | None]] = []
                for number, chunk in enumerate(chunks):
                    found = outcomes[sample * len(chunks) + number][name]
                    row: list[float | None] = []
                    for position, member in enumerate(chunk):
                        value = found[position]
                        if isinstance(value, str):
                            errors.setdefault(member, value)
                            row.append(None)
                        else:
                            row.append(value)
                    grades.append(row)
                per_sample.append(align_chunks(chunks, grades, *criterion.range))
            out[name] = [self._combine(criterion, [s[i] for s in per_sample], errors.get(i),
                                       {})
                         for i in range(len(members))]
        return out

    async def _ask_chunk(self, run: _Run, members: list[_Member],
                         sample: int) -> dict[str, list[float | str]]:
        judge = self.judge
        digest = content_hash(*(m.key for m in members), length=32)
        suffix = f"~{sample}" if sample else ""
        keys = {c: [f"{judge.criterion_identity(c)}{digest}:{p}{suffix}"
                    for p in range(len(members))] for c in judge.criteria}

        async def ask(criteria: list[Criterion]) -> tuple[CallRecord, dict[str, float | str]]:
            text = group_prompt(judge.template, [m.values for m in members], criteria)
            overrides = sample_overrides(judge.config, sample)
            if judge.config.response_format == "json_schema":
                overrides["response_format"] = group_schema(len(members), criteria)
            call, content = await self._call(run, text, criteria, overrides)
            if content is None:
                return call, {k: call.error or "judge call failed"
                              for c in criteria for k in keys[c.name]}
            rows = read_group_reply(content, len(members), criteria)
            found = {keys[c.name][p]: rows[p][c.name] for c in criteria
                     for p in range(len(members))}
            return self._mark(run, call, found)

        settled = await self._paid_once(run, keys, ask)
        return {c: [settled[k] for k in keys[c]] for c in judge.criteria}

    # ------------------------------------------------------------------ pairwise mode

    async def _pairwise(self, run: _Run,
                        members: list[_Member]) -> dict[str, list[ComponentResult]]:
        judge = self.judge
        config = judge.config
        if len(members) < 2:
            lone = ComponentResult.failed(Status.ERROR, f"judge {judge.name!r}: pairwise judging "
                                          f"needs at least two rollouts in a group, this one has "
                                          f"{len(members)}")
            return {name: [lone] * len(members) for name in judge.criteria}
        pairs = plan_pairs(len(members), config.all_pairs_up_to, config.pairs_per_rollout)
        samples = config.samples
        jobs = []
        for sample in range(samples):
            for i, j in pairs:
                jobs.append(self._ask_pair(run, members[i], members[j], sample))
                jobs.append(self._ask_pair(run, members[j], members[i], sample))
        verdicts = await asyncio.gather(*jobs)
        out: dict[str, list[ComponentResult]] = {}
        for name, criterion in judge.criteria.items():
            errors: dict[int, str] = {}
            flips: list[list[float]] = [[] for _ in members]
            per_sample: list[list[float | None]] = []
            for sample in range(samples):
                wins: dict[tuple[int, int], float] = {}
                for number, (i, j) in enumerate(pairs):
                    at = 2 * (sample * len(pairs) + number)
                    forward, backward = verdicts[at][name], verdicts[at + 1][name]
                    if isinstance(forward, str) or isinstance(backward, str):
                        message = forward if isinstance(forward, str) else backward
                        errors.setdefault(i, str(message))
                        errors.setdefault(j, str(message))
                        continue
                    wins[(i, j)] = (forward + 1.0 - backward) / 2
                    flip = position_flip(forward, backward)
                    flips[i].append(flip)
                    flips[j].append(flip)
                low, high = criterion.range
                scores = pair_scores(len(members), wins, config.pair_scoring)
                per_sample.append([None if s is None else low + (high - low) * s
                                   for s in scores])
            out[name] = [self._combine(criterion, [s[i] for s in per_sample], errors.get(i),
                                       {"position_bias": statistics.fmean(flips[i])}
                                       if flips[i] else {})
                         for i in range(len(members))]
        return out

    async def _ask_pair(self, run: _Run, first: _Member, second: _Member,
                        sample: int) -> dict[str, float | str]:
        judge = self.judge
        digest = content_hash(first.key, second.key, length=32)
        suffix = f"~{sample}" if sample else ""
        keys = {c: [f"{judge.criterion_identity(c)}{digest}{suffix}"] for c in judge.criteria}

        async def ask(criteria: list[Criterion]) -> tuple[CallRecord, dict[str, float | str]]:
            text = pair_prompt(judge.template, first.values, second.values, criteria)
            overrides = sample_overrides(judge.config, sample)
            if judge.config.response_format == "json_schema":
                overrides["response_format"] = pair_schema(criteria)
            call, content = await self._call(run, text, criteria, overrides)
            if content is None:
                return call, {keys[c.name][0]: call.error or "judge call failed"
                              for c in criteria}
            verdicts = read_pair_reply(content, criteria)
            return self._mark(run, call, {keys[c.name][0]: verdicts[c.name] for c in criteria})

        settled = await self._paid_once(run, keys, ask)
        return {c: settled[keys[c][0]] for c in judge.criteria}

    # ------------------------------------------------------------------ shared

    def _combine(self, criterion: Criterion, values: list[float | None], error: str | None,
                 metrics: dict[str, float]) -> ComponentResult:
        if any(v is None for v in values):
            return ComponentResult.failed(Status.ERROR, error or f"judge {self.judge.name!r}: "
                                          f"no grade for {criterion.name!r}")
        known = [v for v in values if v is not None]
        value, spread = combine_samples(known, binary=criterion.binary)
        if len(known) > 1:
            metrics = {**metrics, "spread": spread}
        return ComponentResult(value, metrics=metrics)

    def _mark(self, run: _Run, call: CallRecord,
              found: dict[str, float | str]) -> tuple[CallRecord, dict[str, float | str]]:
        # A reply cut at max_tokens says so in each error it caused (the scored line shows it).
        cut = (f" (the reply was cut at max_tokens={self.judge.config.max_tokens}: raise "
               f"max_tokens)" if call.cut else "")
        named = {k: (f"judge {self.judge.name!r}: {v}{cut}" if isinstance(v, str) else v)
                 for k, v in found.items()}
        errors = [v for v in named.values() if isinstance(v, str)]
        if errors:
            call.status, call.error = "failed", errors[0]
            run.usage.failed += 1
        return call, named

    async def _call(self, run: _Run, text: str, criteria: list[Criterion],
                    overrides: dict[str, Any]) -> tuple[CallRecord, str | None]:
        judge = self.judge
        assert run.client is not None
        messages = [{"role": "user", "content": text}]
        if judge.config.system:
            messages.insert(0, {"role": "system", "content": judge.config.system})
        call = CallRecord(judge=judge.name, model=judge.config.model,
                          criteria=[c.name for c in criteria], status="ok", attempts=0,
                          tokens_in=0, tokens_out=0, cost=0.0, started_at=time.time())
        try:
            reply = await run.client.complete(messages, criteria, overrides)
        except CallFailed as exc:
            call.status, call.error, call.http_status = "failed", exc.message, exc.status
            call.attempts, call.reply = exc.attempts, exc.raw
            call.tokens_in, call.tokens_out = exc.tokens_in, exc.tokens_out
            content = None
        else:
            call.attempts, call.reply, call.reply_model = reply.attempts, reply.content, reply.model
            call.tokens_in, call.tokens_out = reply.tokens_in, reply.tokens_out
            call.cut = reply.finish_reason == "length"
            content = reply.content
        call.cost = run.usage.charge(judge.config, call.tokens_in, call.tokens_out)
        run.usage.retries += max(0, call.attempts - 1)
        if call.status == "failed":
            run.usage.failed += 1
            if content is None:
                call.error = f"judge {judge.name!r}: {call.error}"
        return call, content

    async def _paid_once(self, run: _Run, keys: dict[str, list[str]],
                         ask: Asker) -> dict[str, float | str]:
        """Each key's grade: replayed, asked (one call for every criterion still missing),
        or waited for while another process asks; errors as messages."""
        judge = self.judge
        all_keys = [k for ks in keys.values() for k in ks]
        criterion_of = {k: c for c, ks in keys.items() for k in ks}
        found: dict[str, float | str] = {}
        try:
            replayed = run.ledger.grades(all_keys, since=judge.refresh_before)
        except RewardsmithError as exc:
            return {k: str(exc) for k in all_keys}
        run.usage.replayed += len(replayed)
        found.update(replayed)
        missing = [c for c, ks in keys.items() if any(k not in found for k in ks)]
        if not missing:
            return found
        wanted = [k for c in missing for k in keys[c] if k not in found]
        asked: tuple[CallRecord, dict[str, float | str]] | None = None
        mine_keys: list[str] = []
        async with run.claim_window:
            limit = run.limits.spent()
            if limit is not None:
                return {**found, **self._unscored(run, wanted, limit)}
            claim = await run.ledger.claim(wanted, run.owner,
                                           {k: criterion_of[k] for k in wanted},
                                           judge.config.model, refresh_before=judge.refresh_before,
                                           retry_failed=judge.config.retry_failed)
            for key, record in claim.done.items():
                if record.value is not None:
                    run.usage.replayed += 1
                    found[key] = record.value
            # Failed more than retry_failed times: the recorded error, not another call (at
            # temperature 0 the same question usually fails the same way).
            run.usage.failed_replayed += len(claim.failed)
            for key, record in claim.failed.items():
                found[key] = record.replayed_failure()
            mine_keys = list(claim.mine)
            mine = [c for c in missing if any(k in claim.mine for k in keys[c])]
            if mine:
                judge._keep_alive(run)
                async with run.limits.call() as ticket:  # in flight, and the budget
                    if ticket.spent is not None:
                        await run.ledger.run(run.ledger.release, mine_keys, run.owner)
                        return {**found, **self._unscored(run, wanted, ticket.spent)}
                    run.usage.calls += 1
                    asked = await ask([judge.criteria[c] for c in mine])
                    ticket.charge(asked[0].tokens_in + asked[0].tokens_out, asked[0].cost)
        if asked is not None:
            call, outcomes = asked
            mine_set = set(mine_keys)
            try:  # recorded before it is used
                await run.ledger.finish(call, {k: v for k, v in outcomes.items() if k in mine_set},
                                        {k: criterion_of[k] for k in outcomes if k in mine_set})
            except RewardsmithError as exc:
                outcomes = {k: f"judge {judge.name!r}: grade not recorded, so not used: {exc}"
                            for k in outcomes}
            for key, value in outcomes.items():
                found.setdefault(key, value)
        theirs = [k for k in claim.theirs if k not in found]
        if theirs:
            records = await run.watcher.wait(theirs)
            for key in theirs:
                theirs_record = records.get(key)
                if (theirs_record is not None and theirs_record.state == "ok"
                        and theirs_record.value is not None):
                    run.usage.shared += 1
                    found[key] = theirs_record.value
                else:
                    found[key] = (f"judge {judge.name!r}: another process sharing the store "
                                  f"did not record this grade; run again to ask for it")
        return found

    def _unscored(self, run: _Run, keys: list[str], limit: str) -> dict[str, float | str]:
        run.usage.budget_exhausted = 1
        run.usage.unscored += len(keys)
        return {k: f"judge {self.judge.name!r}: budget spent ({limit}); not scored" for k in keys}
