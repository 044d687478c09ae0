"""Grade scales are sent as schemas a server can enforce (integers, enums), never as a bare
number with minimum/maximum, which grammar-constrained servers do not hold to."""

from __future__ import annotations

from typing import Any

import pytest

from rewardsmith.judge.client import request_body
from rewardsmith.judge.compare_prompts import group_schema
from rewardsmith.judge.config import Criterion, JudgeConfig
from rewardsmith.judge.prompt import render_criteria
from rewardsmith.judge.scales import allowed_grades, grade_schema


def crit(low: float = 0.0, high: float = 1.0, *, binary: bool = False) -> Criterion:
    return Criterion(name="c", description="d", range=(low, high), binary=binary)


@pytest.mark.parametrize(("criterion", "schema"), [
    (crit(binary=True), {"type": "integer", "minimum": 0, "maximum": 1, "enum": [0, 1]}),
    (crit(0, 10), {"type": "integer", "minimum": 0, "maximum": 10, "enum": list(range(11))}),
    (crit(1, 5), {"type": "integer", "minimum": 1, "maximum": 5, "enum": [1, 2, 3, 4, 5]}),
    (crit(0, 100), {"type": "integer", "minimum": 0, "maximum": 100}),
    (crit(0, 1), {"type": "number",
                  "enum": [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1]}),
    (crit(-1, 1.5), {"type": "number",
                     "enum": [-1, -0.75, -0.5, -0.25, 0, 0.25, 0.5, 0.75, 1, 1.25, 1.5]}),
])
def test_each_scale_is_sent_as_an_enforceable_schema(criterion: Criterion,
                                                     schema: dict[str, Any]) -> None:
    sent = grade_schema(criterion)
    assert sent.pop("description") == "d"
    assert sent == schema
    # Never a bounded "number": that is the form servers do not enforce.
    assert not (sent["type"] == "number" and "enum" not in sent)
    grades = allowed_grades(criterion)
    if grades is not None:
        low, high = criterion.range
        assert grades[0] == low and grades[-1] == high and grades == sorted(grades)


def test_request_and_group_schemas_use_the_scales() -> None:
    config = JudgeConfig(base_url="http://127.0.0.1:1/v1", model="m", template="{completion}",
                         criteria={"score": {"description": "d", "range": [1, 10]},
                                   "ok": {"description": "d", "binary": True}})
    body = request_body(config, [{"role": "user", "content": "x"}], config.criteria)
    properties = body["response_format"]["json_schema"]["schema"]["properties"]
    assert properties["score"]["type"] == "integer" and properties["score"]["enum"][0] == 1
    assert properties["ok"]["enum"] == [0, 1]
    grouped = group_schema(2, config.criteria)["json_schema"]["schema"]["properties"]
    assert grouped["1"]["properties"]["score"] == properties["score"]
    text = render_criteria(config.criteria)
    assert "- score (a number from 1 to 10, a whole number)" in text
    assert "- ok (a number from 0 to 1: 0 fails, 1 passes)" in text
