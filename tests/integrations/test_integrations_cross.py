"""One rubric in every trainer: the same answers, passed the way each trainer passes them, get the
same reward and the same components from every adapter and server route.

The trainers differ in what text reaches the reward. TRL and verl decode the completion with
``skip_special_tokens=True`` (a clean ``"7"``); slime and Miles keep the stop text in
``sample.response`` (``"7<|im_end|>"``); OpenRLHF decodes prompt + response with special tokens
kept, so the query carries the chat template's tokens and the end-of-sequence text. Each case
below gives the answer to each adapter in its trainer's form, for several chat templates.
"""

from __future__ import annotations

import asyncio
import importlib.util
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

import rewardsmith.integrations.openrlhf as openrlhf_module
from rewardsmith import Rollout, Rubric
from rewardsmith.integrations import close_engines
from rewardsmith.integrations.adapters import score_rollouts
from rewardsmith.integrations.miles import custom_rm as miles_custom_rm
from rewardsmith.integrations.slime import custom_rm as slime_custom_rm
from rewardsmith.integrations.trl import trl_reward_funcs
from rewardsmith.integrations.verl import compute_score
from rewardsmith.server import ServerConfig, ServerThread

RUBRIC = """
name: cross-trainer
components:
  exact: {reward: exact, weight: 1.0}
  length: {reward: length, params: {max_length: 24, buffer: 16, unit: chars}, weight: 0.5}
  format: {reward: regex, params: {pattern: "^[0-9]+$"}, weight: 0.25}
"""
NAMES = ("exact", "length", "format")

# (question, label, clean answers): right, wrong, right but wordy (format 0, length penalty),
# and long enough for the length ramp.
PROBLEMS = [
    ("What is 3 + 4?", "7", ["7", "8", "It is 7", "The sum of three and four is 7"]),
    ("What is 6 x 7?", "42", ["42", "41", "42 (six sevens)", "forty-two, as six times seven"]),
]

# Chat templates: how the prompt is wrapped and what text ends the turn (and the sequence).
TEMPLATES = {
    "chatml": ("<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n", "<|im_end|>"),
    "llama3": ("<|start_header_id|>user<|end_header_id|>\n\n{q}<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"),
    "gemma": ("<start_of_turn>user\n{q}<end_of_turn>\n<start_of_turn>model\n", "<end_of_turn>"),
    "mistral": ("<s>[INST] {q} [/INST]", "</s>"),
    "deepseek": ("<｜User｜>{q}<｜Assistant｜>", "<｜end▁of▁sentence｜>"),
    "qwen-padded": ("<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n",
                    "<|im_end|>\n<|endoftext|>"),
}


class Status(Enum):  # slime's and Miles' Sample.Status
    PENDING = "pending"
    COMPLETED = "completed"
    TRUNCATED = "truncated"
    ABORTED = "aborted"
    FAILED = "failed"


@dataclass
class Sample:  # the fields of slime's Sample that a reward reads
    prompt: Any = ""
    response: str = ""
    label: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    status: Status = Status.COMPLETED
    index: int | None = None
    group_index: int | None = None


@dataclass(frozen=True)
class Answer:
    group: int
    question: str
    label: str
    text: str  # what the model meant, without special tokens


ANSWERS = [Answer(g, q, label, text) for g, (q, label, texts) in enumerate(PROBLEMS)
           for text in texts]
Expected = tuple[float, dict[str, float]]


