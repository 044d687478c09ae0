"""Run rewardsmith's OpenRLHF adapter and ``/get_reward`` route inside real OpenRLHF code.

Needs OpenRLHF (rewardsmith does not depend on it) in an environment that has torch, transformers
and ray. No GPU, vLLM, DeepSpeed or model is needed and nothing is downloaded::

    pip install --no-deps openrlhf        # checked with 0.11.2
    pip install aiohttp sympy pylatexenc  # what openrlhf.utils imports
    pip install -e .                      # rewardsmith; the server needs rewardsmith[server]
    python scripts/check_openrlhf_reward.py [--server-python PATH]

``--server-python`` is the interpreter that runs ``rewardsmith serve`` (default: this one when it
has fastapi and uvicorn, else ``.venv/bin/python`` of this repository).

vLLM is replaced by a small stub package written to a temp dir (``vllm.SamplingParams``,
``vllm.AsyncLLMEngine`` whose ``generate`` returns fixed responses, each ending with the EOS
token as vLLM's token ids do); everything else is OpenRLHF's own code:

* ``openrlhf.trainer.ray.vllm_engine.RolloutRayActor`` runs as a ray actor with
  ``remote_rm_url`` set the way ``train_ppo_ray.py`` sets it (``--reward.remote_url`` split on
  commas): first the adapter file ``rewardsmith/integrations/openrlhf.py``, then
  ``http://127.0.0.1:PORT/get_reward`` of a ``rewardsmith serve`` subprocess. Its
  ``SingleTurnAgentExecutor`` loads the file (``reward_func``) or posts to the URL;
* ``openrlhf.trainer.ppo_utils.samples_generator.SamplesGenerator`` dispatches GSM8K-style
  prompts x n responses to it and turns the replies into ``Experience`` objects (rewards,
  scores, ``info`` with the ``extra_logs``), with and without ``--algo.dynamic_filtering_enable``;
  ``make_experience_batch`` batches them;
* the same executor's ``reward_func`` and ``_fetch_rewards_via_http`` are also called with the
  whole batch (one call, as a batch-calling OpenRLHF would) to check that groups of identical
  consecutive prompts are found (a group reward component reports its group's size).

Every reward, score and logged value must equal ``rewardsmith.score_rollouts`` for the same
prompt/response pairs (0.0 for the masked samples: the last prompt's label has no number).
Exit status: 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import types
import urllib.request
from pathlib import Path
from typing import Any

TOL = 1e-6
N = 3
# (question, label, responses); the last label has no number, so its samples are masked.
PROBLEMS = [
    ("Tom has 3 apples and buys 4. How many?", "7", ["3+4=7 #### 7", "#### 8", "so 7"]),
    ("A box holds 6 eggs. Eggs in 2 boxes?", "12", ["#### 12", "2*6 is 12", "#### 11."]),
    ("What is the color of the sky?", "unknown", ["#### 4", "blue", "#### 0"]),
]
COMPONENTS = ("correct", "marker", "gsize")
LOG_KEYS = ("masked", "acc", *COMPONENTS)
RUBRIC_YAML = """\
name: openrlhf-check
components:
  correct: {reward: gsm8k, weight: 1.0}
  marker: {reward: regex, params: {pattern: "####"}, weight: 0.2}
  gsize: {reward: "%s:group_size", weight: 0.0}
