"""``rewardsmith judge-eval`` against the local server, and the agreement statistics."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardsmith.judge.agreement import (
    agreement,
    cohen_kappa,
    pair_order_agreement,
    spearman,
)
from support.openai_server import OpenAIServer, default_grade

MODEL = "judge-2024-01-01"
TEMPLATE = "Q: {prompt}\nA: {completion}"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(models=[MODEL]) as running:
        yield running


def test_kappa_spearman_and_confusion_on_known_values() -> None:
    assert cohen_kappa([[20, 5], [10, 15]]) == pytest.approx(0.4)
    assert cohen_kappa([[5, 0], [0, 0]]) is None
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # mean ranks for ties: [1, 2.5, 2.5, 4] against [1, 3, 2, 4], rho = 4.5 / sqrt(4.5 * 5)
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(0.9 ** 0.5)
    assert spearman([1, 1], [1, 2]) is None
    found = agreement([0.9, 0.2, 0.7, 0.4], [1.0, 0.0, 0.0, 0.0])
    assert found.labels == [0.0, 1.0] and found.confusion == [[2, 1], [0, 1]]
    assert found.accuracy == 0.75
    likert = agreement([1.2, 2.6, 4.9], [1.0, 3.0, 5.0])
    assert likert.labels == [1.0, 3.0, 5.0] and likert.accuracy == 1.0
    assert pair_order_agreement([[(0.9, 1.0), (0.1, 0.0), (0.5, 0.0)]]) == 1.0
    assert pair_order_agreement([[(0.5, 1.0), (0.5, 0.0)]]) == 0.5
    assert pair_order_agreement([[(0.5, 1.0)]]) is None


def write_rubric(path: Path, server: OpenAIServer, store: Path, **extra: Any) -> Path:
    judge = {"base_url": server.base_url, "model": MODEL, "store": str(store),
             "template": TEMPLATE, "criteria": {"helpful": "Does it help?"}, **extra}
    path.write_text(json.dumps({"name": "evaluated", "components": {"quality": {"judge": judge}}}))
    return path


def write_cases(path: Path, humans: list[Any], group_size: int = 4) -> list[str]:
    shown = []
    with path.open("w") as handle:
        for i, human in enumerate(humans):
            prompt, completion = f"What is {i}?", f"It is {i}."
            shown.append(TEMPLATE.format(prompt=prompt, completion=completion))
            handle.write(json.dumps({"id": f"c{i}", "group": f"g{i // group_size}",
                                     "prompt": prompt, "completion": completion,
                                     "human": human}) + "\n")
    return shown


def judge_eval(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rewardsmith", "judge-eval", *args],
                          capture_output=True, text=True, timeout=120)


def test_agreement_with_labels_that_match_the_judge(server: OpenAIServer,
                                                     tmp_path: Path) -> None:
    texts = [TEMPLATE.format(prompt=f"What is {i}?", completion=f"It is {i}.") for i in range(8)]
    humans = [default_grade("helpful", t) for t in texts]
    humans[0] = 1.0 if humans[0] < 0.5 else 0.0  # one case the people see otherwise
    write_cases(tmp_path / "cases.jsonl", humans)
    rubric = write_rubric(tmp_path / "r.yaml", server, tmp_path / "j.db")
    done = judge_eval(str(tmp_path / "cases.jsonl"), "--rubric", str(rubric), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    found = report["criteria"]["helpful"]
    assert found["cases"] == 8 and found["accuracy"] == pytest.approx(7 / 8)
    assert sum(map(sum, found["confusion"])) == 8
    assert found["position_bias_rate"] is None and found["self_consistency"] is None
    assert report["cost"]["judge:quality"]["calls"] == 8 and server.billed == 8

    # Rerun: replayed, free; --refresh asks again.
    done = judge_eval(str(tmp_path / "cases.jsonl"), "--rubric", str(rubric), "--json")
    assert json.loads(done.stdout)["cost"]["judge:quality"]["calls"] == 0
    done = judge_eval(str(tmp_path / "cases.jsonl"), "--rubric", str(rubric), "--json",
                      "--refresh")
    assert json.loads(done.stdout)["cost"]["judge:quality"]["calls"] == 8
    assert server.billed == 16

    table = judge_eval(str(tmp_path / "cases.jsonl"), "--rubric", str(rubric))
    assert table.returncode == 0 and "confusion matrix" in table.stdout


def test_position_bias_and_self_consistency(tmp_path: Path) -> None:
    with OpenAIServer(models=[MODEL], bias_first=True) as server:
        write_cases(tmp_path / "cases.jsonl", [1, 0, 0, 1])
        rubric = write_rubric(tmp_path / "r.yaml", server, tmp_path / "j.db", mode="pairwise",
                              samples=2, temperature=0.5)
        done = judge_eval(str(tmp_path / "cases.jsonl"), "--rubric", str(rubric), "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)["criteria"]["helpful"]
    assert found["position_bias_rate"] == 1.0
    assert found["self_consistency"] == {"mean_spread": 0.0, "all_samples_agree": 1.0}
    assert found["pair_order_agreement"] == 0.5  # every pair a draw
    assert server.billed == 24  # 6 pairs x 2 orders x 2 samples


def test_a_case_without_a_label_is_an_error_naming_its_line(server: OpenAIServer,
                                                            tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "a", "completion": "x", "human": 1}) + "\n"
                     + json.dumps({"id": "b", "completion": "y"}) + "\n")
    rubric = write_rubric(tmp_path / "r.yaml", server, tmp_path / "j.db")
    done = judge_eval(str(cases), "--rubric", str(rubric))
    assert done.returncode == 2 and "cases.jsonl:2" in done.stderr and "human" in done.stderr
    cases.write_text(json.dumps({"id": "a", "completion": "x", "human": "good"}) + "\n")
    done = judge_eval(str(cases), "--rubric", str(rubric))
    assert done.returncode == 2 and "finite number" in done.stderr


def test_a_rubric_without_judges_is_refused(tmp_path: Path) -> None:
    write_cases(tmp_path / "cases.jsonl", [1])
    rubric = tmp_path / "r.yaml"
    rubric.write_text("components:\n  correct: {reward: choice}\n")
    done = judge_eval(str(tmp_path / "cases.jsonl"), "--rubric", str(rubric))
    assert done.returncode == 2 and "no judge" in done.stderr


def test_the_report_module_is_still_importable_by_its_old_name() -> None:
    from rewardsmith.judge.evaluation import eval_report  # the name before the rename

    import rewardsmith.judge.label_report as report

    assert eval_report is report.eval_report
