"""A stored result is reused only while all the code that made it is unchanged.

Before: a component's identity hashed only the module defining the reward, so an edit to a
helper it imports (``rewards/mathanswer/equivalence.py`` for ``math``, ``helpers.py`` beside a
user's reward) left stored results in use: every fix to a verifier was undone by the store.
Each test edits a helper between a score and a rescore and checks that only the component that
runs it is computed again, and that ``rescore --dry-run`` / ``runs --rubric`` say why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import rewardsmith
from rewardsmith import Rubric
from rewardsmith.rubric.code_identity import changed_code, code_identity
from rewardsmith.rubric.loading import load_reward

CLI = [sys.executable, "-m", "rewardsmith"]

LINES = [
    {"id": "a", "group": "g1", "prompt": "2+2?", "completion": "It is 4. #### 4", "answer": "4"},
    {"id": "b", "group": "g1", "prompt": "2+2?", "completion": "It is 5. #### 5", "answer": "4"},
    {"id": "c", "group": "g2", "prompt": "1/2?", "completion": "\\boxed{0.5}", "answer": "1/2"},
    {"id": "d", "group": "g2", "prompt": "1/2?", "completion": "\\boxed{2}", "answer": "1/2"},
]


def cli(*args: str | Path, cwd: Path, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def write_rollouts(folder: Path) -> Path:
    path = folder / "r.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in LINES), encoding="utf-8")
    return path


def plan_of(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    document = json.loads(done.stdout)
    return {row["name"]: row for row in document["plan"]["components"]}


# ------------------------------------------------------------------ a user's reward


USER_REWARD = """
import helpers

def exact(completion, answer):
    return 1.0 if helpers.final(completion) == answer else 0.0

def length(completion):
    return min(len(completion), 20) / 20
"""
HELPERS = """
import deeper

def final(text):
    return deeper.last_word(text)
"""
DEEPER = """
def last_word(text):
    return text.split()[-1] if text.split() else ""
