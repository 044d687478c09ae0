"""The program a ``repo_tests`` sandbox runs (as text, with ``python -I -c``): never imported.

It reads one JSON header line, then the base repository as a tar of ``base_bytes`` bytes,
then the rollout's overlay as a tar: it unpacks the base into ``/tmp/work`` (its private
tmpfs), deletes the header's ``delete`` paths, unpacks the overlay, and writes a ``setup``
record; all of this before any of the workspace's code can run. Then it imports pytest (so the
workspace cannot shadow it), puts the workspace first on ``sys.path`` as ``python -m pytest``
does, and runs pytest in this process with a reporter of its own. The reporter writes one JSON
line per test phase, with the run's token from the header, to a copy of stdout made before
pytest started; pytest's own output goes to stderr. It also notes pytest's functions and hook
implementations that make a test's verdict, and says so when the workspace's code replaced
or added one. Python 3.8 compatible: it runs in the task's
environment (annotations stay strings).
"""

from __future__ import annotations

import io
import json
import os
import posixpath
import resource
import sys
import tarfile
from typing import IO, Any

RECORDS = os.dup(1)


def emit(record: dict[str, Any]) -> None:
    data = (json.dumps(record) + "\n").encode("utf-8")
    while data:
        data = data[os.write(RECORDS, data):]


def safe_name(name: str) -> str:
    """The member's path inside the workspace, or "" for one that would leave it."""
    name = posixpath.normpath(name.replace("\\", "/"))
    if name.startswith("/") or name == ".." or name.startswith("../") or name in (".", ""):
        return ""
    return name


def clear_way(root: str, name: str) -> str:
    """Make every parent of ``name`` a real folder (a link or file there is removed), and
    remove what is at ``name`` unless it is a folder: nothing is written through a link."""
    parts = name.split("/")
    here = root
    for part in parts[:-1]:
        here = os.path.join(here, part)
        if os.path.islink(here) or (os.path.exists(here) and not os.path.isdir(here)):
            os.unlink(here)
        if not os.path.isdir(here):
            os.mkdir(here)
    target = os.path.join(root, *parts)
    if os.path.islink(target) or os.path.isfile(target):
        os.unlink(target)
    return target


def unpack(data: bytes, root: str) -> None:
    if not data:
        return
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
        for member in archive:
            name = safe_name(member.name)
            if not name:
                continue
            if member.isdir():
                target = clear_way(root, name + "/x")
                continue
            if not (member.isfile() or member.issym()):
                continue
            target = clear_way(root, name)
            if os.path.isdir(target):
                continue  # a folder already holds files here: the folder stays
            if member.issym():
                os.symlink(member.linkname, target)
                continue
            source = archive.extractfile(member)
            with open(target, "wb") as handle:
                handle.write(source.read() if source is not None else b"")
            if member.mode & 0o111:
                os.chmod(target, 0o755)


def delete(root: str, name: str) -> None:
    name = safe_name(name)
    target = os.path.join(root, *name.split("/")) if name else ""
    if target and (os.path.islink(target) or os.path.isfile(target)):
        os.unlink(target)


