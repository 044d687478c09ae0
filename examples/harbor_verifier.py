"""Harbor-style verifier scripts: a task's own tests/test.sh grades the workspace an agent left.

The task is the word-count task shipped with rewardsmith (``rewardsmith/data/harbor_tasks``):
``/app/wc.py`` must print the number of words it reads. Five agents' final workspaces are
graded: a right program (as a folder, and again as a ``.tar.gz``), a wrong one, one that plants
``reward.txt`` files beside a wrong program, and one whose ``output.txt`` (where ``test.sh``
writes the program's output) is a link to the log folder's ``reward.txt``. The script runs in
the bubblewrap sandbox over a private copy of each workspace; the planted files are the
workspace's own files and the link is removed before the script runs, so neither hack pays.

    python examples/harbor_verifier.py

Needs bubblewrap (``make test`` installs it; ``apt-get install -y bubblewrap``).
"""

from __future__ import annotations

import os
import sys
import tarfile
import tempfile

from rewardsmith import Rollout, Rubric, score_rollouts
from rewardsmith.rewards.agents.verifier_script_task import shipped_task

RIGHT = "import sys\n\nprint(len(sys.stdin.read().split()))\n"
WRONG = "import sys\n\nprint(len(sys.stdin.read().split(' ')))\n"  # counts empty strings too


def workspace(root: str, name: str, files: dict[str, str],
              links: dict[str, str] | None = None) -> str:
    """A folder as an agent's sandbox would leave it."""
    folder = os.path.join(root, name)
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(folder, path)), exist_ok=True)
        with open(os.path.join(folder, path), "w", encoding="utf-8") as handle:
            handle.write(text)
    for path, target in (links or {}).items():
        os.symlink(target, os.path.join(folder, path))
    return folder


def main() -> int:
    task = shipped_task("word-count")
    rubric = Rubric.from_dict({"name": "harbor-word-count", "components": {
        "tests": {"reward": "verifier_script", "params": {"task": task}}}})
    with tempfile.TemporaryDirectory() as root:
        right = workspace(root, "right", {"wc.py": RIGHT})
        packed = os.path.join(root, "right.tar.gz")
        with tarfile.open(packed, "w:gz") as archive:
            archive.add(right, arcname=".")
        spaces = {
            "right": right,
            "right-tarball": packed,
            "wrong": workspace(root, "wrong", {"wc.py": WRONG}),
            "planted": workspace(root, "planted", {
                "wc.py": "print(5)\n", "reward.txt": "1\n", "logs/verifier/reward.txt": "1\n"}),
            "linked": workspace(root, "linked", {"wc.py": "print(1)\n"},
                                {"output.txt": "/logs/verifier/reward.txt"}),
        }
        rollouts = [Rollout(id=name, group="word-count", prompt="Write /app/wc.py.",
                            completion="Done.", metadata={"workspace": path})
                    for name, path in spaces.items()]
        scores = score_rollouts(rubric, rollouts, workers=2)

    for score in scores:
        metrics = score.metrics
        print(f"{score.id:14} reward {score.reward:.2f}  status {score.status}  passed "
              f"{int(metrics.get('tests.reward.passed', 0))}/"
              f"{int(metrics.get('tests.reward.total', 0))}  links removed "
              f"{int(metrics.get('tests.links_removed', 0))}")
    rewards = {score.id: round(score.reward or 0.0, 4) for score in scores}
    expected = {"right": 1.0, "right-tarball": 1.0, "wrong": 0.4, "planted": 0.0, "linked": 0.2}
    if rewards != expected:
        print(f"unexpected rewards: {rewards}", file=sys.stderr)
        return 1
    print("planted reward files and a link into the log folder earned nothing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
