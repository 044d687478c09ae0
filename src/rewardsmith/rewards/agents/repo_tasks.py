"""The shipped repository tasks: tiny Python repositories with one injected bug each.

Each task holds its base repository (``{path: text}``), the gold patch and a few wrong patches
(unified diffs, as SWE-bench's ``patch`` and a policy's ``model_patch``), and the
``fail_to_pass`` / ``pass_to_pass`` test ids. Each wrong patch also records how many of each
list pass with it, measured with plain pytest when the set was made. The examples, the tests
and ``rewardsmith test repo_tests`` use them; ``write_repo`` puts one on disk.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = ["RepoTask", "WrongPatch", "diff_of", "shipped_tasks", "task_answer", "write_repo"]

_DATA_FILE = "agent_tasks.json"


@dataclass(frozen=True)
class WrongPatch:
    why: str
    patch: str
    fail_to_pass_passed: int
    pass_to_pass_passed: int


@dataclass(frozen=True)
class RepoTask:
    name: str
    description: str
    repo: dict[str, str]
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    gold_patch: str
    wrong_patches: tuple[WrongPatch, ...]

    @property
    def test_files(self) -> tuple[str, ...]:
        """The test files the ids name, in order."""
        seen: dict[str, None] = {}
        for test_id in (*self.fail_to_pass, *self.pass_to_pass):
            seen.setdefault(test_id.split("::", 1)[0], None)
        return tuple(seen)


def _task(raw: dict[str, Any]) -> RepoTask:
    return RepoTask(
        name=raw["name"], description=raw["description"], repo=dict(raw["repo"]),
        fail_to_pass=tuple(raw["fail_to_pass"]), pass_to_pass=tuple(raw["pass_to_pass"]),
        gold_patch=raw["gold_patch"],
        wrong_patches=tuple(WrongPatch(w["why"], w["patch"], w["fail_to_pass_passed"],
                                       w["pass_to_pass_passed"]) for w in raw["wrong_patches"]),
    )


@functools.lru_cache(maxsize=1)
def shipped_tasks() -> dict[str, RepoTask]:
    """The shipped tasks by name."""
    text = resources.files("rewardsmith").joinpath("data").joinpath(_DATA_FILE).read_text("utf-8")
    return {raw["name"]: _task(raw) for raw in json.loads(text)["tasks"]}


def write_repo(task: RepoTask, folder: str) -> str:
    """Write ``task``'s base repository into ``folder`` (made if missing); returns it."""
    for path, text in task.repo.items():
        target = os.path.join(folder, *path.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(text)
    return folder


def task_answer(task: RepoTask, repo: str | None = None) -> dict[str, Any]:
    """The ``answer`` of a ``repo_tests`` rollout for ``task``: the base repository as the
    folder ``repo`` when given, else as its ``{path: text}`` map."""
    return {"repo": repo if repo is not None else dict(task.repo),
            "fail_to_pass": list(task.fail_to_pass), "pass_to_pass": list(task.pass_to_pass)}


def diff_of(task: RepoTask, changes: dict[str, str | None]) -> str:
    """A ``git diff``-style patch of ``task``'s base repository with ``changes`` (path ->
    new text, None to delete the file)."""
    out: list[str] = []
    for path, after in changes.items():
        before = task.repo.get(path)
        if before == after:
            continue
        out.append(f"diff --git a/{path} b/{path}\n")
        if before is None or after is None:
            out.append(f"{'new' if before is None else 'deleted'} file mode 100644\n")
        out.extend(difflib.unified_diff(
            (before or "").splitlines(keepends=True), (after or "").splitlines(keepends=True),
            "/dev/null" if before is None else f"a/{path}",
            "/dev/null" if after is None else f"b/{path}"))
    return "".join(out)
