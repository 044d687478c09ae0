"""Runs a documentation page's blocks in order in a workspace of its own.

Each block is one of: a file (its first line names it: written there), a command block
(sh/bash: each command run with the project's environment on PATH), Python (run with the
project's interpreter), a rubric (a yaml block with `components`: loaded), output the page
shows (checked by a generic check or by the page's own), or marked `<!-- not-run: reason -->`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest
import yaml

from .markdown import Block, read_page, shell_commands

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DATA = HERE / "data"
PYRUN = HERE / "pyrun.py"
BIN = Path(sys.executable).parent
COMMAND_TIMEOUT = 120
# The model ids the pages name; the stand-in judge serves all of them.
STAND_IN_MODELS = ("judge-2024-01-01", "gpt-4o-mini-2024-07-18", "Qwen2.5-7B-Instruct",
                   "Qwen2.5-72B-Instruct", "my-judge")


@dataclass
class CommandRun:
    block: Block
    command: str
    returncode: int
    stdout: str
    stderr: str


@dataclass
class PageRun:
    """What a page's run has made so far; its checks read it."""

    page: str
    workspace: Path
    env: dict[str, str]
    commands: list[CommandRun] = field(default_factory=list)
    rubric: Path | None = None         # the rubric file the page last showed or wrote
    rubric_text: str | None = None     # ... and its text, when it was shown, not written
    judge_url: str | None = None
    port: int = 0
    servers: list[subprocess.Popen[str]] = field(default_factory=list)
    logs: list[IO[str]] = field(default_factory=list)

    def last_output(self, prefix: str) -> CommandRun:
        for run in reversed(self.commands):
            if run.command.startswith(prefix):
                return run
        raise AssertionError(f"{self.page}: no command starting {prefix!r} ran before")

    def run(self, command: str, *, expect: int | None = 0) -> subprocess.CompletedProcess[str]:
        """A command of the page's own checks (not shown on the page)."""
        done = subprocess.run(["bash", "-c", command], cwd=self.workspace, env=self.env,
                              capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        if expect is not None:
            assert done.returncode == expect, (
                f"{self.page}: check command {command!r} exited {done.returncode}:\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done


Check = Callable[[Block, PageRun], None]


@dataclass
class PageSetup:
    """What a page needs that it does not show, made explicit.

    files: workspace name -> file under tests/docs_fixtures/data/ (or `demo:NAME` for a file
    of the bundled demo data). prelude: Python run before each of the page's Python blocks,
    defining the names a block takes as given (`rollouts`, `rewards`, ...). exit_codes: the
    exit status a command expects when it is not 0, by the command's start. checks: output
    blocks the page shows, claimed by a substring of their first line. judge: a stand-in
    OpenAI-compatible server runs for the page and its URL replaces the page's example URL.
    substitutions: text replaced in the page's blocks (paths of another machine; `{port}` is
    a free port on 127.0.0.1).
    """

    files: dict[str, str] = field(default_factory=dict)
    prelude: str = ""
    exit_codes: dict[str, int] = field(default_factory=dict)
    checks: dict[str, Check] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    judge: bool = False
    judge_url_shown: str = "http://127.0.0.1:8001/v1"
    rubric: str | None = None      # the rubric a scored line follows when the page shows none
    substitutions: dict[str, str] = field(default_factory=dict)  # `{workspace}` is filled in
    # Python run after a Python block that contains the key: it calls what the block defines,
    # or checks what the block's comments say of its values.
    epilogues: dict[str, str] = field(default_factory=dict)
    prepare: Callable[[PageRun], None] | None = None  # inputs made by code, not copied
    background: tuple[str, ...] = ()  # commands that serve until stopped: started, then
    #                                   waited for on `{port}` and stopped when the page ends
    tools: tuple[str, ...] = ()  # programs the page's commands run besides rewardsmith's
    slow: bool = False

    def check_for(self, block: Block) -> Check | None:
        first = block.text.split("\n", 1)[0]
        for key, check in self.checks.items():
            if key in first:
                return check
        return None


def block_kind(block: Block, setup: PageSetup) -> str:
    """How a block is run: not-run, file, shell, python, rubric, check, scored, rollouts, or
    `none` (neither run nor marked: an error)."""
    if block.not_run is not None:
        return "not-run"
    if block.file_name:
        return "file"
    if block.lang in ("sh", "bash", "shell", "console"):
        return "shell"
    if block.lang in ("python", "py"):
        return "python"
    if setup.check_for(block) is not None:
        return "check"
    if block.lang in ("yaml", "yml"):
        data = _yaml(block)
        return "rubric" if isinstance(data, dict) and "components" in data else "none"
    if block.lang == "json":
        objects = json_objects(block.text)
        if objects and all({"reward", "status", "components"} <= set(o) for o in objects):
            return "scored"
        if objects and all("completion" in o or "response" in o for o in objects):
            return "rollouts"
    return "none"


def _yaml(block: Block) -> Any:
    try:
        return yaml.safe_load(block.text)
    except yaml.YAMLError:
        return None


def json_objects(text: str) -> list[dict[str, Any]]:
    """The objects of a JSON block: one document, or one per line (JSONL)."""
    try:
        whole = json.loads(text)
    except ValueError:
        objects: list[Any] = []
        buffer = ""
        for line in text.split("\n"):
            buffer += line
            try:
                objects.append(json.loads(buffer))
            except ValueError:
                continue
            buffer = ""
        if buffer.strip():
            return []
    else:
        objects = whole if isinstance(whole, list) else [whole]
    return [o for o in objects if isinstance(o, dict)] if objects else []


def substitute(text: str, run: PageRun, setup: PageSetup) -> str:
    if run.judge_url is not None:
        text = text.replace(setup.judge_url_shown, run.judge_url)
    for shown, here in setup.substitutions.items():
        here = here.replace("{workspace}", str(run.workspace)).replace("{port}", str(run.port))
        text = text.replace(shown, here)
    return text


@contextlib.contextmanager
def judge_server(setup: PageSetup) -> Iterator[str | None]:
    if not setup.judge:
        yield None
        return
    from rewardsmith.judge.standin import StandInJudge  # what `rewardsmith judge-serve` runs

    with StandInJudge(models=STAND_IN_MODELS) as server:
        yield server.base_url


def prepare(page: str, setup: PageSetup, workspace: Path, judge_url: str | None) -> PageRun:
    workspace.mkdir(parents=True, exist_ok=True)
    for name, source in setup.files.items():
        origin = (ROOT / "src/rewardsmith/data" / source[5:] if source.startswith("demo:")
                  else DATA / source)
        target = workspace / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(origin, target)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("REWARDSMITH_", "PYTEST_", "COV_"))}
    env.update({"PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "HOME": str(workspace),
                "COLUMNS": "200", "NO_COLOR": "1", "PYTHONPATH": "", **setup.env})
    run = PageRun(page, workspace, env, judge_url=judge_url, port=_free_port())
    if setup.rubric is not None:
        run.rubric = workspace / setup.rubric
    if setup.prepare is not None:
        setup.prepare(run)
    return run


