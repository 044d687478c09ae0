"""What the documentation pages use without showing it (inputs made by code) and the checks
of the output they show; tests/docs_fixtures/pages.py says which page gets which."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import yaml

from .checks import check_elided_text, check_shown_lines_printed
from .markdown import Block
from .runner import ROOT, PageRun, PageSetup, load_rubric, substitute

RUBRIC_ID = re.compile(r"\(id [0-9a-f]{12}\)")


def bundled_demo_rubric(block: Block, run: PageRun) -> None:
    """The page shows the bundled rubric: the same keys and values, and it loads."""
    bundled = ROOT / "src/rewardsmith/data/demo_rubric.yaml"
    assert yaml.safe_load(block.text) == yaml.safe_load(bundled.read_text()), (
        f"{block.where}: the rubric shown is not src/rewardsmith/data/demo_rubric.yaml")
    shown = run.workspace / "_shown_demo_rubric.yaml"
    shown.write_text(block.text, encoding="utf-8")
    load_rubric(shown, block, run)
    run.rubric, run.rubric_text = shown, block.text


def demo_prints(block: Block, run: PageRun) -> None:
    printed = run.run("rewardsmith demo").stdout
    check_shown_lines_printed(block.text, printed, block.where, volatile=(RUBRIC_ID,))


def missing_module_message(block: Block, run: PageRun) -> None:
    """The message for a rubric naming a module that is not on the path."""
    (run.workspace / "elsewhere").mkdir(exist_ok=True)
    (run.workspace / "elsewhere/rubric.yaml").write_text(
        "components:\n  mine: {reward: my_rewards.custom_rm}\n", encoding="utf-8")
    done = run.run("cd elsewhere && rewardsmith score ../rollouts.jsonl --rubric rubric.yaml",
                   expect=2)
    check_elided_text(block.text, done.stderr, block.where)

def _write_jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _judged_rubric(run: PageRun, name: str = "rubric.yaml") -> None:
    """A verifier `correct` and a judge with criteria `helpful` and `tidy`, on the stand-in."""
    assert run.judge_url is not None
    judge = {"base_url": run.judge_url, "model": "judge-2024-01-01",
             "template": "Question: {prompt}\nAnswer: {completion}",
             "criteria": {"helpful": "Does the answer help the user?",
                          "tidy": "Is it concise?"}}
    rubric = {"name": "judged", "components": {
        "correct": {"reward": "gsm8k", "weight": 1.0},
        "quality": {"judge": judge, "weights": {"helpful": 0.5, "tidy": 0.25}}}}
    (run.workspace / name).write_text(yaml.safe_dump(rubric, sort_keys=False), encoding="utf-8")


def drift_steps(run: PageRun) -> None:
    """Three training steps of 4 groups x 4 (the third with every group flat), the same steps
    as one file whose lines carry `step`, each step's rollouts, and a judged rubric."""
    every: list[dict[str, object]] = []
    for step in (1, 2, 3):
        scored, rollouts = [], []
        for g in range(4):
            for k in range(4):
                correct = 1.0 if step == 3 else float((g + k) % 2)
                helpful = 0.5 if step == 3 else round(0.25 * k, 2)
                rid = f"p{g}-s{k}"
                scored.append({"id": rid, "group": f"p{g}", "reward": correct + 0.5 * helpful,
                               "status": "ok",
                               "components": {"correct": correct, "helpful": helpful},
                               "errors": {}})
                rollouts.append({"id": rid, "group": f"p{g}", "prompt": "2 + 2?",
                                 "completion": "It is 4. " * (step * 3 + k)})
        _write_jsonl(run.workspace / f"step{step}.jsonl", scored)
        _write_jsonl(run.workspace / f"r{step}.jsonl", rollouts)
        every += [{**line, "step": step} for line in scored]
    _write_jsonl(run.workspace / "run.jsonl", every)
    _judged_rubric(run)


def flyte_inputs(run: PageRun) -> None:
    """Two rubric versions, and a run of the first kept in run.db for `rescore`."""
    demo = (ROOT / "src/rewardsmith/data/demo_rubric.yaml").read_text(encoding="utf-8")
    (run.workspace / "rubric-v1.yaml").write_text(demo, encoding="utf-8")
    (run.workspace / "rubric-v2.yaml").write_text(
        demo.replace("weight: 0.25", "weight: 0.5"), encoding="utf-8")
    run.run("rewardsmith score rollouts.jsonl -r rubric-v1.yaml -o v1.jsonl --store run.db")