"""
GROUP_REWARD = '''\
from rewardsmith import group_reward


@group_reward
def group_size(completions):
    return [float(len(completions))] * len(completions)
'''
# The stand-in for vLLM: only what openrlhf's vllm_engine and samples_generator touch.
VLLM_STUB = '''\
"""A stand-in for vLLM (check_openrlhf_reward.py): fixed responses, no model."""
import json
import os
import types

__version__ = "0.11.0"


class SamplingParams:
    def __init__(self, **kwargs):
        self.max_tokens = None
        self.logprobs = None
        self.__dict__.update(kwargs)


class AsyncEngineArgs:
    def __init__(self, *args, **kwargs):
        self.kwargs = kwargs


class _Output:
    def __init__(self, token_ids, text):
        self.token_ids = token_ids
        self.text = text
        self.finish_reason = "stop"
        self.logprobs = None


class AsyncLLMEngine:
    def __init__(self, model):
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model)
        with open(os.path.join(model, "responses.json"), encoding="utf-8") as fh:
            self.responses = json.load(fh)
        self.calls = {}
        self.output_processor = types.SimpleNamespace(get_num_unfinished_requests=lambda: 0)

    @classmethod
    def from_engine_args(cls, engine_args):
        return cls(engine_args.kwargs["model"])

    async def is_sleeping(self):
        return False

    async def generate(self, prompt, sampling_params, request_id=None):
        text = self.tokenizer.decode(prompt["prompt_token_ids"], skip_special_tokens=False)
        seen = self.calls.get(text, 0)
        self.calls[text] = seen + 1
        response = self.responses[text][seen % len(self.responses[text])]
        ids = self.tokenizer.encode(response, add_special_tokens=False)
        ids = ids + [self.tokenizer.eos_token_id]  # vLLM keeps the EOS token id, not its text
        yield types.SimpleNamespace(outputs=[_Output(ids, response)])
'''
VLLM_STUB_SUBMODULES = {
    "inputs.py": "def TokensPrompt(**kwargs):\n    return dict(kwargs)\n",
    "utils.py": "import uuid\n\n\ndef random_uuid():\n    return uuid.uuid4().hex\n",
}

Check = tuple[str, bool, str]


def chat_prompt(question: str) -> str:
    return f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"


def build_tokenizer(where: Path) -> Any:
    """A byte-level BPE tokenizer (lossless, like GPT-2/Qwen) with chat special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [q for q, _, _ in PROBLEMS] + [r for _, _, rs in PROBLEMS for r in rs]
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus * 5, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>",
                                   additional_special_tokens=["<|im_start|>"])
    fast.save_pretrained(str(where))
    return fast


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_python(given: str | None) -> str:
    if given:
        return given
    probe = [sys.executable, "-c", "import fastapi, uvicorn, prometheus_client"]
    if subprocess.run(probe, capture_output=True).returncode == 0:
        return sys.executable
    repo_venv = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "python"
    return str(repo_venv) if repo_venv.exists() else sys.executable


