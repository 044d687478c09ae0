"""The slime / Miles adapter, awaited the way slime's rm_hub awaits a custom reward."""

from __future__ import annotations

import asyncio
import importlib
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import pytest

from rewardsmith import ConfigError, InputError
from rewardsmith.integrations import close_engines


class Status(Enum):  # slime's Sample.Status
    PENDING = "pending"
    COMPLETED = "completed"
    TRUNCATED = "truncated"
    ABORTED = "aborted"


@dataclass
class Sample:  # the fields of slime's Sample that a reward reads
    prompt: Any = ""
    response: str = ""
    label: Any = None
    metadata: dict[str, Any] | None = field(default_factory=dict)
    status: Any = Status.COMPLETED
    index: int | None = None
    group_index: int | None = None


RUBRIC = """
name: slime-test
components:
  correct: {reward: gsm8k, weight: 1.0}
  overlong: {reward: length, params: {max_length: 1000, buffer: 100}, weight: 0.5}
"""


def load_function(path: str) -> Any:
    """slime's load_function: 'module.attr' imported by module path."""
    module_name, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module_name), attr)


async def async_rm(args: Any, sample: Any, **kwargs: Any) -> Any:
    rm = load_function(args.custom_rm_path)
    return await rm(args, sample, **kwargs)


async def batched_async_rm(args: Any, samples: list[Any], **kwargs: Any) -> Any:
    if args.group_rm:
        rm = load_function(args.custom_rm_path)
        return await rm(args, samples, **kwargs)
    return await asyncio.gather(*(async_rm(args, s, **kwargs) for s in samples))


def make_args(**overrides: Any) -> types.SimpleNamespace:
    values = {"custom_rm_path": "rewardsmith.integrations.slime.custom_rm", "group_rm": False,
              "reward_key": None, "eval_reward_key": None}
    values.update(overrides)
    return types.SimpleNamespace(**values)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("REWARDSMITH_WORKERS", "0")
    path = tmp_path / "rubric.yaml"
    path.write_text(RUBRIC)
    monkeypatch.setenv("REWARDSMITH_RUBRIC", str(path))
    monkeypatch.delenv("REWARDSMITH_MASKED_REWARD", raising=False)
    yield
    close_engines()


GROUP = [
    Sample("Q", "#### 42", "42", index=0, group_index=3),
    Sample("Q", "#### 41", "42", index=1, group_index=3),
    Sample("Q", "#### 42", "42", None, Status.TRUNCATED, index=2, group_index=3),
    Sample("Q", "#### 42", "42", {}, "aborted", index=3, group_index=3),
]


def test_one_sample_at_a_time() -> None:
    args = make_args()
    rewards = [asyncio.run(async_rm(args, s)) for s in GROUP]
    assert rewards == [1.0, 0.0, 0.5, 0.0]  # truncated: length gives -1 * 0.5; aborted: masked


def test_group_rm_gets_a_list_and_returns_a_list() -> None:
    args = make_args(group_rm=True)
    assert asyncio.run(batched_async_rm(args, GROUP)) == [1.0, 0.0, 0.5, 0.0]
    args = make_args(group_rm=False)
    assert asyncio.run(batched_async_rm(args, GROUP)) == [1.0, 0.0, 0.5, 0.0]


def test_reward_key_gives_a_dict_with_the_same_keys() -> None:
    args = make_args(group_rm=True, reward_key="reward", eval_reward_key="eval")
    out = asyncio.run(batched_async_rm(args, GROUP))
    assert [r["reward"] for r in out] == [1.0, 0.0, 0.5, 0.0]
    assert [r["eval"] for r in out] == [1.0, 0.0, 0.5, 0.0]
    assert [r["masked"] for r in out] == [0.0, 0.0, 0.0, 1.0]
    assert [r["acc"] for r in out] == [1.0, 0.0, 1.0, 0.0]
    assert out[2]["overlong"] == -1.0
    assert len({tuple(r) for r in out}) == 1


def test_masked_reward_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARDSMITH_MASKED_REWARD", "-0.5")
    assert asyncio.run(async_rm(make_args(), GROUP[3])) == -0.5
    monkeypatch.setenv("REWARDSMITH_MASKED_REWARD", "nan")
    with pytest.raises(ConfigError, match="REWARDSMITH_MASKED_REWARD"):
        asyncio.run(async_rm(make_args(), GROUP[3]))


def test_the_miles_path_and_the_seed_style_call() -> None:
    # Miles: --custom-rm-path rewardsmith.integrations.miles.custom_rm; a bare call with args None
    args = make_args(custom_rm_path="rewardsmith.integrations.miles.custom_rm")
    assert asyncio.run(async_rm(args, GROUP[0])) == 1.0
    from rewardsmith.integrations.miles import custom_rm

    sample = types.SimpleNamespace(response="So the answer is 42.", label="42")
    assert asyncio.run(custom_rm(None, sample)) == 1.0


def test_metadata_picks_the_rubric_and_chat_prompts_work() -> None:
    sample = Sample([{"role": "user", "content": "Say hi"}], "Hi", "hi",
                    {"rubric": "normalized"})
    assert asyncio.run(async_rm(make_args(), sample)) == 1.0


def test_bad_samples_are_named() -> None:
    with pytest.raises(InputError, match="sample.metadata must be a dict"):
        asyncio.run(async_rm(make_args(), Sample("Q", "x", "1", metadata=["no"])))  # type: ignore[arg-type]
    with pytest.raises(InputError, match="expected a slime Sample"):
        asyncio.run(async_rm(make_args(), {"response": "x"}))


def test_with_worker_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARDSMITH_WORKERS", "1")
    assert asyncio.run(batched_async_rm(make_args(group_rm=True), GROUP[:2])) == [1.0, 0.0]
