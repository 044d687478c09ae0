"""Unified diffs applied in memory: what git makes applies as git applies it, and what does
not apply is refused with the file and hunk named."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from rewardsmith.rewards.agents.repo_patch import (
    Link,
    PatchError,
    apply_patch,
    extract_patch,
)

REPO = {"a.py": b"one\ntwo\nthree\nfour\nfive\n", "pkg/b.py": b"x = 1\ny = 2"}


def test_a_change_a_new_file_a_deletion_and_a_rename() -> None:
    patch = """diff --git a/a.py b/a.py
--- a/a.py
+++ b/a.py
@@ -2,2 +2,2 @@
 two
-three
+THREE
diff --git a/new.py b/new.py
new file mode 100644
--- /dev/null
+++ b/new.py
@@ -0,0 +1,2 @@
+hello
+there
diff --git a/pkg/b.py b/pkg/c.py
similarity index 100%
rename from pkg/b.py
rename to pkg/c.py
"""
    got = apply_patch(REPO, patch)
    assert got == {"a.py": b"one\ntwo\nTHREE\nfour\nfive\n", "new.py": b"hello\nthere\n",
                   "pkg/c.py": b"x = 1\ny = 2"}
    deletion = "--- a/a.py\n+++ /dev/null\n@@ -1,5 +0,0 @@\n" + "".join(
        f"-{line}\n" for line in ["one", "two", "three", "four", "five"])
    assert "a.py" not in apply_patch(REPO, deletion)


def test_no_newline_at_end_of_file_and_a_moved_hunk() -> None:
    patch = ("--- a/pkg/b.py\n+++ b/pkg/b.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n"
             "\\ No newline at end of file\n+y = 3\n")
    assert apply_patch(REPO, patch)["pkg/b.py"] == b"x = 1\ny = 3\n"
    moved = "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n four\n-five\n+5\n"
    assert apply_patch(REPO, moved)["a.py"].endswith(b"four\n5\n")


@pytest.mark.parametrize("patch, message", [
    ("--- a/a.py\n+++ b/a.py\n@@ -1,1 +1,1 @@\n-nine\n+ten\n", "does not match"),
    ("--- a/zz.py\n+++ b/zz.py\n@@ -1 +1 @@\n-a\n+b\n", "no such file"),
    ("--- /dev/null\n+++ b/a.py\n@@ -0,0 +1 @@\n+x\n", "already exists"),
    ("--- a/../etc/passwd\n+++ b/../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "outside"),
    ("--- /dev/null\n+++ b//etc/x\n@@ -0,0 +1 @@\n+x\n", "outside"),
    ("diff --git a/a.py b/a.py\nGIT binary patch\nliteral 0\n", "binary"),
    ("--- a/a.py\n+++ b/a.py\n@@ -1,3 +1,3 @@\n one\n-two\n", "cut short"),
    ("I fixed the bug, trust me.", "no diff"),
    ("--- a/a.py\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-one\n", "leaves content"),
])
def test_what_does_not_apply_is_refused(patch: str, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        apply_patch(REPO, patch)


def test_a_link_is_not_patched_through() -> None:
    with pytest.raises(PatchError, match="symbolic link"):
        apply_patch({"a.py": Link("/etc/passwd")}, "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-r\n+x\n")


def test_the_diff_is_found_in_prose_and_fences() -> None:
    diff = "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-one\n+1\n"
    assert extract_patch(diff) == diff
    assert extract_patch(f"Here:\n```diff\n{diff}```\nDone.") == diff
    assert extract_patch(f"```python\nprint(1)\n```\n```\n{diff}```") == diff
    assert extract_patch(f"Fixed it below.\n{diff}") == diff
    assert extract_patch("") == ""
    assert apply_patch(REPO, "") == REPO


@pytest.mark.skipif(shutil.which("git") is None, reason="git makes the reference diffs")
def test_random_edits_apply_as_git_diff_made_them(tmp_path: Path) -> None:
    rng = random.Random(7)
    words = [b"alpha\n", b"beta\n", b"gamma\n", b"x = 1\n", b"    return y\n", b"\n"]
    for trial in range(25):
        root = tmp_path / f"r{trial}"
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        files = {}
        for index in range(rng.randint(1, 3)):
            text = b"".join(rng.choice(words) for _ in range(rng.randint(0, 25)))
            if text and rng.random() < 0.2:
                text = text.rstrip(b"\n")
            files[f"pkg/m{index}.py"] = text
        for path, text in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(text)
        subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
        expected = dict(files)
        for path in list(expected):
            if rng.random() < 0.1:
                del expected[path]
                (root / path).unlink()
                continue
            lines = expected[path].splitlines(keepends=True)
            for _ in range(rng.randint(1, 5)):
                at = rng.randint(0, len(lines))
                if rng.random() < 0.5 or not lines:
                    lines.insert(at, rng.choice(words))
                else:
                    del lines[min(at, len(lines) - 1)]
            text = b"".join(lines)
            if text and rng.random() < 0.15:
                text = text.rstrip(b"\n")
            expected[path] = text
            (root / path).write_bytes(text)
        diff = subprocess.run(["git", "-C", str(root), "diff", f"-U{rng.choice([0, 1, 3])}"],
                              capture_output=True, check=True).stdout.decode()
        assert apply_patch(files, diff) == expected, diff
