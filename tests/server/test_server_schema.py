"""Property-based API tests from the server's own OpenAPI schema: no 500s, replies as declared,
every body the schema allows is accepted and every body it forbids is refused."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.result import Ok

from rewardsmith import Rubric
from rewardsmith.server import ServerConfig, ServerThread

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance, response_headers_conformance, positive_data_acceptance,
          negative_data_rejection]
# The one rule the routes enforce that JSON Schema cannot state (their descriptions do):
# OpenRLHF's prompts and labels come one per query.
MATCHED_LENGTHS = {"/get_reward", "/openrlhf"}


def one_per_query(case: schemathesis.Case[Any]) -> schemathesis.Case[Any]:
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("query"), list):
        size = len(body["query"])
        for key, filler in (("prompts", ""), ("labels", None)):
            if isinstance(body.get(key), list):
                body[key] = (body[key] + [filler] * size)[:size]
    return case


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    data = resources.files("rewardsmith") / "data"
    with resources.as_file(data / "demo_rubric.yaml") as path:
        rubric = Rubric.from_yaml(path)
    config = ServerConfig(rubric, port=0, workers=0, max_batch=64, log_level="warning")
    with ServerThread(config) as server:
        yield server.url


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_every_operation_against_the_live_server(url: str, mode: str) -> None:
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    schema.config.generation.update(modes=[schemathesis.GenerationMode(mode)])
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        operations.append(result.ok())
    assert {op.path for op in operations} >= {"/score", "/get_reward", "/slime", "/health"}
    for operation in operations:
        strategy = operation.as_strategy()
        if operation.path in MATCHED_LENGTHS:
            strategy = strategy.map(one_per_query)

        @given(case=strategy)
        @settings(max_examples=12, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def run(case: schemathesis.Case[Any]) -> None:
            case.call_and_validate(base_url=url, checks=CHECKS, timeout=20)

        run()