def run_page(page: str, setup: PageSetup, workspace: Path, *, root: Path = ROOT) -> PageRun:
    blocks = read_page(root, page).blocks
    missing = [tool for tool in setup.tools if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{page} runs {', '.join(missing)}, not installed here "
                    "(make test installs them where it can)")
    with judge_server(setup) as url:
        run = prepare(page, setup, workspace, url)
        try:
            for index, block in enumerate(blocks):
                _run_block(index, block, setup, run)
            # A rubric the page writes to a file loads, used by a later block or not.
            for block in blocks:
                if (block_kind(block, setup) == "file" and block.file_name
                        and block.lang in ("yaml", "yml")
                        and "components" in (_yaml(block) or {})):
                    load_rubric(run.workspace / block.file_name, block, run)
        finally:
            for server in run.servers:
                _stop(server)
            for log in run.logs:
                log.close()
    return run


def _stop(server: subprocess.Popen[str]) -> None:
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, sig)
        try:
            server.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serve(block: Block, command: str, run: PageRun) -> None:
    """Start a command that serves until stopped, and wait until its port answers."""
    log = (run.workspace / f"_server_{len(run.servers)}.log").open("w+", encoding="utf-8")
    run.logs.append(log)
    # A session of its own: stopping it stops bash and the server it started.
    server = subprocess.Popen(["bash", "-c", command], cwd=run.workspace, env=run.env,
                              stdout=log, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
    run.servers.append(server)
    deadline = time.monotonic() + COMMAND_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            log.seek(0)
            raise AssertionError(f"{block.where}: `{command}` exited {server.returncode}:\n"
                                 f"{log.read()[-3000:]}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", run.port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"{block.where}: `{command}` did not listen on port {run.port}")


def _run_block(index: int, block: Block, setup: PageSetup, run: PageRun) -> None:
    kind = block_kind(block, setup)
    text = substitute(block.text, run, setup)
    if kind == "not-run":
        return
    if kind == "none":
        raise AssertionError(f"{block.where}: a {block.lang or 'plain'} block that is neither "
                             "run nor marked <!-- not-run: reason -->")
    if kind == "file":
        assert block.file_name is not None
        target = run.workspace / block.file_name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text + "\n", encoding="utf-8")
        if block.lang in ("yaml", "yml") and "components" in (_yaml(block) or {}):
            run.rubric, run.rubric_text = target, None
    elif kind == "shell":
        for command in shell_commands(text):
            _run_command(block, command, setup, run)
    elif kind == "python":
        _run_python(index, block, text, setup, run)
    elif kind == "rubric":
        target = run.workspace / f"_shown_rubric_{block.line}.yaml"
        target.write_text(text + "\n", encoding="utf-8")
        run.rubric, run.rubric_text = target, text
        load_rubric(target, block, run)
    elif kind == "check":
        check = setup.check_for(block)
        assert check is not None
        check(block, run)
    elif kind == "scored":
        from .checks import check_scored_lines

        check_scored_lines(block, run)
    elif kind == "rollouts":
        from .checks import check_rollout_lines

        check_rollout_lines(block, run)


