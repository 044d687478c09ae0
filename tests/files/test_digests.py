"""The digest of the files a reward reads: what changes it, and what does not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rewardsmith import Rollout
from rewardsmith.files.digests import FileDigests, files_of, keys_with_files, reads_files


def digest(*paths: Path) -> str:
    return FileDigests().of(paths)


def make_tree(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "run.sh").write_text("echo hi\n")
    return root


def test_the_same_content_gives_the_same_digest(tmp_path: Path) -> None:
    first, second = make_tree(tmp_path / "a"), make_tree(tmp_path / "b")
    assert digest(first) == digest(first)
    # The digest names the path too: the same files elsewhere are another input.
    assert digest(first) != digest(second)


def test_each_kind_of_change_to_a_folder_changes_its_digest(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "task")
    seen = {digest(root)}

    def changed() -> bool:
        now = digest(root)
        fresh = now not in seen
        seen.add(now)
        return fresh

    (root / "pkg" / "mod.py").write_text("x = 2\n")  # same size, new bytes
    assert changed()
    os.chmod(root / "run.sh", 0o755)  # executable now
    assert changed()
    (root / "pkg" / "mod.py").rename(root / "pkg" / "other.py")
    assert changed()
    (root / "empty").mkdir()
    assert changed()
    (root / "link").symlink_to("run.sh")
    assert changed()
    (root / "link").unlink()
    (root / "link").symlink_to("pkg")  # a link to a folder: its target, not followed
    assert changed()
    (root / "pkg" / "other.py").unlink()
    assert changed()


def test_a_file_rewritten_with_the_same_size_and_time_is_read_again(tmp_path: Path) -> None:
    target = tmp_path / "task.json"
    target.write_text('{"a": 1}')
    before = digest(target)
    stamp = os.stat(target)
    target.write_text('{"a": 2}')
    os.utime(target, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # mtime put back
    assert digest(target) != before  # ctime still moved: the cached digest is not used


def test_a_missing_path_and_a_dangling_link_have_digests_of_their_own(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "also-nowhere")
    assert FileDigests().of([missing]) != FileDigests().of([dangling])
    missing.write_text("")
    assert FileDigests().of([missing]) != FileDigests().of([tmp_path / "nowhere-else"])


def test_keys_keep_the_content_key_when_no_files_are_declared(tmp_path: Path) -> None:
    rollouts = [Rollout("a", "g", "p", "c", metadata={"file": str(tmp_path / "f")})]
    assert keys_with_files(None, {}, rollouts, ["k1"]) == ["k1"]

    @reads_files(lambda rollout, params: [rollout.metadata["file"]])
    def reward(completion: str) -> float:
        return 1.0

    files = files_of(reward)
    assert files is not None
    (tmp_path / "f").write_text("one")
    first = keys_with_files(files, {}, rollouts, ["k1"])
    assert first != ["k1"] and keys_with_files(files, {}, rollouts, ["k1"]) == first
    (tmp_path / "f").write_text("two")
    assert keys_with_files(files, {}, rollouts, ["k1"]) != first


def test_a_rollout_whose_paths_cannot_be_found_gets_a_key_nothing_matches() -> None:
    def broken(rollout: Rollout, params: object) -> list[str]:
        return [rollout.metadata["workspace"]]  # KeyError: no workspace given

    rollouts = [Rollout("a", "g", "p", "c")]
    key = keys_with_files(broken, {}, rollouts, ["k"])
    # Not even the same rollout failing the same way again: no stored result is replayed.
    assert key != ["k"] and key != keys_with_files(broken, {}, rollouts, ["k"])


def test_files_too_large_to_read_before_the_call_are_never_reused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rewardsmith.files.digests as digests

    root = make_tree(tmp_path / "workspace")
    sparse = root / "huge.bin"
    with open(sparse, "wb") as handle:  # a sparse file: big to read, nothing on disk
        handle.truncate(64 << 20)
    monkeypatch.setattr(digests, "MAX_BYTES", 32 << 20)
    rollouts = [Rollout("a", "g", "p", "c")]
    first = keys_with_files(lambda r, p: [root], {}, rollouts, ["k"])
    assert first != keys_with_files(lambda r, p: [root], {}, rollouts, ["k"])
    sparse.unlink()
    # Four entries: the folder, pkg/, pkg/mod.py, run.sh.
    monkeypatch.setattr(digests, "MAX_ENTRIES", 3)
    assert keys_with_files(lambda r, p: [root], {}, rollouts, ["k"]) != \
        keys_with_files(lambda r, p: [root], {}, rollouts, ["k"])
    monkeypatch.setattr(digests, "MAX_ENTRIES", 4)
    assert keys_with_files(lambda r, p: [root], {}, rollouts, ["k"]) == \
        keys_with_files(lambda r, p: [root], {}, rollouts, ["k"])


def test_a_shared_folder_is_read_once_per_use(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import rewardsmith.files.digests as digests

    root = make_tree(tmp_path / "repo")
    walked: list[str] = []
    real = digests._folder_digest

    def counting(path: str, budget: list[int]) -> str:
        walked.append(path)
        return real(path, budget)

    monkeypatch.setattr(digests, "_folder_digest", counting)
    shared = FileDigests()
    rollouts = [Rollout(str(i), "g", "p", "c") for i in range(50)]
    keys = keys_with_files(lambda r, p: [root], {}, rollouts, [str(i) for i in range(50)],
                           shared)
    assert len(set(keys)) == 50 and walked == [str(root)]