def trajectory_template(block: Block, run: PageRun) -> None:
    """The page's trajectory rewards and this judge template score a tool-using rollout."""
    assert run.judge_url is not None
    template = yaml.safe_load(block.text)["template"]
    rubric = {"components": {
        "tidy": {"reward": "agent_rewards.py:tidy"},
        "efficient": {"reward": "agent_rewards.py:efficient"},
        "quality": {"judge": {"base_url": run.judge_url, "model": "judge-2024-01-01",
                              "template": template,
                              "criteria": {"helpful": "Does it help?"}}}}}
    (run.workspace / "agent.yaml").write_text(yaml.safe_dump(rubric), encoding="utf-8")
    run.run("rewardsmith score trajectory.jsonl -r agent.yaml -o agent.jsonl")
    lines = [json.loads(line) for line in (run.workspace / "agent.jsonl").read_text().splitlines()]
    by_id = {line["id"]: line["components"] for line in lines}
    assert by_id["t0"]["tidy"] == 1.0 and by_id["t0"]["efficient"] == 0.5, by_id
    assert by_id["t1"]["tidy"] == 0.0 and by_id["t1"]["efficient"] == 1.0, by_id
    assert by_id["t0"]["helpful"] is not None, by_id


def flyte_example_prints(block: Block, run: PageRun) -> None:
    printed = run.run(f"python {ROOT / 'examples/flyte_reward.py'}").stdout
    task_hash = re.compile(r"(?<=rewardsmith-flyte-guide-v1-)[0-9a-f]{8}")
    check_shown_lines_printed(block.text, printed, block.where, volatile=(task_hash,))


def gate_runs(run: PageRun) -> None:
    """The two runs the JSON example describes: 12 prompts x 4 rollouts; the new run is 0.1
    more correct and half as well formatted, so its reward (correct + 0.2 format) is equal."""
    old, new = [], []
    for index in range(48):
        correct = 0.4 if index < 26 else 0.5
        for rows, c, f in ((old, correct, 1.0), (new, correct + 0.1, 0.5)):
            rows.append({"id": f"g{index // 4}-s{index % 4}", "group": f"g{index // 4}",
                         "reward": c + 0.2 * f, "status": "ok",
                         "components": {"correct": c, "format": f}, "errors": {}})
    _write_jsonl(run.workspace / "old.jsonl", old)
    _write_jsonl(run.workspace / "new.jsonl", new)


def _same_document(shown: object, printed: object, where: str, path: str = "") -> None:
    """The printed JSON has what the page shows: the same keys, equal values (numbers to 9
    places, text up to the `...` where the page cuts it)."""
    if isinstance(shown, dict):
        assert isinstance(printed, dict) and set(shown) == set(printed), (
            f"{where}: {path or 'the document'} shows keys {sorted(shown)}, "
            f"printed {sorted(printed) if isinstance(printed, dict) else printed!r}")
        for key in shown:
            _same_document(shown[key], printed[key], where, f"{path}.{key}")
    elif isinstance(shown, list):
        assert isinstance(printed, list) and len(shown) == len(printed), (
            f"{where}: {path} shows {len(shown)} items, printed {printed!r}")
        for index, (a, b) in enumerate(zip(shown, printed)):
            _same_document(a, b, where, f"{path}[{index}]")
    elif isinstance(shown, str) and "..." in shown:
        assert isinstance(printed, str), f"{where}: {path}: {printed!r}"
        check_elided_text(shown, printed, f"{where} {path}")
    elif isinstance(shown, float) or isinstance(printed, float):
        places = len(repr(shown).partition(".")[2])  # as many places as the page shows
        assert isinstance(printed, (int, float)) and round(printed, places) == shown, (
            f"{where}: {path} shows {shown!r}, printed {printed!r}")
    else:
        assert shown == printed, f"{where}: {path} shows {shown!r}, printed {printed!r}"


def gate_json(block: Block, run: PageRun) -> None:
    printed = run.run("rewardsmith gate new.jsonl -b old.jsonl --max-regression format=0.1 "
                      "--json", expect=1).stdout
    _same_document(json.loads(block.text), json.loads(printed), block.where)


def scored_runs(run: PageRun) -> None:
    """The demo scored into a store with timing (scored.jsonl), and as two rubric versions
    (v1.jsonl, also baseline.jsonl; v2.jsonl with a heavier format weight)."""
    demo = (ROOT / "src/rewardsmith/data/demo_rubric.yaml").read_text(encoding="utf-8")
    (run.workspace / "v1.yaml").write_text(demo, encoding="utf-8")
    (run.workspace / "v2.yaml").write_text(demo.replace("weight: 0.25", "weight: 0.5"),
                                           encoding="utf-8")
    run.run("rewardsmith score rollouts.jsonl -r v1.yaml -o scored.jsonl --timing "
            "--store rewardsmith.db && cp scored.jsonl v1.jsonl && cp v1.jsonl baseline.jsonl "
            "&& rewardsmith score rollouts.jsonl -r v2.yaml -o v2.jsonl --no-store")


def server_reply(block: Block, run: PageRun) -> None:
    _same_document(json.loads(block.text), json.loads(run.last_output("curl").stdout),
                   block.where)
    unauthorized = run.run(f"curl -s -o /dev/null -w '%{{http_code}}' "
                           f"http://127.0.0.1:{run.port}/score -d '{{}}'").stdout
    assert unauthorized == "401", f"{block.where}: without the token: {unauthorized}"