def start_server(python: str, rubric: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = [python, "-m", "rewardsmith", "serve", "--rubric", str(rubric), "--host", "127.0.0.1",
           "--port", str(port), "--workers", "1", "--log-level", "warning"]
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"rewardsmith serve exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
                if resp.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.terminate()
    raise RuntimeError("rewardsmith serve did not answer /health within 60 s")


def expected_scores(rubric_path: Path) -> dict[tuple[str, str], dict[str, float]]:
    """(prompt, response) -> reward and logged values, from rewardsmith.score_rollouts."""
    from rewardsmith import Rollout, Rubric, score_rollouts

    rubric = Rubric.from_yaml(rubric_path)
    rollouts = [Rollout(id=f"{p}-{s}", group=f"q{p}", prompt=chat_prompt(q), completion=r,
                        answer=label)
                for p, (q, label, rs) in enumerate(PROBLEMS) for s, r in enumerate(rs)]
    scores = score_rollouts(rubric, rollouts, workers=0)
    out = {}
    for rollout, score in zip(rollouts, scores):
        masked = score.reward is None
        values = {name: 0.0 if score.components.get(name) is None else score.components[name]
                  for name in COMPONENTS}
        values.update(reward=0.0 if masked else score.reward, masked=1.0 if masked else 0.0,
                      acc=0.0 if masked or not values["correct"] > 0 else 1.0)
        out[(rollout.prompt, rollout.completion)] = values
    return out


def close(a: float, b: float) -> bool:
    return abs(float(a) - float(b)) <= TOL


def scalar(value: Any) -> float:
    import torch

    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(f"expected one number, got shape {tuple(value.shape)}")
        return float(value.flatten()[0].item())
    if isinstance(value, (list, tuple)):
        if len(value) != 1:
            raise ValueError(f"expected one number, got {len(value)}")
        return scalar(value[0])
    return float(value)


def make_generator(tokenizer: Any, engine: Any, dynamic: bool) -> Any:
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

    ns = types.SimpleNamespace
    args = ns(rollout=ns(batch_size=len(PROBLEMS), n_samples_per_prompt=N,
                         vllm_generate_batch_size=len(PROBLEMS)),
              algo=ns(dynamic_filtering_enable=dynamic, dynamic_filtering_range=(0.0, 1.0),
                      advantage=ns(is_correction_level="off")),
              vllm=ns(enable_sleep=False))
    # The prompt dataloader yields (indices, prompts, labels, images) batches.
    batches = [(list(range(len(PROBLEMS))), [chat_prompt(q) for q, _, _ in PROBLEMS],
                [label for _, label, _ in PROBLEMS], [None] * len(PROBLEMS))]
    return SamplesGenerator(ns(args=args), batches, None, tokenizer, [engine])


GENERATE_KWARGS = {"max_new_tokens": 64, "max_len": 1024, "n_samples_per_prompt": N,
                   "temperature": 1.0}


def check_experiences(tag: str, experiences: list[Any], tokenizer: Any,
                      expected: dict[tuple[str, str], dict[str, float]],
                      prompts: set[str]) -> list[Check]:
    from openrlhf.trainer.ppo_utils.experience import make_experience_batch

    checks: list[Check] = []
    want = sum(len(rs) for q, _, rs in PROBLEMS if chat_prompt(q) in prompts)
    checks.append((f"{tag}: experiences", len(experiences) == want,
                   f"{len(experiences)} (want {want})"))
    bad: list[str] = []
    shapes = set()
    for exp in experiences:
        seq = exp.sequences[0]
        acts = exp.action_mask[0].nonzero().flatten() + 1  # action_mask is shifted by one
        response = tokenizer.decode(seq[int(acts[0]):int(acts[-1]) + 1], skip_special_tokens=True)
        key = (exp.prompts[0], response)
        if key not in expected:
            bad.append(f"unknown sample {key!r}")
            continue
        exp_vals = expected[key]
        if exp.rewards is None or exp.scores is None:
            bad.append(f"{response!r}: no reward (rewards={exp.rewards}, scores={exp.scores})")
            continue
        shapes.add((tuple(exp.rewards.shape), tuple(exp.scores.shape)))
        got = {"reward": scalar(exp.rewards), "score": scalar(exp.scores),
               "info.reward": scalar(exp.info["reward"]), "info.score": scalar(exp.info["score"])}
        for name in LOG_KEYS:
            got[name] = scalar(exp.info[name]) if name in exp.info else float("nan")
        want_vals = {"reward": exp_vals["reward"], "score": exp_vals["reward"],
                     "info.reward": exp_vals["reward"], "info.score": exp_vals["reward"],
                     **{k: exp_vals[k] for k in LOG_KEYS}}
        want_vals["gsize"] = 1.0  # OpenRLHF 0.11 calls the reward once per sample
        for name, value in want_vals.items():
            if not close(got[name], value):
                bad.append(f"{response!r} {name}: got {got[name]}, want {value}")
    checks.append((f"{tag}: rewards/scores/extra_logs equal score_rollouts", not bad,
                   "; ".join(bad[:4]) or f"{len(experiences)} samples, (rewards, scores) "
                   f"shapes {sorted(shapes)}"))
    try:
        batch = make_experience_batch(experiences)
        ok = batch.rewards is not None and all(k in batch.info for k in LOG_KEYS)
        checks.append((f"{tag}: make_experience_batch", ok,
                       f"rewards {tuple(batch.rewards.shape)}, info keys "
                       f"{sorted(k for k in batch.info if k in LOG_KEYS)}"))
    except Exception as exc:  # noqa: BLE001 - reported as a failed check
        checks.append((f"{tag}: make_experience_batch", False, repr(exc)))
    return checks


def run_generator(tag: str, tokenizer: Any, engine: Any,
                  expected: dict[tuple[str, str], dict[str, float]]) -> list[Check]:
    checks: list[Check] = []
    samples, _, _, _ = make_generator(tokenizer, engine, False).generate_samples(**GENERATE_KWARGS)
    checks += check_experiences(tag, samples, tokenizer, expected,
                                {chat_prompt(q) for q, _, _ in PROBLEMS})
    # Dynamic filtering keeps a prompt when 0 < mean(scores) < 1.
    keep = set()
    for q, _, rs in PROBLEMS:
        mean = sum(expected[(chat_prompt(q), r)]["reward"] for r in rs) / len(rs)
        if 0.0 < mean < 1.0:
            keep.add(chat_prompt(q))
    filtered, rate, _, _ = make_generator(tokenizer, engine, True).generate_samples(
        **GENERATE_KWARGS)
    got = {e.prompts[0] for e in filtered}
    checks.append((f"{tag}: dynamic filtering uses scores", got == keep,
                   f"kept {len(got)} of {len(PROBLEMS)} prompts (want {len(keep)}), "
                   f"pass rate {rate}"))
    checks += check_experiences(f"{tag} (filtered)", filtered, tokenizer, expected, keep)
    return checks


def check_batch_reply(tag: str, reply: dict[str, Any], queries: list[tuple[str, str]],
                      expected: dict[tuple[str, str], dict[str, float]]) -> Check:
    bad = []
    size = len(queries)
    for field in ("rewards", "scores"):
        if len(reply[field]) != size:
            bad.append(f"{field}: {len(reply[field])} values for {size} queries")
    for name in LOG_KEYS:
        if len(reply["extra_logs"].get(name, [])) != size:
            bad.append(f"extra_logs[{name!r}] missing or not {size} long")
    if not bad:
        for i, key in enumerate(queries):
            want = expected[key]
            pairs = [("rewards", reply["rewards"][i], want["reward"]),
                     ("scores", reply["scores"][i], want["reward"]),
                     *((n, reply["extra_logs"][n][i], want[n]) for n in LOG_KEYS[:-1]),
                     ("gsize (group)", reply["extra_logs"]["gsize"][i], float(N))]
            bad += [f"{key[1]!r} {n}: got {float(g)}, want {w}" for n, g, w in pairs
                    if not close(g, w)]
    return (f"{tag}: whole batch in one call, groups of {N} found", not bad,
            "; ".join(bad[:4]) or f"{size} samples, {len(PROBLEMS)} groups")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server-python", default=None,
                        help="interpreter for 'rewardsmith serve' (needs rewardsmith[server])")
    opts = parser.parse_args()
    started = time.monotonic()

    tmp = Path(tempfile.mkdtemp(prefix="rs-openrlhf-"))
    stub = tmp / "stub" / "vllm"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(VLLM_STUB)
    for name, text in VLLM_STUB_SUBMODULES.items():
        (stub / name).write_text(text)
    rubric = tmp / "rubric.yaml"
    (tmp / "group_size.py").write_text(GROUP_REWARD)
    rubric.write_text(RUBRIC_YAML % (tmp / "group_size.py"))
    model = tmp / "model"
    tokenizer = build_tokenizer(model)
    (model / "responses.json").write_text(json.dumps(
        {chat_prompt(q): rs for q, _, rs in PROBLEMS}))

    env = {"REWARDSMITH_RUBRIC": str(rubric), "REWARDSMITH_WORKERS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp / "stub"),
                                                       os.environ.get("PYTHONPATH")])),
           "TOKENIZERS_PARALLELISM": "false"}
    os.environ.update(env)
    sys.path.insert(0, str(tmp / "stub"))

    import openrlhf
    import ray
    from openrlhf.trainer.ray.vllm_engine import RolloutRayActor
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    import rewardsmith.integrations.openrlhf as adapter

    version = getattr(openrlhf, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version
        version = dist_version("openrlhf")
    print(f"OpenRLHF {version} ({Path(openrlhf.__file__).parent}); vLLM stubbed")

    expected = expected_scores(rubric)
    checks: list[Check] = []
    server = None
    try:
        port = free_port()
        server = start_server(server_python(opts.server_python), rubric, port, tmp / "serve.log")
        url = f"http://127.0.0.1:{port}/get_reward"

        ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": env})
        for tag, remote in (("file", adapter.__file__), ("http", url)):
            # train_ppo_ray.py: args.reward.remote_url.split(",") -> create_vllm_engines
            engine = RolloutRayActor.options(num_cpus=0, num_gpus=0).remote(
                model=str(model), distributed_executor_backend="uni", num_gpus=0,
                agent_func_path=None, remote_rm_url=remote.split(","), mm_pad_token_ids=set())
            checks += run_generator(f"{tag} (ray actor)", tokenizer, engine, expected)
            ray.kill(engine)

        # One call with the whole batch, through the executor's own loader and HTTP client.
        pairs, queries, prompts, labels = [], [], [], []
        for q, label, rs in PROBLEMS:
            for r in rs:
                ids = (tokenizer.encode(chat_prompt(q), add_special_tokens=False)
                       + tokenizer.encode(r, add_special_tokens=False) + [tokenizer.eos_token_id])
                pairs.append((chat_prompt(q), r))
                queries.append(tokenizer.decode(ids, skip_special_tokens=False))
                prompts.append(chat_prompt(q))
                labels.append(label)
        checks.append(("query = prompt + response + EOS text",
                       all(qr == p + r + tokenizer.eos_token for qr, (p, r) in zip(queries, pairs)),
                       f"e.g. {queries[0][-24:]!r}"))
        local = SingleTurnAgentExecutor(remote_rm_url=[adapter.__file__])
        reply = local.reward_func(queries, prompts, labels)
        reply = {"rewards": reply["rewards"].tolist(), "scores": reply["scores"].tolist(),
                 "extra_logs": {k: v.tolist() for k, v in reply["extra_logs"].items()}}
        checks.append(check_batch_reply("file", reply, pairs, expected))
        http = SingleTurnAgentExecutor(remote_rm_url=[url])
        [reply] = asyncio.run(http._fetch_rewards_via_http(queries, prompts, labels))
        checks.append(check_batch_reply("http", reply, pairs, expected))
    except Exception as exc:  # noqa: BLE001 - reported as a failed check
        checks.append(("run", False, f"{type(exc).__name__}: {exc}"))
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
        shutil.rmtree(tmp, ignore_errors=True)

    for name, ok, detail in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    failed = sum(not ok for _, ok, _ in checks)
    print(f"{len(checks) - failed}/{len(checks)} checks passed in "
          f"{time.monotonic() - started:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