def load_rubric(path: Path, block: Block, run: PageRun) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from rewardsmith import Rubric; "
         "Rubric.from_yaml(sys.argv[1]).resolve()", str(path)],
        cwd=run.workspace, env=run.env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    assert done.returncode == 0, f"{block.where}: the rubric does not load:\n{done.stderr[-3000:]}"


def _expected_status(command: str, setup: PageSetup) -> int:
    for prefix, status in setup.exit_codes.items():
        if command.startswith(prefix):
            return status
    return 0


def _run_command(block: Block, command: str, setup: PageSetup, run: PageRun) -> None:
    if any(command.startswith(prefix) for prefix in setup.background):
        _serve(block, command, run)
        return
    done = subprocess.run(["bash", "-c", command], cwd=run.workspace, env=run.env,
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    run.commands.append(CommandRun(block, command, done.returncode, done.stdout, done.stderr))
    expected = _expected_status(command, setup)
    assert done.returncode == expected, (
        f"{block.where}: `{command}` exited {done.returncode}, expected {expected}:\n"
        f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def _run_python(index: int, block: Block, text: str, setup: PageSetup, run: PageRun) -> None:
    prelude = run.workspace / f"_prelude_{index}.py"
    prelude.write_text(substitute(setup.prelude, run, setup), encoding="utf-8")
    source = run.workspace / f"_block_{block.line}.py"
    source.write_text(text + "\n", encoding="utf-8")
    epilogue = run.workspace / f"_epilogue_{index}.py"
    after = "".join(code for key, code in setup.epilogues.items() if key in block.text)
    epilogue.write_text(substitute(after, run, setup), encoding="utf-8")
    done = subprocess.run([sys.executable, str(PYRUN), str(prelude), str(source), str(epilogue)],
                          cwd=run.workspace, env={**run.env, "PYTHONPATH": str(run.workspace)},
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    run.commands.append(CommandRun(block, f"python {source.name}", done.returncode,
                                   done.stdout, done.stderr))
    assert done.returncode == 0, (f"{block.where}: the Python block failed:\n"
                                  f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
