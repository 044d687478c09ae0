"""One judge call: the prompt, the request, the reply read into grades, and its record."""

from __future__ import annotations

import time
from collections.abc import Sequence

from .client import CallFailed, JudgeClient
from .config import Criterion, JudgeConfig
from .ledger import CallRecord
from .logprob_grades import weighted_grade
from .parse import parse_reply
from .prompt import Template

__all__ = ["ask", "sample_overrides"]

Outcomes = dict[str, "float | str"]  # criterion -> grade, or the message saying why there is none


async def ask(client: JudgeClient, config: JudgeConfig, template: Template, judge: str,
              values: dict[str, str], asked: Sequence[Criterion],
              sample: int = 0) -> tuple[CallRecord, Outcomes]:
    """Ask for ``asked`` about one rollout's field ``values``; never raises for a bad reply.

    ``sample`` numbers the asks of one rollout (``samples: n``); with a ``seed``, sample i
    is asked with seed + i so that each is a different draw."""
    messages = [{"role": "user", "content": template.render(values, asked)}]
    if config.system:
        messages.insert(0, {"role": "system", "content": config.system})
    call = CallRecord(judge=judge, model=config.model, criteria=[c.name for c in asked],
                      status="ok", attempts=0, tokens_in=0, tokens_out=0, cost=0.0,
                      started_at=time.time())
    outcomes: Outcomes = {}
    try:
        reply = await client.complete(messages, asked, sample_overrides(config, sample))
    except CallFailed as exc:
        call.status, call.error, call.http_status = "failed", exc.message, exc.status
        call.attempts, call.reply = exc.attempts, exc.raw
        call.tokens_in, call.tokens_out = exc.tokens_in, exc.tokens_out
        return call, {c.name: f"judge {judge!r}: {exc.message}" for c in asked}
    call.attempts, call.reply, call.reply_model = reply.attempts, reply.content, reply.model
    call.tokens_in, call.tokens_out = reply.tokens_in, reply.tokens_out
    grades = parse_reply(reply.content, asked)
    # A reply cut at max_tokens says so in each error it caused (the scored line shows it).
    cut = (f" (the reply was cut at max_tokens={config.max_tokens}: raise max_tokens)"
           if reply.finish_reason == "length" else "")
    for criterion in asked:
        grade = grades[criterion.name]
        if config.logprobs and isinstance(grade, float) and reply.logprobs is not None:
            weighted = weighted_grade(reply.logprobs, criterion)
            grade = grade if weighted is None else weighted
        outcomes[criterion.name] = (grade if isinstance(grade, float)
                                    else f"judge {judge!r}: {grade}{cut}")
    errors = [v for v in outcomes.values() if isinstance(v, str)]
    if errors:
        call.status, call.error = "failed", errors[0]
    return call, outcomes


def sample_overrides(config: JudgeConfig, sample: int) -> dict[str, object]:
    """Request keys beyond the config's for one sample: its seed, and the logprobs asked for."""
    overrides: dict[str, object] = {}
    if sample and config.seed is not None:
        overrides["seed"] = config.seed + sample
    if config.logprobs:
        overrides.update(logprobs=True, top_logprobs=config.top_logprobs)
    return overrides
