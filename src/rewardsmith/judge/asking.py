"""One judge call: the prompt, the request, the reply read into grades, and its record."""

from __future__ import annotations

import time
from collections.abc import Sequence

from .client import CallFailed, JudgeClient
from .config import Criterion, JudgeConfig
from .ledger import CallRecord
from .parse import parse_reply
from .prompt import Template

__all__ = ["ask"]

Outcomes = dict[str, "float | str"]  # criterion -> grade, or the message saying why there is none


async def ask(client: JudgeClient, config: JudgeConfig, template: Template, judge: str,
              values: dict[str, str], asked: Sequence[Criterion]) -> tuple[CallRecord, Outcomes]:
    """Ask for ``asked`` about one rollout's field ``values``; never raises for a bad reply."""
    messages = [{"role": "user", "content": template.render(values, asked)}]
    if config.system:
        messages.insert(0, {"role": "system", "content": config.system})
    call = CallRecord(judge=judge, model=config.model, criteria=[c.name for c in asked],
                      status="ok", attempts=0, tokens_in=0, tokens_out=0, cost=0.0,
                      started_at=time.time())
    outcomes: Outcomes = {}
    try:
        reply = await client.complete(messages, asked)
    except CallFailed as exc:
        call.status, call.error, call.http_status = "failed", exc.message, exc.status
        call.attempts, call.reply = exc.attempts, exc.raw
        call.tokens_in, call.tokens_out = exc.tokens_in, exc.tokens_out
        return call, {c.name: f"judge {judge!r}: {exc.message}" for c in asked}
    call.attempts, call.reply, call.reply_model = reply.attempts, reply.content, reply.model
    call.tokens_in, call.tokens_out = reply.tokens_in, reply.tokens_out
    grades = parse_reply(reply.content, asked)
    for criterion in asked:
        grade = grades[criterion.name]
        outcomes[criterion.name] = grade if isinstance(grade, float) else f"judge {judge!r}: {grade}"
    errors = [v for v in outcomes.values() if isinstance(v, str)]
    if errors:
        call.status, call.error = "failed", errors[0]
        if reply.finish_reason == "length":
            call.error += " (the reply was cut at max_tokens)"
    return call, outcomes
