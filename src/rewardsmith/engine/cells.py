"""Results as cells: the compact forms results travel in, and how a batch's results land in
the result columns (one place, whichever executor ran the batch)."""

from __future__ import annotations

import array
import time
from collections.abc import Iterable
from typing import Any, cast

from rewardsmith.rubric.calling import to_component_result
from rewardsmith.store.status_codes import (
    STATUS_CODES,
    code_of,
)
from rewardsmith.workers import BatchResult, LateResult

from ..types import ComponentResult, Rollout, Status

__all__ = ["Cell", "Compact", "RolloutTuple", "as_result", "as_tuple", "check_in_time",
           "compact", "expand", "failure_result", "floats_only", "group_results", "read_value",
           "store_columns"]

RolloutTuple = tuple[str, str, Any, Any, Any, dict[str, Any], bool]
Compact = tuple[float | None, int, str | None, dict[str, float] | None]
Cell = float | ComponentResult | None  # a bare float is an ok result without metrics


def compact(result: ComponentResult) -> float | Compact:
    # The common case (ok, no metrics) travels as a bare float: cheap to pickle and to combine.
    if result.status is Status.OK and not result.metrics and type(result.value) is float:
        return result.value
    return (result.value, code_of(result.status), result.error, result.metrics or None)


def expand(compact: float | Compact) -> ComponentResult:
    if type(compact) is float:
        return ComponentResult(compact)
    value, code, error, metrics = compact  # type: ignore[misc]
    return ComponentResult(value, STATUS_CODES[code], error, metrics or {})


def as_tuple(rollout: Rollout) -> RolloutTuple:
    return (rollout.id, rollout.group, rollout.prompt, rollout.completion, rollout.answer,
            rollout.metadata, rollout.truncated)


def check_in_time(started: float, limit: float) -> None:
    if time.monotonic() - started > limit:
        raise LateResult(f"timed out after {limit:g} s (returned too late)")


def read_value(reward_key: str, value: Any) -> float | Compact:
    return compact(to_component_result(value, reward_key))


def group_results(values: Any, size: int, reward_key: str) -> list[ComponentResult]:
    """A group reward's return value as one result per rollout (a wrong length is an error)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        message = f"group reward returned {type(values).__name__}, expected a list of {size}"
        return [ComponentResult.failed(Status.ERROR, message) for _ in range(size)]
    items = list(values)
    if len(items) != size:
        message = f"group reward returned {len(items)} values for a group of {size}"
        return [ComponentResult.failed(Status.ERROR, message) for _ in range(size)]
    return [to_component_result(v, reward_key) for v in items]


def floats_only(values: list[Any]) -> bool:
    """Whether every value is a float (a set of types is built at C speed)."""
    return not values or set(map(type, values)) == {float}


def store_columns(batch: BatchResult, size: int, columns: list[list[Cell]]) -> bool:
    """Put a whole batch's values (component-major, every call made) into the columns;
    True when they are all finite floats."""
    values, failures = batch.values, batch.failures
    if isinstance(values, array.array):  # the worker found nothing but finite floats
        for k, column in enumerate(columns):
            column[:] = values[k * size : (k + 1) * size].tolist()
        return True
    for k, column in enumerate(columns):
        part = values[k * size : (k + 1) * size]
        if not floats_only(part):
            part = [v if type(v) is float or v is None else expand(v) for v in part]
        column[:] = part
    for position, failure in failures.items():
        k, row = divmod(position, size)
        columns[k][row] = failure_result(*failure)
    return False


def as_result(cell: Cell) -> ComponentResult:
    if cell is None:
        return ComponentResult.failed(Status.ERROR, "no result (internal error)")
    if type(cell) is float:
        return ComponentResult(cell)
    return cast(ComponentResult, cell)


def failure_result(status: int, message: Any) -> ComponentResult:  # from a worker Outcome
    return ComponentResult.failed(Status.TIMEOUT if status == 2 else Status.ERROR, str(message))