"""


def user_project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    (tmp_path / "rew.py").write_text(USER_REWARD, encoding="utf-8")
    (tmp_path / "helpers.py").write_text(HELPERS, encoding="utf-8")
    (tmp_path / "deeper.py").write_text(DEEPER, encoding="utf-8")
    (tmp_path / "rubric.yaml").write_text(
        "components:\n"
        "  exact: {reward: rew.py:exact}\n"
        "  length: {reward: rew.py:length, weight: 0.1}\n"
        "  gsm: {reward: gsm8k, weight: 0.5}\n"
        "  fmt: {reward: marker, params: {marker: '####'}, weight: 0.2}\n", encoding="utf-8")
    write_rollouts(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return tmp_path / "rubric.yaml", env


def test_a_user_helper_edited_between_score_and_rescore_is_recomputed(tmp_path: Path) -> None:
    rubric, env = user_project(tmp_path)
    cli("score", "r.jsonl", "-r", rubric, "-o", "v1.jsonl", "--store", "s.db", "-q",
        cwd=tmp_path, env=env)
    unchanged = cli("rescore", "-s", "s.db", "-r", rubric, "--dry-run", "--json",
                    cwd=tmp_path, env=env)
    assert {n: r["compute"] for n, r in plan_of(unchanged).items()} == \
        {"exact": 0, "length": 0, "gsm": 0, "fmt": 0}

    # A module two imports away from the reward (rew.py -> helpers.py -> deeper.py).
    (tmp_path / "deeper.py").write_text(DEEPER.replace("[-1]", "[-1].strip('.')"),
                                        encoding="utf-8")
    plan = plan_of(cli("rescore", "-s", "s.db", "-r", rubric, "--dry-run", "--json",
                       cwd=tmp_path, env=env))
    # Both components live in rew.py and so both import deeper.py: both are computed again;
    # the built-in is not.
    assert {n: r["compute"] for n, r in plan.items()} == {"exact": 4, "length": 4, "gsm": 0, "fmt": 0}
    assert plan["exact"]["reason"] == "code changed: deeper.py"
    assert plan["gsm"]["reason"] == "all results stored"

    done = cli("rescore", "-s", "s.db", "-r", rubric, "-o", "v2.jsonl", "--json",
               cwd=tmp_path, env=env)
    assert json.loads(done.stdout)["reward_calls"] == 8  # two components, four rollouts
    scored = {s["id"]: s for s in map(json.loads, (tmp_path / "v2.jsonl").read_text()
                                      .splitlines())}
    assert scored["a"]["components"]["exact"] == 1.0  # the fixed helper: "4" from "4"
    # And once more, nothing has changed since the rescore: everything is reused.
    again = plan_of(cli("rescore", "-s", "s.db", "-r", rubric, "--dry-run", "--json",
                        cwd=tmp_path, env=env))
    assert all(row["compute"] == 0 for row in again.values())


def test_runs_with_a_rubric_says_what_changed(tmp_path: Path) -> None:
    rubric, env = user_project(tmp_path)
    cli("score", "r.jsonl", "-r", rubric, "-o", "v1.jsonl", "--store", "s.db", "-q",
        cwd=tmp_path, env=env)
    (tmp_path / "helpers.py").write_text(HELPERS + "\n# a comment changes the file\n",
                                         encoding="utf-8")
    rubric.write_text(rubric.read_text().replace("marker: '####'", "marker: 'ANSWER:'"))
    document = json.loads(cli("runs", "-s", "s.db", "-r", rubric, "--json",
                              cwd=tmp_path, env=env).stdout)
    reasons = {row["name"]: row["reason"] for row in document["reuse"]["components"]}
    assert reasons == {"exact": "code changed: helpers.py", "length": "code changed: helpers.py",
                       "gsm": "all results stored", "fmt": "params changed: marker"}
    table = cli("runs", "-s", "s.db", "-r", rubric, cwd=tmp_path,
                env={**env, "COLUMNS": "200"}).stdout
    assert "code changed: helpers.py" in table and "params changed: marker" in table


def test_version_key_forces_a_new_identity_and_says_so(tmp_path: Path) -> None:
    rubric, env = user_project(tmp_path)
    cli("score", "r.jsonl", "-r", rubric, "-o", "v1.jsonl", "--store", "s.db", "-q",
        cwd=tmp_path, env=env)
    rubric.write_text(rubric.read_text().replace("exact: {reward: rew.py:exact}",
                                                 "exact: {reward: rew.py:exact, version: 2}"))
    plan = plan_of(cli("rescore", "-s", "s.db", "-r", rubric, "--dry-run", "--json",
                       cwd=tmp_path, env=env))
    assert {n: r["compute"] for n, r in plan.items()} == {"exact": 4, "length": 0, "gsm": 0, "fmt": 0}
    assert plan["exact"]["reason"] == "version changed: None -> '2'"


def test_version_is_part_of_identity_only_when_set() -> None:
    plain = Rubric.from_dict({"components": {"c": {"reward": "gsm8k"}}})
    same = Rubric.from_dict({"components": {"c": {"reward": "gsm8k", "weight": 3}}})
    versioned = Rubric.from_dict({"components": {"c": {"reward": "gsm8k", "version": "fix-1"}}})
    other = Rubric.from_dict({"components": {"c": {"reward": "gsm8k", "version": "fix-2"}}})
    identities = [r.components[0].identity() for r in (plain, same, versioned, other)]
    assert identities[0] == identities[1]
    assert len(set(identities[1:])) == 3


# ------------------------------------------------------------------ a built-in


def copy_of_the_package(tmp_path: Path) -> Path:
    """rewardsmith copied to a folder of its own: the test edits the copy, never the repo."""
    root = tmp_path / "install"
    shutil.copytree(Path(rewardsmith.__file__).parent, root / "rewardsmith",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_an_edited_builtin_helper_recomputes_only_that_builtin(tmp_path: Path) -> None:
    install = copy_of_the_package(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(install)}
    work = tmp_path / "work"
    work.mkdir()
    write_rollouts(work)
    rubric = work / "rubric.yaml"
    rubric.write_text("components:\n  gsm: {reward: gsm8k}\n  math: {reward: math}\n"
                      "  fmt: {reward: marker, params: {marker: '####'}, weight: 0.2}\n",
                      encoding="utf-8")
    where = cli("list", "--json", cwd=work, env=env)  # the copy is the one imported
    assert where.returncode == 0
    probe = subprocess.run([sys.executable, "-c", "import rewardsmith; print(rewardsmith.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip().startswith(str(install))
    cli("score", "r.jsonl", "-r", rubric, "-o", "v1.jsonl", "--store", "s.db", "-q",
        cwd=work, env=env)

    # An edit to a module of math's home package that math.py does not define itself.
    equivalence = install / "rewardsmith" / "rewards" / "mathanswer" / "equivalence.py"
    equivalence.write_text(equivalence.read_text() + "\n# reviewed\n", encoding="utf-8")
    plan = plan_of(cli("rescore", "-s", "s.db", "-r", rubric, "--dry-run", "--json",
                       cwd=work, env=env))
    assert {n: r["compute"] for n, r in plan.items()} == {"gsm": 0, "math": 4, "fmt": 0}
    assert plan["math"]["reason"] == \
        "code changed: rewardsmith/rewards/mathanswer/equivalence.py"
    done = cli("rescore", "-s", "s.db", "-r", rubric, "-o", "v2.jsonl", "--json",
               cwd=work, env=env)
    assert json.loads(done.stdout)["reward_calls"] == 4

    # gsm8k's number extraction lives in rewards/extract.py, outside its module.
    extract = install / "rewardsmith" / "rewards" / "extract.py"
    extract.write_text(extract.read_text() + "\n# reviewed\n", encoding="utf-8")
    plan = plan_of(cli("rescore", "-s", "s.db", "-r", rubric, "--dry-run", "--json",
                       cwd=work, env=env))
    assert plan["gsm"]["compute"] == 4
    assert plan["gsm"]["reason"] == "code changed: rewardsmith/rewards/extract.py"


def test_a_copied_install_has_the_same_identities(tmp_path: Path) -> None:
    """Names in the fingerprint are paths inside the package: the same code elsewhere on disk
    is the same code, so its stored results stay in use."""
    install = copy_of_the_package(tmp_path)
    code = ("import json; from rewardsmith.rubric.loading import load_reward; "
            "from rewardsmith.rubric.code_identity import code_identity; "
            "print(json.dumps({n: code_identity(load_reward(n).func).digest "
            "for n in ('gsm8k', 'math', 'code', 'ifeval', 'boxed_number')}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(install)})
    assert done.returncode == 0, done.stderr
    here = {n: code_identity(load_reward(n).func).digest
            for n in ("gsm8k", "math", "code", "ifeval", "boxed_number")}
    assert json.loads(done.stdout) == here


# ------------------------------------------------------------------ what is covered


def test_builtins_cover_their_home_sandbox_and_packages() -> None:
    math_code = code_identity(load_reward("math").func)
    assert "rewardsmith/rewards/mathanswer/equivalence.py" in math_code.files
    assert "rewardsmith/rewards/mathanswer/symbolic.py" in math_code.files  # imported lazily
    assert set(math_code.packages) >= {"mpmath", "sympy"}
    code = code_identity(load_reward("code").func)
    assert {"rewardsmith/sandbox/_harness.py", "rewardsmith/sandbox/_harness_python.py",
            "rewardsmith/sandbox/bubblewrap.py"} <= set(code.files)
    ifeval = code_identity(load_reward("ifeval").func)
    assert ifeval.packages["langdetect"].startswith("langdetect==")
    gsm8k = code_identity(load_reward("gsm8k").func)
    assert "rewardsmith/rewards/extract.py" in gsm8k.files
    assert not any("sandbox" in name or "mathanswer" in name for name in gsm8k.files)
    assert code_identity(load_reward("math").func).digest != \
        code_identity(load_reward("boxed_math").func).digest


def test_user_code_is_followed_stdlib_skipped_installed_packages_versioned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "util.py").write_text("from . import inner\n", encoding="utf-8")
    (package / "inner.py").write_text("VALUE = 1\n", encoding="utf-8")
    (package / "typing_only.py").write_text("X = 1\n", encoding="utf-8")
    reward = tmp_path / "judged.py"
    reward.write_text(
        "from __future__ import annotations\nimport json, os.path\nfrom typing import "
        "TYPE_CHECKING\nimport yaml\nfrom mypkg.util import inner\n"
        "if TYPE_CHECKING:\n    from mypkg import typing_only\n\n"
        "def score(completion):\n    import mypkg.lazy_helper  # noqa\n"
        "    return float(inner.VALUE)\n", encoding="utf-8")
    (package / "lazy_helper.py").write_text("Y = 2\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = code_identity(load_reward(f"{reward}:score").func)
    assert set(first.files) == {"judged.py", "mypkg/__init__.py", "mypkg/util.py",
                                "mypkg/inner.py", "mypkg/lazy_helper.py"}
    assert first.packages["yaml"].lower().startswith("pyyaml==")
    assert not any(name in first.packages for name in ("json", "os", "typing"))

    (package / "typing_only.py").write_text("X = 2\n", encoding="utf-8")  # never runs
    assert code_identity(load_reward(f"{reward}:score").func).digest == first.digest
    (package / "lazy_helper.py").write_text("Y = 30\n", encoding="utf-8")
    edited = code_identity(load_reward(f"{reward}:score").func)
    assert edited.digest != first.digest
    assert changed_code(first.record(), edited.record()) == ["mypkg/lazy_helper.py"]


def test_changed_code_names_added_removed_and_upgraded() -> None:
    before = {"a.py": "1", "b.py": "2", "numpy==": "numpy==1.0"}
    now = {"a.py": "1", "c.py": "3", "numpy==": "numpy==2.0"}
    assert changed_code(before, now) == ["- b.py", "+ c.py", "numpy numpy==1.0 -> numpy==2.0"]


class _Grader:
    """An evaluator as the engine sees one (a judge criterion, say)."""

    def identity(self) -> str:
        return "grader-v1"

    async def evaluate(self, rollouts: Any) -> list[Any]:
        return []


def test_an_evaluators_identity_is_what_it_was_unless_a_version_is_given() -> None:
    """Judge verdicts are paid for: their stored identity must not move when nothing changed
    (it is made as before this fingerprint existed), only when ``version`` is given."""
    from rewardsmith import Component
    from rewardsmith.types import content_hash

    plain = Rubric([Component("grade", evaluator=_Grader())]).components[0]
    assert plain.identity() == content_hash("evaluator", "grader-v1", length=24)
    versioned = Rubric([Component("grade", evaluator=_Grader(), version="2")]).components[0]
    assert versioned.identity() != plain.identity()
    assert plain.code() is None


def test_reasons_for_old_runs_new_components_and_missing_results() -> None:
    from rewardsmith.jobs.recording import component_records
    from rewardsmith.rubric.reuse_reasons import reuse_reason

    rubric = Rubric.from_dict({"components": {"fmt": {"reward": "marker",
                                                       "params": {"marker": "####"}}}})
    (component,) = rubric.components
    (record,) = component_records(rubric)
    assert reuse_reason(component, [record], compute=0, run_id="r1") == "all results stored"
    assert reuse_reason(component, [record], compute=3, run_id="r1") == \
        "unchanged; 3 results missing (they failed or were not stored)"
    assert reuse_reason(component, [], compute=3, run_id="r1") == "new component (not in run r1)"
    renamed = {**record, "name": "format"}
    assert "has it as 'format'" in reuse_reason(component, [renamed], compute=3, run_id="r1")
    # A run recorded before code files were kept: its identity cannot be vouched for.
    old = {k: v for k, v in record.items() if k not in ("code", "params", "timeout")}
    old["identity"] = "from-an-older-formula"
    assert reuse_reason(component, [old], compute=3, run_id="r1").startswith(
        "code not recorded by that run")
    slower = {**record, "identity": "x", "timeout": 99.0}
    assert reuse_reason(component, [slower], compute=3, run_id="r1") == \
        f"timeout changed: 99.0 -> {component.timeout!r}"