def read_exactly(stream: IO[bytes], size: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        chunk = stream.read(size)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


# Hooks whose implementations decide or carry a test's verdict.
VERDICT_HOOKS = ("pytest_runtest_makereport", "pytest_runtest_logreport",
                 "pytest_report_teststatus", "pytest_runtest_protocol", "pytest_runtest_call",
                 "pytest_pyfunc_call", "pytest_runtest_setup", "pytest_runtest_teardown")


class Reporter:
    """Writes each test phase's outcome as a record carrying the run's token. Flags the run
    when a function of pytest that makes a verdict was replaced, or when a plugin that is
    neither pytest's, the environment's nor a (restored) conftest.py implements a verdict
    hook: either way the workspace's code reached the machinery that grades it."""

    def __init__(self, token: str, root: str) -> None:
        self.token = token
        self.root = root + os.sep
        self.watched: list[tuple[Any, str, Any]] = []
        self.flagged = False
        self.config: Any = None
        self.trusted: set[int] = set()
        self.prefixes = tuple({os.path.realpath(p) + os.sep for p in (sys.prefix,
                                                                       sys.base_prefix)})

    def emit(self, record: dict[str, Any]) -> None:
        record["t"] = self.token
        emit(record)

    def flag(self, what: str) -> None:
        if not self.flagged:
            self.flagged = True
            self.emit({"e": "runner_tampered", "what": what})

    def trusted_plugin(self, plugin: Any) -> bool:
        if id(plugin) in self.trusted:
            return True
        name = getattr(plugin, "__file__", None)
        if not isinstance(plugin, type(sys)) or not isinstance(name, str):
            return False
        path = os.path.realpath(name)
        if os.path.basename(path) == "conftest.py" and path.startswith(self.root):
            return True
        return path.startswith(self.prefixes)

    def check(self) -> None:
        if self.flagged:
            return
        for owner, attribute, original in self.watched:
            if vars(owner).get(attribute) is not original:
                self.flag(attribute)
                return
        if self.config is None:
            return
        for hook in VERDICT_HOOKS:
            caller = getattr(self.config.hook, hook, None)
            for impl in caller.get_hookimpls() if caller is not None else ():
                if not self.trusted_plugin(impl.plugin):
                    self.flag(f"a plugin of the workspace implements {hook}")
                    return

    def pytest_sessionstart(self, session: Any) -> None:
        self.config = session.config
        self.trusted = {id(p) for p in session.config.pluginmanager.get_plugins()}

    def pytest_runtest_logreport(self, report: Any) -> None:
        self.check()
        self.emit({"e": "test", "id": getattr(report, "nodeid", ""),
                   "when": getattr(report, "when", ""),
                   "outcome": getattr(report, "outcome", ""),
                   "xfail": hasattr(report, "wasxfail")})

    def pytest_collectreport(self, report: Any) -> None:
        if getattr(report, "outcome", "") == "failed":
            self.emit({"e": "collect", "id": getattr(report, "nodeid", "")})

    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        self.check()


def watched_functions() -> list[tuple[Any, str, Any]]:
    """What makes a test's verdict in pytest: replaced, the verdicts mean nothing."""
    import _pytest.python
    import _pytest.reports
    import _pytest.runner

    found: list[tuple[Any, str, Any]] = []
    for owner, attribute in ((_pytest.runner, "call_and_report"),
                             (_pytest.runner, "runtestprotocol"),
                             (_pytest.runner, "call_runtest_hook"),
                             (_pytest.runner.CallInfo, "from_call"),
                             (_pytest.reports.TestReport, "from_item_and_call"),
                             (_pytest.python, "pytest_pyfunc_call"),
                             (Reporter, "pytest_runtest_logreport")):
        if attribute in vars(owner):  # as stored: a classmethod, not a fresh bound method
            found.append((owner, attribute, vars(owner)[attribute]))
    return found


def main() -> None:
    stdin = sys.stdin.buffer
    header = json.loads(stdin.readline().decode("utf-8"))
    root = os.path.join(os.getcwd(), "work")  # the sandbox's /tmp, or the host's scratch folder
    try:
        os.mkdir(root)
        unpack(read_exactly(stdin, int(header["base_bytes"])), root)
        for name in header["delete"]:
            delete(root, name)
        unpack(stdin.read(), root)
    except Exception as exc:  # noqa: BLE001 - any failure here is the setup's, reported
        emit({"e": "setup", "ok": False, "message": f"{type(exc).__name__}: {exc}"})
        return
    emit({"e": "setup", "ok": True})
    limit_mb = header.get("address_space_mb")
    if limit_mb:
        resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    file_bytes = int(header.get("file_mb") or 256) << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    os.dup2(2, 1)  # pytest's own output: stderr
    os.chdir(root)
    os.environ["HOME"] = os.path.dirname(root)
    if not header.get("autoload_plugins"):
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        import pytest
    except ImportError as exc:
        emit({"e": "fatal", "message": f"pytest cannot be imported here: {exc}"})
        return
    reporter = Reporter(str(header.pop("token")), root)
    reporter.watched = watched_functions()
    sys.path.insert(0, root)
    args = list(header["args"])
    for plugin in header.get("plugins") or []:
        args[:0] = ["-p", plugin]
    status = pytest.main(args, plugins=[reporter])
    reporter.check()
    reporter.emit({"e": "done", "exit": int(status)})


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no atexit hook the workspace's code left behind runs after the report
