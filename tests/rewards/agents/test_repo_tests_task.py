"""What repo_tests reads and restores, without running anything: the task's fields, the
agent's workspace (links never followed, names that climb out dropped, a size limit) and the
protected paths put back as the task has them."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from rewardsmith.rewards.agents.repo_patch import Link
from rewardsmith.rewards.agents.repo_tests_task import (
    WorkspaceTooLarge,
    load_workspace,
    parse_task,
    protect,
)

REPO = {"pkg/code.py": "x = 1\n", "tests/test_code.py": "def test_x(): pass\n",
        "pyproject.toml": "[tool.pytest.ini_options]\n"}
IDS = ["tests/test_code.py::test_x"]


def test_protected_paths_are_put_back_and_counted() -> None:
    base = parse_task({"repo": REPO, "fail_to_pass": IDS})
    final = {path: text.encode() for path, text in REPO.items()}
    final["pkg/code.py"] = b"x = 2\n"  # the agent's own change: kept, not tampering
    final["tests/test_code.py"] = b"def test_x(): assert True\n"
    del final["pyproject.toml"]
    final["pkg/conftest.py"] = b"import os\n"
    final["deep/down/sitecustomize.py"] = b""
    restored, tampered = protect(final, base)
    assert tampered == ["deep/down/sitecustomize.py", "pkg/conftest.py", "pyproject.toml",
                        "tests/test_code.py"]
    assert restored == {**{p: t.encode() for p, t in REPO.items()}, "pkg/code.py": b"x = 2\n"}


def test_a_file_or_link_where_a_protected_folder_was_is_removed() -> None:
    base = parse_task({"repo": REPO, "fail_to_pass": IDS})
    final = {p: t.encode() for p, t in REPO.items() if not p.startswith("tests/")}
    final["tests"] = Link("elsewhere")
    restored, tampered = protect(final, base)
    assert "tests" not in restored and restored["tests/test_code.py"] == REPO[
        "tests/test_code.py"].encode()
    assert tampered == ["tests", "tests/test_code.py"]


def test_placed_tests_without_a_base_are_placed_and_nothing_else_is_judged() -> None:
    hidden = {"tests/test_hidden.py": "def test_h(): pass\n"}
    only = parse_task({"tests": hidden, "pass_to_pass": ["tests/test_hidden.py::test_h"]})
    final = {"pyproject.toml": b"[tool.pytest.ini_options]\naddopts = '-q'\n",
             "tests/test_hidden.py": b"def test_h(): assert 0\n"}
    restored, tampered = protect(final, only)
    assert tampered == []  # no base: nothing can be called changed
    assert restored["tests/test_hidden.py"] == hidden["tests/test_hidden.py"].encode()
    assert restored["pyproject.toml"] == final["pyproject.toml"]


def test_own_protected_globs_and_the_default_test_command() -> None:
    own = parse_task({"repo": REPO, "fail_to_pass": IDS, "protected": ["pkg/*"]})
    assert own.protected == ("pkg/*",) and own.args == ("tests/test_code.py",)
    _, tampered = protect({**{p: t.encode() for p, t in REPO.items()},
                           "pkg/code.py": b"y\n", "conftest.py": b""}, own)
    assert tampered == ["pkg/code.py"]  # conftest.py is the task's choice to allow here


def public(path: Path) -> Path:
    path.mkdir()
    return path


def test_a_workspace_keeps_links_as_links_and_leaves_caches_out(tmp_path: Path) -> None:
    ws = public(tmp_path / "ws")
    (ws / "a.py").write_text("a\n")
    (ws / "secret").symlink_to("/etc/hostname")
    (ws / "linked_dir").symlink_to("/etc")
    (ws / "__pycache__").mkdir()
    (ws / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"x")
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("ref\n")
    got = load_workspace(str(ws), 1 << 20)
    assert got == {"a.py": b"a\n", "secret": Link("/etc/hostname"), "linked_dir": Link("/etc")}


def test_a_tarball_workspace_drops_names_that_climb_out(tmp_path: Path) -> None:
    path = tmp_path / "ws.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name, data in (("../escape.py", b"x"), ("/abs.py", b"y"), ("ok/file.py", b"z"),
                           ("./ok/dot.py", b"w")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        device = tarfile.TarInfo("dev")
        device.type = tarfile.CHRTYPE
        archive.addfile(device)
    assert load_workspace(str(path), 1 << 20) == {"ok/file.py": b"z", "ok/dot.py": b"w"}


def test_a_workspace_over_the_limit_is_refused(tmp_path: Path) -> None:
    ws = public(tmp_path / "big")
    (ws / "blob").write_bytes(os.urandom(4096))
    with pytest.raises(WorkspaceTooLarge):
        load_workspace(str(ws), 1024)


def test_a_task_folder_is_read_again_only_when_it_changes(tmp_path: Path) -> None:
    repo = public(tmp_path / "repo")
    (repo / "m.py").write_text("one\n")
    first = parse_task({"repo": str(repo), "fail_to_pass": ["t.py::x"]})
    assert parse_task({"repo": str(repo), "fail_to_pass": ["t.py::x"]}).repo_key == \
        first.repo_key
    (repo / "m.py").write_text("two, longer\n")
    changed = parse_task({"repo": str(repo), "fail_to_pass": ["t.py::x"]})
    assert changed.repo_key != first.repo_key and changed.repo == {"m.py": b"two, longer\n"}
