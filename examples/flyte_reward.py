"""The Flyte guide's reward setup, with rewardsmith inside, run end to end in Flyte's local mode.

A toy policy explores a "world" of documents with tool calls (search, read, write_file) and
answers with ``#### <secret>``. Each trajectory is scored by:

- a verifier: the answer after ``####`` equals the world's secret (deterministic, cheap);
- a format rule: the final message uses the ``####`` marker;
- a tidiness rule: the only file written is ``answer.txt`` (read from the tool calls);
- a judge: how efficiently the trajectory got there (an LLM over an OpenAI-compatible API,
  reading the whole conversation through ``{trajectory}``).

One ``score_group`` task per group, ``retries=2``, and a failure injected after the judge
returns (the "upload" fails on each group's first attempt). The run prints the judge calls
made: exactly one per trajectory, because the retry replays the recorded grades.

    python examples/flyte_reward.py                       # starts the local test judge
    python examples/flyte_reward.py --judge-url http://127.0.0.1:8000/v1 --judge-model M

Without ``--judge-url`` it starts ``tests/support/openai_server.py`` (from a source checkout)
as a subprocess. Flyte's run cache is off unless ``--cache`` (then a repeated run is served from
the cache and calls the judge zero times).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import flyte

from rewardsmith import Component, Judge, Rollout, Rubric
from rewardsmith.integrations.flyte import RewardResult, record_run, reward_task
from rewardsmith.trajectory import tool_calls

N_DOCS = 6
JUDGE_MODEL = "judge-2024-01-01"
TEST_SERVER = Path(__file__).resolve().parent.parent / "tests" / "support" / "openai_server.py"


# ------------------------------------------------------------------ rewards (plain functions)


def final_answer(text: str) -> str | None:
    """The integer after the last '####'; else the last integer in the text."""
    if "####" in text:
        found = re.search(r"-?\d+", text.rsplit("####", 1)[1])
        if found:
            return found.group(0)
    numbers = re.findall(r"-?\d+", text)
    return numbers[-1] if numbers else None


def verified(completion: str, answer: str) -> float:
    """The verifier: 1.0 when the final answer is the world's secret."""
    return 1.0 if final_answer(completion) == answer else 0.0


def uses_marker(completion: str) -> float:
    """The format rule: the final message states its answer after '####'."""
    return 1.0 if "####" in completion else 0.0


def tidy(rollout: Rollout) -> float:
    """1.0 when the only file written is answer.txt."""
    written = [c.arguments.get("path") for c in tool_calls(rollout) if c.name == "write_file"]
    return 1.0 if written == ["answer.txt"] else 0.0


# ------------------------------------------------------------------ a toy policy


def secret_of(world: int) -> str:
    return str(int(hashlib.sha256(f"world-{world}".encode()).hexdigest()[:6], 16) % 10_000)


def trajectory(world: int, sample: int) -> Rollout:
    """A deterministic multi-turn conversation: search documents until the secret is found."""
    digest = hashlib.sha256(f"{world}/{sample}".encode()).digest()
    found_at, wrong, messy = digest[0] % N_DOCS, digest[1] % 4 == 0, digest[2] % 3 == 0
    secret = secret_of(world)
    messages: list[dict[str, Any]] = []

    def call(turn: int, name: str, arguments: str, reply: str, text: str = "") -> None:
        call_id = f"call_{turn}"
        messages.append({"role": "assistant", "content": text, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": name, "arguments": arguments}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": reply})

    for doc in range(found_at + 1):
        reply = f"The secret is {secret}." if doc == found_at else "Nothing relevant here."
        call(doc, "read_doc", f'{{"doc": {doc}}}', reply, f"Reading document {doc}.")
    answer = str(int(secret) + 1) if wrong else secret
    if messy:
        call(N_DOCS, "write_file", '{"path": "notes.txt", "content": "scratch"}', "ok")
    call(N_DOCS + 1, "write_file", f'{{"path": "answer.txt", "content": "{answer}"}}', "ok")
    messages.append({"role": "assistant", "content": f"Done. #### {answer}"})
    return Rollout(id=f"w{world}-s{sample}", group=f"w{world}",
                   prompt=f"Find the secret number of world {world} and write it to answer.txt.",
                   completion=messages, answer=secret)


# ------------------------------------------------------------------ Flyte tasks


def build_rubric(judge_url: str, judge_model: str, api_key_env: str | None) -> Rubric:
    judge = Judge("judge", {
        "base_url": judge_url,
        "model": judge_model,
        "api_key_env": api_key_env,
        "template": ("Task: {prompt}\n\nThe agent's trajectory (tool calls and replies):\n"
                     "{trajectory}"),
        "criteria": {"efficiency": "Did the agent reach the answer without wasted steps?"},
    })
    return Rubric([Component("verified", verified, weight=1.0),
                   Component("format", uses_marker, weight=0.2),
                   Component("tidy", tidy, weight=0.5),
                   *judge.components(weight=1.0)],
                  name="flyte-guide-v1")


