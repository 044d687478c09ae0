"""Rules every trainer adapter shares: reserved log keys, masked slime statuses, nested slime
groups, verl batch groups by prompt, what TRL passes that is not a column, and the /slime route's
optional fields."""

from __future__ import annotations

import asyncio
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import httpx
import pytest

from rewardsmith import InputError, Rubric
from rewardsmith.integrations import close_engines
from rewardsmith.integrations.adapters import RESERVED_LOG_KEYS, log_key
from rewardsmith.integrations.endtext import resolve_end_texts
from rewardsmith.integrations.openrlhf import reward_func
from rewardsmith.integrations.slime import custom_rm, sample_state
from rewardsmith.integrations.trl import _rollouts, trl_reward_funcs
from rewardsmith.integrations.verl import compute_score
from rewardsmith.server import ServerConfig, ServerThread

GROUP_SIZE = '''
from rewardsmith import group_reward


@group_reward
def group_size(completions):
    return [float(len(completions))] * len(completions)
'''


class Status(Enum):  # slime's Sample.Status, FAILED included
    PENDING = "pending"
    COMPLETED = "completed"
    TRUNCATED = "truncated"
    ABORTED = "aborted"
    FAILED = "failed"


@dataclass
class Sample:
    prompt: Any = ""
    response: str = ""
    label: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    status: Status = Status.COMPLETED
    index: int | None = None
    group_index: int | None = None


def write_rubric(tmp_path: Path, components: str) -> Path:
    (tmp_path / "sizes.py").write_text(GROUP_SIZE)
    path = tmp_path / "rubric.yaml"
    path.write_text(f"name: rules\ncomponents:\n{components}")
    return path


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setenv("REWARDSMITH_WORKERS", "0")
    monkeypatch.delenv("REWARDSMITH_END_TEXTS", raising=False)
    monkeypatch.delenv("REWARDSMITH_MASKED_REWARD", raising=False)
    path = write_rubric(tmp_path, f"""\
  correct: {{reward: gsm8k, weight: 1.0}}
  size: {{reward: "{tmp_path / 'sizes.py'}:group_size", weight: 0.0}}
""")
    monkeypatch.setenv("REWARDSMITH_RUBRIC", str(path))
    yield path
    close_engines()


# --- one log-key rule -------------------------------------------------------------------------

CLASHING = """\
  acc: {reward: gsm8k, weight: 1.0}
  reward: {reward: marker, weight: 0.5}
  score: {reward: regex, params: {pattern: "7"}, weight: 0.25}
"""


def test_log_key() -> None:
    assert {"reward", "score", "acc", "masked", "failed", "status"} <= RESERVED_LOG_KEYS
    assert log_key("correct") == "correct"
    assert log_key("acc") == "component_acc"
    assert log_key("answer", {"answer"}) == "component_answer"


def test_a_clashing_component_gets_the_same_key_in_every_adapter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clash = tmp_path / "clash"
    clash.mkdir()
    rubric_path = write_rubric(clash, CLASHING)
    monkeypatch.setenv("REWARDSMITH_RUBRIC", str(rubric_path))
    with pytest.warns(UserWarning, match=r"'acc' as 'component_acc'.*'reward' as "
                                         r"'component_reward'"):
        verl = compute_score("gsm8k", "#### 7", "7")
    renamed = {"component_acc", "component_reward", "component_score"}
    want = {"component_acc": 1.0, "component_reward": 1.0, "component_score": 1.0}
    assert renamed <= set(verl) and verl["score"] == 1.75 and verl["acc"] == 1.0
    assert {k: verl[k] for k in renamed} == want

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per rubric, not again
        slime = asyncio.run(custom_rm(types.SimpleNamespace(reward_key="reward"),
                                      Sample("Q", "#### 7", "7")))
        openrlhf = reward_func(["Q#### 7"], ["Q"], ["7"])
    assert slime["reward"] == 1.75 and {k: slime[k] for k in renamed} == want
    logs = {k: [float(x) for x in v] for k, v in openrlhf["extra_logs"].items()}
    assert logs == {"masked": [0.0], "acc": [1.0], "component_acc": [1.0],
                    "component_reward": [1.0], "component_score": [1.0]}

    config = ServerConfig(Rubric.from_yaml(rubric_path), port=0, workers=0,
                          log_level="warning")
    with ServerThread(config) as server, httpx.Client(base_url=server.url) as http:
        detail = http.post("/slime", params={"detail": "true"},
                           json={"prompt": "Q", "response": "#### 7", "label": "7"}).json()
    assert detail["reward"] == 1.75 and {k: detail[k] for k in renamed} == want


