"""The public API holds still while the code behind it moves.

- ``rewardsmith.__all__`` is frozen here: a name added or removed is a decision, made by
  changing this list in the same commit.
- Every ``import`` the README, the docs and the examples show runs, with every name it imports.
- The module paths users were told to import, and every module's path before the layout moved
  into packages, still import (the old path is the new module itself).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import rewardsmith
from rewardsmith._lazy import MOVED

ROOT = Path(__file__).resolve().parent.parent.parent

PUBLIC_NAMES = [
    "AdvantageError", "AdvantageReport", "BudgetExhausted", "Component", "ComponentResult",
    "ConfigError", "DriftWatch", "Engine", "InputError", "Judge", "JudgeConfig", "JudgeError",
    "LoadError", "MathVerdict", "RewardValueError", "RewardsmithError", "Rollout", "Rubric",
    "RubricError", "RunSummary", "Score", "ScoreColumns", "ScoreJob", "Status", "StoreError",
    "__version__", "apply_advantages", "build_report", "check_advantages", "compute_advantages",
    "emulate_advantages", "gate", "group_reward", "load_reward", "math_equal",
    "math_equal_async", "quantize", "read_rollouts", "read_scores", "reads_files",
    "rollout_from_dict",
    "score_rollouts", "write_scores",
]

# Module paths the docs name for users to import from, as of the layout in packages.
DOCUMENTED_MODULES = [
    "rewardsmith.advantages", "rewardsmith.analysis", "rewardsmith.engine", "rewardsmith.files",
    "rewardsmith.integrations.flyte", "rewardsmith.integrations.miles",
    "rewardsmith.integrations.openrlhf", "rewardsmith.integrations.slime",
    "rewardsmith.integrations.trl", "rewardsmith.integrations.verl", "rewardsmith.jobs.rescore",
    "rewardsmith.judge", "rewardsmith.mathcheck", "rewardsmith.recording", "rewardsmith.report",
    "rewardsmith.rescore", "rewardsmith.rubric", "rewardsmith.server", "rewardsmith.store",
    "rewardsmith.testing", "rewardsmith.tracking", "rewardsmith.trajectory", "rewardsmith.types",
]


def test_the_public_names_are_the_frozen_list() -> None:
    assert sorted(rewardsmith.__all__) == sorted(PUBLIC_NAMES)
    for name in PUBLIC_NAMES:
        assert getattr(rewardsmith, name) is not None, name


def test_a_public_name_is_what_its_module_defines() -> None:
    """``rewardsmith.quantize`` is the function, not a module of that name (a module path that
    shares a public name would replace the name once imported)."""
    assert callable(rewardsmith.quantize)
    for name in PUBLIC_NAMES:
        assert not isinstance(getattr(rewardsmith, name), type(rewardsmith)), name


@pytest.mark.parametrize("module", DOCUMENTED_MODULES)
def test_documented_modules_import(module: str) -> None:
    importlib.import_module(module)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_module_imports_by_its_old_path_as_the_same_module(old: str) -> None:
    new = importlib.import_module(MOVED[old])
    assert importlib.import_module(old) is new
    parent, _, leaf = old.rpartition(".")
    assert getattr(importlib.import_module(parent), leaf) is new


def test_an_old_path_that_was_never_a_module_still_fails() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("rewardsmith.no_such_module")


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```(?:python|py)\n(.*?)```", text, re.S)


def _documented_imports() -> list[tuple[str, str, tuple[str, ...]]]:
    """(where, module, names) for each ``rewardsmith`` import in the docs and examples."""
    sources: list[tuple[str, str]] = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for block in _python_blocks(page.read_text(encoding="utf-8")):
            sources.append((str(page.relative_to(ROOT)), block))
    for example in sorted((ROOT / "examples").glob("*.py")):
        sources.append((str(example.relative_to(ROOT)), example.read_text(encoding="utf-8")))
    found = []
    for where, code in sources:
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue  # a fragment (a signature, an elided body): not an import users run
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module and \
                    node.module.split(".")[0] == "rewardsmith":
                found.append((where, node.module, tuple(a.name for a in node.names)))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "rewardsmith":
                        found.append((where, alias.name, ()))
    return found


DOCUMENTED_IMPORTS = _documented_imports()


def test_the_docs_show_imports() -> None:
    assert len(DOCUMENTED_IMPORTS) > 30  # the collector reads the pages it should


@pytest.mark.parametrize(("where", "module", "names"), DOCUMENTED_IMPORTS,
                         ids=[f"{w}:{m}" for w, m, _ in DOCUMENTED_IMPORTS])
def test_every_documented_import_runs(where: str, module: str, names: tuple[str, ...]) -> None:
    try:
        imported = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and not exc.name.startswith("rewardsmith"):
            pytest.skip(f"{where}: needs {exc.name}, an optional extra not installed here")
        raise
    for name in names:
        if not hasattr(imported, name):
            importlib.import_module(f"{module}.{name}")  # a submodule, imported by name
