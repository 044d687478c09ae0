"""Each page's setup: the inputs it uses without showing them, and the output it shows."""

from __future__ import annotations

from .page_inputs import (
    agent_judge,
    bundled_demo_rubric,
    dataset_row,
    demo_prints,
    drift_steps,
    flyte_example_prints,
    flyte_inputs,
    gate_json,
    gate_runs,
    ifeval_answer,
    judge_limits,
    judged_store,
    missing_module_message,
    mixed_group_warnings,
    mixed_groups,
    scored_runs,
    server_reply,
    tracked_steps,
    trajectory_template,
    two_rubrics,
)
from .runner import PageSetup

DEMO_ROLLOUTS = "demo:demo_rollouts.jsonl"  # 64 GSM8K-style rollouts, 8 groups of 8
DEMO_RUBRIC = "demo:demo_rubric.yaml"


# Names a Python block takes as given: the demo's rubric, its rollouts, their groups, and an
# engine already open (closed when the block's process ends).
DEMO_NAMES = """\
import atexit
from rewardsmith import Engine, Rubric, read_rollouts

rubric = Rubric.from_yaml("rubric.yaml")
rollouts = list(read_rollouts("rollouts.jsonl"))
_by_group = {}
for _rollout in rollouts:
    _by_group.setdefault(_rollout.group, []).append(_rollout)
groups_as_they_arrive = list(_by_group.values())
group = groups_as_they_arrive[0]


async def _arriving():
    for _group in groups_as_they_arrive:
        yield _group


async_groups = _arriving()
engine = Engine(rubric, workers=1)
atexit.register(engine.close)
"""
DEMO_INPUTS = {"rollouts.jsonl": DEMO_ROLLOUTS, "rubric.yaml": DEMO_RUBRIC}


FLYTE_NAMES = """\
import flyte
from rewardsmith import Rollout, read_rollouts
from rewardsmith.integrations.flyte import RewardResult, reward_task

rollouts = list(read_rollouts("rollouts.jsonl"))[:8]
policy_env = flyte.TaskEnvironment(name="policy")


@policy_env.task
async def generate(world: int) -> list[Rollout]:
    return rollouts


driver_env = flyte.TaskEnvironment(name="driver")
"""


TRACKED_NAMES = """\
from rewardsmith import Rubric
from rewardsmith.jobs.score import ScoreJob

_result = ScoreJob(Rubric.from_yaml("rubric.yaml"), workers=0).run("rollouts.jsonl")
summary, scores = _result.summary, _result.scores
batches = [scores[:24], scores[24:48], scores[48:]]
"""
# W&B writes its run offline, in the workspace: nothing leaves the machine.
OFFLINE_WANDB = {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DISABLE_GIT": "true",
                 "WANDB_ERROR_REPORTING": "false", "WANDB_DISABLE_CODE": "true"}


JUDGE_NAMES = """\
from rewardsmith import read_rollouts

rollouts = list(read_rollouts("rollouts.jsonl"))[:16]
"""


# A C++ program that adds two numbers and hangs on one input, and ten tests: 7 pass, the 8th
# runs past its time limit, and the two after it are skipped.
CODE_NAMES = r"""
text = "\n".join([
    "```cpp",
    "#include <chrono>",
    "#include <iostream>",
    "#include <thread>",
    "int main() {",
    "    long a, b;",
    "    std::cin >> a >> b;",
    "    if (a == 8) std::this_thread::sleep_for(std::chrono::seconds(30));",
    "    std::cout << a + b << std::endl;",
    "}",
    "```"])
tests = {"inputs": [f"{a} 1\n" for a in range(1, 11)],
         "outputs": [f"{a + 1}\n" for a in range(1, 11)]}
"""
CODE_SHOWN = """\
shown = {"code.passed": 7.0, "code.total": 10.0, "code.timeouts": 1.0}
assert {k: scores[0].metrics[k] for k in shown} == shown, scores[0].metrics
"""


