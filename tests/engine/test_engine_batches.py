"""Batches of an in-memory input: whole groups, and enough of them that no worker sits idle."""

from __future__ import annotations

import pytest

from rewardsmith.engine.plan import slices
from rewardsmith.types import Rollout


def _items(count: int, group_size: int) -> tuple[list[Rollout], list[int]]:
    items = [Rollout(id=str(i), group=str(i // group_size), prompt="", completion="x")
             for i in range(count)]
    sizes = [group_size] * (count // group_size)
    return items, sizes


@pytest.mark.parametrize(("count", "group_size", "workers"), [
    (40, 4, 2), (40, 4, 4), (40, 8, 2), (12, 1, 4), (64, 8, 8), (2, 1, 2)])
def test_a_small_input_gives_every_worker_a_batch(count: int, group_size: int,
                                                  workers: int) -> None:
    items, sizes = _items(count, group_size)
    batches = list(slices(items, sizes, batch_rollouts=2048, workers=workers))
    assert len(batches) >= min(workers, len(sizes))
    assert [r for b in batches for r in b.rollouts] == items
    for batch in batches:  # whole groups only
        assert len({r.group for r in batch.rollouts}) == len(batch.sizes)


def test_a_large_input_still_comes_in_large_batches() -> None:
    items, sizes = _items(20_000, 8)
    batches = list(slices(items, sizes, batch_rollouts=2048, workers=2))
    assert max(len(b.rollouts) for b in batches) >= 2048
    assert len(batches) < 60  # not one batch per group