FAILED_ONCE: set[str] = set()  # groups whose upload already failed (local mode: one process)


async def upload(results: list[RewardResult]) -> None:
    """Stands in for uploading results; fails on each group's first attempt, after judging."""
    group = results[0].group if results else ""
    if group not in FAILED_ONCE:
        FAILED_ONCE.add(group)
        raise RuntimeError(f"simulated upload failure for group {group} (after the judge)")


policy_env = flyte.TaskEnvironment(name="rewardsmith-example-policy",
                                   resources=flyte.Resources(cpu=1, memory="1Gi"))


@policy_env.task(cache="auto")
async def generate(world: int, n_samples: int) -> list[Rollout]:
    """The rollout task: one group of trajectories for one world (cached on its inputs)."""
    return [trajectory(world, s) for s in range(n_samples)]


def make_driver(reward: Any) -> Any:
    driver_env = flyte.TaskEnvironment(name="rewardsmith-example-driver",
                                       depends_on=[policy_env, reward.env])

    @driver_env.task
    async def train_step(n_worlds: int, n_samples: int) -> list[list[RewardResult]]:
        """Generate each group and score it as soon as its rollouts arrive."""
        async def one(world: int) -> list[RewardResult]:
            results: list[RewardResult] = await reward.score_group(
                await generate(world, n_samples))
            return results
        return list(await asyncio.gather(*(one(w) for w in range(n_worlds))))

    return train_step


# ------------------------------------------------------------------ running it


def start_test_judge() -> tuple[subprocess.Popen[str], str]:
    if not TEST_SERVER.is_file():
        raise SystemExit("no --judge-url given and tests/support/openai_server.py is not "
                         "here (run from a source checkout, or pass --judge-url URL)")
    process = subprocess.Popen([sys.executable, str(TEST_SERVER)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith("READY "):
        process.kill()
        raise SystemExit(f"the test judge did not start (said {line!r})")
    return process, line.split(" ", 1)[1]


def judge_calls(store: Path) -> int:
    """Calls recorded in the judge's ledger (none when every group came from Flyte's cache)."""
    if not store.exists():
        return 0
    with sqlite3.connect(store) as db:
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'judge_calls'").fetchone() is None:
            return 0
        return int(db.execute("SELECT COUNT(*) FROM judge_calls").fetchone()[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--judge-url", help="an OpenAI-compatible /v1 base URL")
    parser.add_argument("--judge-model", default=JUDGE_MODEL)
    parser.add_argument("--api-key-env", help="environment variable holding the judge's key")
    parser.add_argument("--worlds", type=int, default=3, help="groups (default 3)")
    parser.add_argument("--samples", type=int, default=2, help="rollouts per group (default 2)")
    parser.add_argument("--store", type=Path, help="judge ledger and run store (default: new)")
    parser.add_argument("--cache", action="store_true", help="use Flyte's run cache")
    args = parser.parse_args(argv)
    if args.worlds < 1 or args.samples < 1:
        parser.error("--worlds and --samples must be at least 1")

    server = None
    url = args.judge_url
    if url is None:
        server, url = start_test_judge()
    # Flyte's local run data goes away at exit; the store is kept for `rewardsmith rescore`.
    scratch = tempfile.TemporaryDirectory(prefix="rewardsmith-flyte-run-")
    workdir = Path(scratch.name)
    store = args.store or Path(tempfile.mkdtemp(prefix="rewardsmith-flyte-")) / "rewardsmith.db"
    try:
        rubric = build_rubric(url, args.judge_model, args.api_key_env)
        reward = reward_task(rubric, retries=2, timeout=300, store=store,
                             after_scoring=upload)
        train_step = make_driver(reward)
        calls_before = judge_calls(store)
        flyte.init()
        run = flyte.with_runcontext(mode="local", disable_run_cache=not args.cache,
                                    raw_data_path=str(workdir / "raw"),
                                    run_base_dir=str(workdir / "runs"),
                                    ).run(train_step, args.worlds, args.samples)
        groups: list[list[RewardResult]] = run.outputs()[0]
        for group in groups:
            for r in group:
                parts = ", ".join(f"{k}={v}" for k, v in r.components.items())
                print(f"{r.id:8} reward={r.reward} status={r.status} {parts}")
        trajectories = sum(len(g) for g in groups)
        calls = judge_calls(store) - calls_before
        rollouts = [[trajectory(w, s) for s in range(args.samples)] for w in range(args.worlds)]
        run_id = record_run(store, reward.rubric, rollouts, groups)
        print(f"task: {reward.name}.score_group (retries=2); uploads failed: {len(FAILED_ONCE)}")
        print(f"judge calls: {calls} for {trajectories} trajectories")
        print(f"recorded run {run_id} in {store}: "
              f"rewardsmith rescore --store {store} --rubric NEW.yaml")
        expected_ok = calls <= trajectories if args.cache else calls == trajectories
        if not expected_ok:
            print("ERROR: expected exactly one judge call per trajectory", file=sys.stderr)
            return 1
        return 0
    finally:
        scratch.cleanup()
        if server is not None:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