PAGES: dict[str, PageSetup] = {
    "README.md": PageSetup(files={"rollouts.jsonl": DEMO_ROLLOUTS}),
    "docs/getting-started.md": PageSetup(
        files={"rollouts.jsonl": DEMO_ROLLOUTS, "rubric.yaml": DEMO_RUBRIC},
        checks={"name: gsm8k-demo": bundled_demo_rubric, "rubric gsm8k-demo": demo_prints}),
    "docs/data-formats.md": PageSetup(files={"demo.yaml": DEMO_RUBRIC}, rubric="demo.yaml"),
    "docs/writing-rewards.md": PageSetup(
        files={"rollouts.jsonl": DEMO_ROLLOUTS},
        checks={"error: rubric.yaml: components.mine": missing_module_message}),
    "docs/rubrics.md": PageSetup(
        files={"my_rewards.py": "my_rewards.py"},
        prelude="def my_function(completion: str) -> float:\n    return float(len(completion) > 0)\n"),
    "docs/answers.md": PageSetup(),
    "docs/advantages.md": PageSetup(prelude=(
        "rewards = [0.3] * 16 + [1.0, 0.0, 0.5, 0.25]\n"
        "groups = ['equal'] * 16 + ['mixed'] * 4\n")),
    "docs/drift.md": PageSetup(
        files={"rollouts.jsonl": DEMO_ROLLOUTS}, prepare=drift_steps, judge=True,
        exit_codes={"rewardsmith drift s*.jsonl": 1},  # --strict: step 3's flat groups warn
        prelude=("from rewardsmith import read_rollouts\n"
                 "_all = list(read_rollouts('rollouts.jsonl'))\n"
                 "batches_of_rollouts = [_all[:24], _all[24:48], _all[48:]]\n")),
    "docs/flyte.md": PageSetup(
        files={"rollouts.jsonl": DEMO_ROLLOUTS, "rubric.yaml": DEMO_RUBRIC,
               "trajectory.jsonl": "trajectory.jsonl"},
        prelude=FLYTE_NAMES, prepare=flyte_inputs, judge=True,
        checks={"template: ": trajectory_template, "task: ": flyte_example_prints},
        slow=True),  # runs examples/flyte_reward.py again (flyte in local mode, ~10 s of CPU)
    "docs/gates.md": PageSetup(
        prepare=gate_runs, checks={"{": gate_json}, tools=("jq",),
        exit_codes={"rewardsmith gate new.jsonl --baseline old.jsonl --min-delta": 1,
                    "rewardsmith gate new.jsonl -b old.jsonl --max-regression": 1}),
    "docs/reports.md": PageSetup(files={"rollouts.jsonl": DEMO_ROLLOUTS}, prepare=scored_runs,
                                 rubric="v1.yaml"),
    "docs/server.md": PageSetup(
        files=DEMO_INPUTS, background=("REWARD_TOKEN=s3cret rewardsmith serve",),
        substitutions={"--host 0.0.0.0 --port 8000": "--host 127.0.0.1 --port {port}",
                       "127.0.0.1:8000": "127.0.0.1:{port}"},
        checks={'{"rubric": "gsm8k-demo"': server_reply}),
    "docs/testing-rewards.md": PageSetup(
        files={"my_rewards.py": "graded_rewards.py", "rubric.yaml": DEMO_RUBRIC,
               "ten.cases.jsonl": "ten.cases.jsonl", "tests/score.cases.jsonl": "score.cases.jsonl"},
        epilogues={"def test_my_reward": "test_my_reward()\n"}),
    "docs/slime.md": PageSetup(
        files={"rubric.yaml": DEMO_RUBRIC, "ten.cases.jsonl": "ten.cases.jsonl",
               "my_rewards.py": "graded_rewards.py", "rollouts.jsonl": DEMO_ROLLOUTS},
        substitutions={"/root/lab": "{workspace}"},
        prepare=lambda run: run.run("rewardsmith score rollouts.jsonl -r rubric.yaml "
                                    "-o scored.jsonl --no-store"),
        slow=True),  # check-env --ray starts a local Ray cluster
    "docs/tracking.md": PageSetup(files=DEMO_INPUTS, prepare=tracked_steps,
                                  prelude=TRACKED_NAMES, env=OFFLINE_WANDB),
    "docs/rescoring.md": PageSetup(files={"rollouts.jsonl": DEMO_ROLLOUTS}, prepare=two_rubrics),
    "docs/math.md": PageSetup(),
    "docs/instructions.md": PageSetup(checks={'{"instruction_id_list"': ifeval_answer}),
    "docs/judge.md": PageSetup(
        files={"rollouts.jsonl": DEMO_ROLLOUTS}, judge=True, prelude=JUDGE_NAMES,
        env={"OPENAI_API_KEY": "key-for-the-stand-in"}, prepare=judged_store,
        tools=("sqlite3",)),
    "docs/judges.md": PageSetup(judge=True, checks={"judge:": judge_limits}),
    "docs/code.md": PageSetup(
        prelude=CODE_NAMES, epilogues={"score_rollouts": CODE_SHOWN}, tools=("bwrap", "g++"),
        checks={first: dataset_row for first in (
            '{"public_test_cases"', '[{"input"', '{"verification_info"', '{"input_output"',
            '{"public_tests"', '{"entry_point"', '{"test_list"')}),
    "docs/files-and-runs.md": PageSetup(prepare=mixed_groups,
                                        checks={"warning: r.jsonl": mixed_group_warnings}),
    "docs/agents.md": PageSetup(judge=True, checks={"process:": agent_judge}),
    "docs/engine.md": PageSetup(files=DEMO_INPUTS, prelude=DEMO_NAMES),
    "docs/index.md": PageSetup(files={"rollouts.jsonl": DEMO_ROLLOUTS, "rubric.yaml": DEMO_RUBRIC}),
}


def setup_for(page: str) -> PageSetup:
    return PAGES.get(page, PageSetup())