@pytest.fixture(autouse=True)
def _rubric(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setenv("REWARDSMITH_WORKERS", "0")
    monkeypatch.delenv("REWARDSMITH_END_TEXTS", raising=False)
    path = tmp_path / "rubric.yaml"
    path.write_text(RUBRIC)
    monkeypatch.setenv("REWARDSMITH_RUBRIC", str(path))
    yield path
    close_engines()


def expected(rubric_path: Path) -> list[Expected]:
    """The rubric's reward and components for each clean answer, scored directly."""
    rollouts = [Rollout(str(n), str(a.group), a.question, a.text, a.label)
                for n, a in enumerate(ANSWERS)]
    out = []
    for scored in score_rollouts(rollouts, explicit=str(rubric_path)):
        score = scored.score
        assert score.reward is not None
        out.append((score.reward, {n: float(score.components[n] or 0.0) for n in NAMES}))
    return out


def check(got: list[Expected], want: list[Expected], who: str) -> None:
    for answer, (reward, components), (want_reward, want_components) in zip(ANSWERS, got, want):
        assert reward == want_reward, f"{who}: reward for {answer.text!r}"
        assert components == want_components, f"{who}: components for {answer.text!r}"
    assert len(got) == len(want), who


def test_the_answers_span_the_components(_rubric: Path) -> None:
    want = expected(_rubric)
    for name in NAMES:
        assert len({c[name] for _, c in want}) > 1, f"every answer scores the same on {name}"
    # The end text alone would change every component if it reached the grader.
    [dirty] = score_rollouts([Rollout("x", "0", "q", "7<|im_end|>", "7")],
                             explicit=str(_rubric))
    assert dirty.score.reward != want[0][0]


# --- TRL: clean text (or chat messages), one call per reward function over the batch ---------

def trl_batch(conversational: bool) -> dict[str, Any]:
    prompts: list[Any] = [a.question for a in ANSWERS]
    completions: list[Any] = [a.text for a in ANSWERS]
    if conversational:
        prompts = [[{"role": "user", "content": p}] for p in prompts]
        completions = [[{"role": "assistant", "content": c}] for c in completions]
    return {"prompts": prompts, "completions": completions,
            "completion_ids": [[1, 2]] * len(ANSWERS),
            "answer": [a.label for a in ANSWERS], "trainer_state": None,
            "environments": [object()] * len(ANSWERS)}


@pytest.mark.parametrize("conversational", [False, True])
def test_trl(_rubric: Path, conversational: bool) -> None:
    funcs = trl_reward_funcs()
    batch = trl_batch(conversational)
    per_func = {f.__name__: f(**batch) for f in funcs}
    got = []
    for row in range(len(ANSWERS)):
        values = {name: per_func[name][row] for name in NAMES}
        assert all(v is not None for v in values.values())
        # TRL's sum_then_normalize: weights times outputs, summed (nansum) per row.
        total = sum(w * float(values[f.__name__] or 0.0)
                    for f, w in zip(funcs, funcs.reward_weights))
        got.append((total, {k: float(v or 0.0) for k, v in values.items()}))
    want = expected(_rubric)
    for (total, components), (want_total, want_components) in zip(got, want):
        assert total == pytest.approx(want_total, abs=1e-12)
        assert components == want_components
    [total_func] = trl_reward_funcs(per_component=False)
    assert total_func(**batch) == [w for w, _ in want]


# --- verl: clean text; per sample, and the batch manager's numpy columns ---------------------

def verl_info(answer: Answer) -> dict[str, Any]:
    return {"index": answer.group, "question": answer.question, "split": "train"}


def verl_result(out: dict[str, float]) -> Expected:
    return out["score"], {name: out[name] for name in NAMES}


def test_verl_per_sample(_rubric: Path) -> None:
    got = [verl_result(compute_score(data_source="cross", solution_str=a.text,
                                     ground_truth=a.label, extra_info=verl_info(a)))
           for a in ANSWERS]
    check(got, expected(_rubric), "verl per sample")


def test_verl_batch(_rubric: Path) -> None:
    size = len(ANSWERS)
    out = compute_score(
        data_sources=np.array(["cross"] * size, dtype=object),
        solution_strs=[a.text for a in ANSWERS],
        ground_truths=[a.label for a in ANSWERS],
        extra_infos=np.array([verl_info(a) for a in ANSWERS], dtype=object))
    check([verl_result(o) for o in out], expected(_rubric), "verl batch")


# --- slime and Miles: the response keeps the stop text ---------------------------------------

def slime_samples(end: str) -> list[Sample]:
    return [Sample(prompt=a.question, response=a.text + end, label=a.label, index=n,
                   group_index=a.group) for n, a in enumerate(ANSWERS)]


def slime_result(out: dict[str, float]) -> Expected:
    return out["reward"], {name: out[name] for name in NAMES}


RM_FUNCS = {"slime": slime_custom_rm, "miles": miles_custom_rm}


@pytest.mark.parametrize("trainer", sorted(RM_FUNCS))
@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_slime_and_miles(_rubric: Path, trainer: str, template: str) -> None:
    custom_rm: Callable[..., Any] = RM_FUNCS[trainer]
    args = types.SimpleNamespace(reward_key="reward", eval_reward_key=None, group_rm=False)
    end = TEMPLATES[template][1]
    want = expected(_rubric)

    async def run() -> None:
        single = [await custom_rm(args, s) for s in slime_samples(end)]
        check([slime_result(o) for o in single], want, f"{trainer} single")
        samples = slime_samples(end)
        groups = [[s for s in samples if s.group_index == g] for g in range(len(PROBLEMS))]
        grouped = [o for group in groups for o in await custom_rm(args, group)]
        check([slime_result(o) for o in grouped], want, f"{trainer} --group-rm")
        # A generate function returning several samples per prompt: a list of lists per group.
        for group in groups:
            nested = [[s] for s in group[:2]] + [group[2:]]
            out = await custom_rm(args, nested)
            assert [len(x) for x in out] == [1, 1, len(group) - 2]
            flat = [o for inner in out for o in inner]
            check([slime_result(o) for o in flat], [want[s.index or 0] for s in group],
                  f"{trainer} list of lists")
        # Without --reward-key slime gets the bare reward.
        bare = types.SimpleNamespace(reward_key=None, eval_reward_key=None)
        assert [await custom_rm(bare, s) for s in slime_samples(end)] == [w for w, _ in want]

    asyncio.run(run())


# --- OpenRLHF: prompt + response + EOS, decoded with special tokens kept ---------------------

def openrlhf_lists(template: str) -> tuple[list[str], list[str], list[str]]:
    wrap, end = TEMPLATES[template]
    prompts = [wrap.format(q=a.question) for a in ANSWERS]
    queries = [p + a.text + end for p, a in zip(prompts, ANSWERS)]
    return queries, prompts, [a.label for a in ANSWERS]


def openrlhf_results(reply: dict[str, Any]) -> list[Expected]:
    def floats(value: Any) -> list[float]:
        return [float(v) for v in (value.tolist() if hasattr(value, "tolist") else value)]

    rewards = floats(reply["rewards"])
    assert floats(reply["scores"]) == rewards
    logs = {k: floats(v) for k, v in reply["extra_logs"].items()}
    assert set(logs) == {"masked", "acc", *NAMES}
    return [(r, {name: logs[name][n] for name in NAMES}) for n, r in enumerate(rewards)]


def load_like_openrlhf() -> Callable[..., Any]:
    """OpenRLHF's SingleTurnAgentExecutor: a remote_rm_url ending in .py, run as a module."""
    spec = importlib.util.spec_from_file_location("reward_func", openrlhf_module.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reward_func  # type: ignore[no-any-return]


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_openrlhf_file(_rubric: Path, template: str) -> None:
    reward_func = load_like_openrlhf()
    queries, prompts, labels = openrlhf_lists(template)
    want = expected(_rubric)
    # OpenRLHF since 0.9.10: one sample per call.
    got = [openrlhf_results(reward_func([q], [p], [lab]))[0]
           for q, p, lab in zip(queries, prompts, labels)]
    check(got, want, "OpenRLHF file, one per call")
    check(openrlhf_results(reward_func(queries, prompts, labels)), want, "OpenRLHF file, batch")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("server") / "rubric.yaml"
    path.write_text(RUBRIC)
    config = ServerConfig(Rubric.from_yaml(path), port=0, workers=0, log_level="warning")
    with ServerThread(config) as running:
        yield running.url


def test_openrlhf_http_and_slime_route(_rubric: Path, server: str) -> None:
    want = expected(_rubric)
    with httpx.Client(base_url=server, timeout=30) as http:
        for template in sorted(TEMPLATES):
            queries, prompts, labels = openrlhf_lists(template)
            for n, (q, p, lab) in enumerate(zip(queries, prompts, labels)):
                reply = http.post("/get_reward", json={"query": [q], "prompts": [p],
                                                      "labels": [lab]})
                assert reply.status_code == 200, reply.text
                check(openrlhf_results(reply.json()), [want[n]], f"/get_reward {template}")
            reply = http.post("/get_reward", json={"query": queries, "prompts": prompts,
                                                  "labels": labels})
            check(openrlhf_results(reply.json()), want, f"/get_reward batch {template}")
            end = TEMPLATES[template][1]
            # slime's remote_rm posts prompt, response (with the stop text) and label.
            for n, answer in enumerate(ANSWERS):
                body = {"prompt": answer.question, "response": answer.text + end,
                        "label": answer.label}
                assert http.post("/slime", json=body).json() == want[n][0]
                detail = http.post("/slime", params={"detail": "true"}, json=body).json()
                check([slime_result(detail)], [want[n]], f"/slime {template}")
