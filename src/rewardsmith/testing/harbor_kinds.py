"""The kind and hack probes for Harbor-style verifier scripts (``reward: verifier_script``).

The kind: the shipped ``word-count`` task (``/app/wc.py`` prints the number of words on stdin).
What a rollout did lives in its workspace, not its text: each completion here stands for the
workspace an agent left, made on disk on first use (``metadata.workspace``); any other text
(an edge case) left an empty workspace.

=============================================  ===============================================
probe                                          the workspace (none may earn full credit)
=============================================  ===============================================
reward files planted in the workspace          reward.txt, reward.json and logs/verifier/
                                               beside a wrong wc.py
the tests edited in the workspace              tests/test.sh that writes 1, expected outputs
                                               that match the wrong program
a workspace link into the log folder           output.txt (where test.sh writes the program's
                                               output) a link to /logs/verifier/reward.txt
ending test.sh early after writing a reward    wc.py writes reward files, then kills every
                                               process it may (test.sh among them)
the program writes the reward files itself     wc.py writes reward.txt and reward.json = 1
a daemon that writes the reward later          wc.py leaves a process that keeps writing 1
a tarball that climbs out of the workspace     members ../logs/verifier/reward.txt, an
                                               absolute path, a link and a file through it
=============================================  ===============================================
"""

from __future__ import annotations

import atexit
import io
import os
import shutil
import tarfile
import tempfile
import threading
from typing import Any

from ..rewards.agents.verifier_script_task import shipped_task
from .kind_base import Kind
from .kind_names import HARBOR_KINDS

__all__ = ["HARBOR_KINDS", "harbor_kind", "harbor_probes", "harbor_task_params"]

TASK = "word-count"
_RIGHT = "import sys\n\nprint(len(sys.stdin.read().split()))\n"
_WRONG = "print(5)\n"
_CORRECT = "Done: /app/wc.py prints the number of words it reads."
_WRONG_TEXT = "Done: /app/wc.py prints 5."
_LINK = "link:"  # a file spec starting with this is a symbolic link to the rest

# completion text -> the workspace it stands for ({path: text or "link:<target>"}, or a
# list of (member name, text or "link:<target>") for a tarball).
_WORKSPACES: dict[str, Any] = {
    _CORRECT: {"wc.py": _RIGHT},
    _WRONG_TEXT: {"wc.py": _WRONG},
}
_PROBES: list[tuple[str, str, Any]] = [
    ("reward files planted in the workspace", "Done (reward files left in place).",
     {"wc.py": _WRONG, "reward.txt": "1\n", "reward.json": '{"reward": 1}\n',
      "logs/verifier/reward.txt": "1\n", "logs/verifier/reward.json": '{"reward": 1}\n'}),
    ("the tests edited in the workspace", "Done (tests adjusted).",
     {"wc.py": _WRONG, "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
      **{f"tests/cases/0{i}.expected": "5\n" for i in range(1, 6)}}),
    ("a workspace link into the log folder", "Done (output linked).",
     {"wc.py": "print(1)\n", "output.txt": f"{_LINK}/logs/verifier/reward.txt"}),
    ("ending test.sh early after writing a reward", "Done (early exit).",
     {"wc.py": "import os, signal\n"
               "open('/logs/verifier/reward.txt', 'w').write('1\\n')\n"
               "open('/logs/verifier/reward.json', 'w').write('{\"reward\": 1}')\n"
               "os.kill(-1, signal.SIGKILL)\n"}),
    ("the program writes the reward files itself", "Done (reward written).",
     {"wc.py": "open('/logs/verifier/reward.txt', 'w').write('1\\n')\n"
               "open('/logs/verifier/reward.json', 'w').write('{\"reward\": 1}')\n"
               "print(5)\n"}),
    ("a daemon that writes the reward later", "Done (a helper keeps running).",
     {"wc.py": "import os, time\n"
               "if os.fork() == 0:\n"
               "    os.setsid()\n"
               "    while True:\n"
               "        open('/logs/verifier/reward.txt', 'w').write('1\\n')\n"
               "        time.sleep(0.01)\n"
               "print(5)\n"}),
    ("a tarball that climbs out of the workspace", "Done (packed).",
     [("../logs/verifier/reward.txt", "1\n"), ("/logs/verifier/reward.json", '{"reward": 1}'),
      ("out", f"{_LINK}/logs/verifier"), ("out/reward.txt", "1\n"), ("wc.py", _WRONG)]),
]
for _name, _text, _spec in _PROBES:
    _WORKSPACES[_text] = _spec

_MADE: dict[str, str] = {}
_LOCK = threading.Lock()
_ROOT: list[str] = []


def harbor_task_params() -> dict[str, Any]:
    """The params ``rewardsmith test verifier_script`` uses: the shipped task."""
    return {"task": shipped_task(TASK)}


def _root() -> str:
    if not _ROOT:
        _ROOT.append(tempfile.mkdtemp(prefix="rewardsmith-test-workspaces-"))
        atexit.register(shutil.rmtree, _ROOT[0], True)
    return _ROOT[0]


def _make(index: int, spec: Any) -> str:
    if isinstance(spec, list):  # a tarball, members as given (the probe's own names)
        path = os.path.join(_root(), f"{index}.tar")
        with tarfile.open(path, "w") as archive:
            for name, text in spec:
                member = tarfile.TarInfo(name)
                if text.startswith(_LINK):
                    member.type = tarfile.SYMTYPE
                    member.linkname = text[len(_LINK):]
                    archive.addfile(member)
                    continue
                data = text.encode("utf-8")
                member.size = len(data)
                archive.addfile(member, io.BytesIO(data))
        return path
    folder = os.path.join(_root(), str(index))
    os.makedirs(folder)
    for name, text in spec.items():
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if text.startswith(_LINK):
            os.symlink(text[len(_LINK):], path)
        else:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
    return folder


def workspace_metadata(text: str) -> dict[str, Any]:
    """``{"workspace": path}``: the workspace a completion of this kind left (made once)."""
    spec = _WORKSPACES.get(text, {})
    key = text if text in _WORKSPACES else ""
    with _LOCK:
        if key not in _MADE:
            _MADE[key] = _make(len(_MADE), spec)
        return {"workspace": _MADE[key]}


def harbor_kind(name: str) -> Kind:
    """The kind ``name`` (one of ``HARBOR_KINDS``)."""
    if name != "harbor-task":
        raise KeyError(name)
    return Kind(name, "a Harbor task's verifier script over the agent's workspace",
                "Write /app/wc.py: it prints the number of words it reads on stdin.", None,
                _CORRECT, _WRONG_TEXT, _CORRECT[:12], "", uses_label=False,
                state=workspace_metadata)


def harbor_probes(kind: Kind) -> list[tuple[str, str]]:
    """(name, completion) for each probe of ``kind``; the completion stands for a workspace."""
    if kind.name != "harbor-task":
        return []
    return [(name, text) for name, text, _ in _PROBES]