def test_a_component_named_like_slimes_reward_key_is_renamed() -> None:
    args = types.SimpleNamespace(reward_key="correct", eval_reward_key=None)
    out = asyncio.run(custom_rm(args, Sample("Q", "#### 8", "7")))
    assert out["correct"] == 0.0 and out["component_correct"] == 0.0
    out = asyncio.run(custom_rm(args, Sample("Q", "#### 7", "7")))
    assert out["correct"] == 1.0 and out["component_correct"] == 1.0


# --- slime: FAILED is masked, lists of lists are scored ---------------------------------------

def test_failed_is_masked_like_aborted(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sample_state(Status.FAILED) == "failed" and sample_state("FAILED") == "failed"
    monkeypatch.setenv("REWARDSMITH_MASKED_REWARD", "-1")
    args = types.SimpleNamespace(reward_key="reward")
    samples = [Sample("Q", "#### 7", "7", status=status, group_index=0)
               for status in (Status.COMPLETED, Status.FAILED, Status.ABORTED)]
    out = asyncio.run(custom_rm(args, samples))
    assert [o["reward"] for o in out] == [1.0, -1.0, -1.0]
    assert [o["masked"] for o in out] == [0.0, 1.0, 1.0]
    assert [o["size"] for o in out] == [1.0, 0.0, 0.0]  # masked samples are not in the group


def test_a_list_of_lists_is_one_group_returned_in_its_shape() -> None:
    def sample(n: int, text: str) -> Sample:
        return Sample("Q", text, "7", index=n, group_index=5)

    nested = [[sample(0, "#### 7"), sample(1, "#### 8")], [sample(2, "7<|im_end|>")],
              sample(3, "#### 6")]
    args = types.SimpleNamespace(reward_key="reward")
    out = asyncio.run(custom_rm(args, nested))
    assert [[o["reward"] for o in out[0]], [o["reward"] for o in out[1]]] == [[1.0, 0.0], [1.0]]
    assert out[2]["reward"] == 0.0  # a bare sample beside the lists keeps its place
    assert {o["size"] for o in [*out[0], *out[1], out[2]]} == {4.0}
    assert asyncio.run(custom_rm(None, [[sample(0, "#### 7")], []])) == [[1.0], []]


def test_lists_nested_three_deep_are_refused() -> None:
    with pytest.raises(InputError, match="at most two deep"):
        asyncio.run(custom_rm(None, [[[Sample("Q", "7", "7")]]]))


# --- verl: batch groups by what identifies the prompt ----------------------------------------

def batch_sizes(extra_infos: list[dict[str, Any]] | None, truths: list[str]) -> list[float]:
    size = len(truths)
    out = compute_score(data_sources=["d"] * size, solution_strs=["#### 7"] * size,
                        ground_truths=truths, extra_infos=extra_infos)
    return [o["size"] for o in out]


def test_verl_batch_consecutive_prompts_with_the_same_answer_stay_apart() -> None:
    by_index = [{"index": i} for i in (0, 0, 1, 1, 1)]
    assert batch_sizes(by_index, ["7"] * 5) == [2.0, 2.0, 3.0, 3.0, 3.0]
    by_question = [{"question": q} for q in ("a", "a", "b", "b", "b")]
    assert batch_sizes(by_question, ["7"] * 5) == [2.0, 2.0, 3.0, 3.0, 3.0]
    # verl's batch manager adds the rollout's own scores; they do not split a group.
    scored = [{"index": 0, "rollout_reward_scores": {"x": float(i)}} for i in range(3)]
    assert batch_sizes(scored, ["7"] * 3) == [3.0] * 3


def test_verl_batch_without_a_prompt_key_guesses_and_says_so() -> None:
    import rewardsmith.integrations.verl as verl

    verl._warned_guess = False
    with pytest.warns(UserWarning, match="no 'index', 'question' or 'prompt'"):
        assert batch_sizes([{"split": "train"}] * 3, ["7", "7", "8"]) == [2.0, 2.0, 1.0]


def test_verl_end_texts_from_reward_kwargs() -> None:
    assert compute_score("d", "7<END>", "7", rubric="exact", end_texts=["<END>"])["score"] == 1.0
    assert compute_score("d", "7<|im_end|>", "7", rubric="exact")["score"] == 1.0
    assert compute_score("d", "7<|im_end|>", "7", rubric="exact", end_texts=[])["score"] == 0.0
    with pytest.raises(Exception, match="end_texts must be a list of strings"):
        compute_score("d", "#### 7", "7", end_texts=5)


# --- TRL -----------------------------------------------------------------------------------

def test_trl_environments_are_not_a_column() -> None:
    environments = [object(), object()]
    rollouts, _ = _rollouts(["p", "p"], ["#### 7", "#### 8"],
                            {"answer": ["7", "7"], "environments": environments, "level": [1, 2]},
                            resolve_end_texts())
    assert [r.metadata for r in rollouts] == [{"level": 1}, {"level": 2}]


class FakeTrainer:
    """The two attributes of GRPOTrainer the adapter reads from its caller."""

    def __init__(self, num_generations: int, aggregation: str):
        self.num_generations = num_generations
        self.multi_objective_aggregation = aggregation

    def _calculate_rewards(self, funcs: Any, prompts: list[str],
                           completions: list[str]) -> list[list[float | None]]:
        # As GRPOTrainer calls reward functions: directly from _calculate_rewards.
        return [f(prompts=prompts, completions=completions, completion_ids=None,
                  answer=["7"] * len(prompts)) for f in funcs]


def test_trl_warns_once_about_a_split_group_and_per_component_normalization() -> None:
    funcs = trl_reward_funcs()
    trainer = FakeTrainer(3, "normalize_then_sum")
    prompts = ["a", "b", "b", "b", "c", "c"]  # 'a' and 'c' arrive short of 3
    with pytest.warns(UserWarning) as caught:
        out = trainer._calculate_rewards(funcs, prompts, ["#### 7"] * 6)
    messages = [str(w.message) for w in caught]
    assert any("group of 1 completions where 3 were expected" in m for m in messages)
    assert any("normalize_then_sum" in m for m in messages)
    assert out[1] == [1.0, 3.0, 3.0, 3.0, 2.0, 2.0]  # the group reward sees only the parts
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trainer._calculate_rewards(funcs, ["x", "y", "y", "y", "z"], ["#### 8"] * 5)
        # whole groups and the default aggregation: nothing to say
        FakeTrainer(3, "sum_then_normalize")._calculate_rewards(
            trl_reward_funcs(), ["a"] * 3 + ["b"] * 3, ["#### 7"] * 6)
        # one function (per_component=False) is not changed by per-function normalization
        FakeTrainer(2, "normalize_then_sum")._calculate_rewards(
            trl_reward_funcs(per_component=False), ["a", "a"], ["#### 7"] * 2)
        # evaluation batches are grouped by num_generations_eval
        evaluating = FakeTrainer(4, "sum_then_normalize")
        evaluating.num_generations_eval = 2  # type: ignore[attr-defined]
        evaluating.model = types.SimpleNamespace(training=False)  # type: ignore[attr-defined]
        evaluating._calculate_rewards(trl_reward_funcs(), ["a", "a", "b", "b"], ["#### 7"] * 4)


# --- the /slime route: optional fields a client may send ------------------------------------

def test_slime_route_reads_truncated_status_and_metadata(tmp_path: Path) -> None:
    route = tmp_path / "route"
    route.mkdir()
    rubric_path = write_rubric(route, """\
  correct: {reward: gsm8k, weight: 1.0}
  overlong: {reward: length, params: {max_length: 1000, buffer: 100}, weight: 0.5}
  tagged: {reward: regex, params: {pattern: "7"}, weight: 0.0}
""")
    config = ServerConfig(Rubric.from_yaml(rubric_path), port=0, workers=0,
                          log_level="warning")
    base = {"prompt": "Q", "response": "#### 7<|im_end|>", "label": "7"}
    with ServerThread(config) as server, httpx.Client(base_url=server.url) as http:
        def post(**extra: Any) -> Any:
            reply = http.post("/slime", params={"detail": "true"}, json={**base, **extra})
            assert reply.status_code == 200, reply.text
            return reply.json()

        assert post()["reward"] == 1.0
        assert post(truncated=True)["overlong"] == -1.0
        assert post(status="truncated")["reward"] == 0.5
        failed = post(status="failed")
        assert (failed["reward"], failed["masked"], failed["status"]) == (0.0, 1.0, "masked")
        assert post(status="aborted")["masked"] == 1.0
        assert post(metadata={"source": "x"})["reward"] == 1.0
        bad = http.post("/slime", json={**base, "truncated": "very"})
        assert bad.status_code == 422