def tracked_steps(run: PageRun) -> None:
    """The demo scored, then cut into three steps: step0-2.jsonl and scored/0-2.jsonl."""
    run.run("rewardsmith score rollouts.jsonl -r rubric.yaml -o all.jsonl --no-store")
    lines = (run.workspace / "all.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (run.workspace / "scored").mkdir()
    for step in range(3):
        part = "".join(lines[step * 24:(step + 1) * 24])
        (run.workspace / f"step{step}.jsonl").write_text(part, encoding="utf-8")
        (run.workspace / f"scored/{step}.jsonl").write_text(part, encoding="utf-8")


def two_rubrics(run: PageRun) -> None:
    """v1.yaml, the demo's rubric, and v2.yaml, the same with a heavier format weight."""
    demo = (ROOT / "src/rewardsmith/data/demo_rubric.yaml").read_text(encoding="utf-8")
    (run.workspace / "v1.yaml").write_text(demo, encoding="utf-8")
    (run.workspace / "v2.yaml").write_text(demo.replace("weight: 0.25", "weight: 0.5"),
                                           encoding="utf-8")


def ifeval_answer(block: Block, run: PageRun) -> None:
    """The constraints shown are an answer `ifeval` reads: a completion meeting them scores 1,
    one breaking the comma rule less."""
    answer = json.dumps(json.loads(block.text))
    for completion, expected in (("The river ran on and the river ran dry.", "1.0"),
                                 ("The river, the river.", "0.5")):
        done = run.run(f"rewardsmith score --completion {shlex.quote(completion)} "
                       f"--answer {shlex.quote(answer)} --reward ifeval")
        line = json.loads(done.stdout.strip().splitlines()[-1])
        assert line["status"] == "ok" and str(line["reward"]) == expected, (
            f"{block.where}: {completion!r} scored {line}")


def judged_store(run: PageRun) -> None:
    """A run judged on the stand-in with its store in rewardsmith.db (judge_ tables)."""
    _judged_rubric(run, "judged.yaml")
    run.run("rewardsmith score rollouts.jsonl -r judged.yaml -o judged.jsonl "
            "--store rewardsmith.db")


def dataset_row(block: Block, run: PageRun) -> None:
    """A dataset row the page shows reads as tests (a value the page cuts with `...` is left
    out)."""
    def whole(value: object) -> object:
        if isinstance(value, dict):
            return {k: whole(v) for k, v in value.items()
                    if not (isinstance(v, str) and v.endswith("..."))}
        return [whole(v) for v in value] if isinstance(value, list) else value

    row = json.dumps(whole(json.loads(block.text)))
    done = run.run(f"python -c {shlex.quote(_READ_TESTS)} {shlex.quote(row)}", expect=None)
    assert done.returncode == 0 and int(done.stdout) > 0, (
        f"{block.where}: the row does not read as tests:\n{done.stdout}{done.stderr}")


_READ_TESTS = (
    "import json, sys\n"
    "from rewardsmith.rewards.code.testspec import parse_tests\n"
    "print(len(parse_tests(json.loads(sys.argv[1]), 'python')))\n")


def judge_limits(block: Block, run: PageRun) -> None:
    """The judge keys shown, in a component with a template and criteria, load."""
    judge = yaml.safe_load(substitute(block.text, run, PageSetup()))["judge"]
    judge.update(template="Question: {prompt}\nAnswer: {completion}",
                 criteria={"helpful": "Does the answer help the user?"})
    path = run.workspace / "_limits.yaml"
    path.write_text(yaml.safe_dump({"components": {"quality": {"judge": judge}}}),
                    encoding="utf-8")
    load_rubric(path, block, run)


def mixed_groups(run: PageRun) -> None:
    """r.jsonl: lines 3 and 5 without a group, line 1's group a number and line 2's text."""
    rows: list[dict[str, object]] = [
        {"id": "a", "group": 1}, {"id": "b", "group": "1"}, {"id": "c"}, {"id": "d", "group": "x"},
        {"id": "e"}]
    for row in rows:
        row.update(prompt=f"What is 2 + {row['id']}?", completion="#### 4", answer="4")
    _write_jsonl(run.workspace / "r.jsonl", rows)


def mixed_group_warnings(block: Block, run: PageRun) -> None:
    printed = run.run("rewardsmith score r.jsonl --reward gsm8k -o r.scored.jsonl --no-store")
    # The CLI names the file by its absolute path; the page, by the name it was given.
    check_shown_lines_printed(block.text, printed.stderr.replace(f"{run.workspace}/", ""),
                              block.where)


def agent_judge(block: Block, run: PageRun) -> None:
    """The judge component shown, added to the page's agent rubric, loads."""
    rubric = yaml.safe_load((run.workspace / "agent_rubric.yaml").read_text(encoding="utf-8"))
    rubric["components"].update(yaml.safe_load(substitute(block.text, run, PageSetup())))
    path = run.workspace / "_agent_judged.yaml"
    path.write_text(yaml.safe_dump(rubric), encoding="utf-8")
    load_rubric(path, block, run)
