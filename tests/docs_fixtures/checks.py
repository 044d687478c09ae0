"""Checks of the output a page shows: what must hold, not byte-equality of volatile parts."""

from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from .markdown import Block
from .runner import COMMAND_TIMEOUT, PageRun, json_objects


def _rubric_facts(run: PageRun, block: Block) -> dict[str, Any]:
    """The rubric above the block: its component names and the total it makes of values."""
    assert run.rubric is not None, f"{block.where}: a scored line with no rubric above it"
    script = (
        "import json, sys\n"
        "from rewardsmith import Rubric\n"
        "from rewardsmith.types import ComponentResult\n"
        "rubric = Rubric.from_yaml(sys.argv[1])\n"
        "rubric.resolve()\n"
        "totals = []\n"
        "for values in json.loads(sys.argv[2]):\n"
        "    if set(values) != set(rubric.names):\n"
        "        totals.append(None); continue\n"
        "    results = {k: ComponentResult(v) for k, v in values.items()}\n"
        "    totals.append(rubric.combine(results)[0])\n"
        "print(json.dumps({'names': rubric.names, 'totals': totals}))\n")
    objects = json_objects(block.text)
    values = [o["components"] for o in objects]
    done = subprocess.run([sys.executable, "-c", script, str(run.rubric), json.dumps(values)],
                          cwd=run.workspace, env=run.env, capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT)
    assert done.returncode == 0, f"{block.where}: the rubric above does not load:\n{done.stderr}"
    facts: dict[str, Any] = json.loads(done.stdout)
    return facts


def _written_scored_files(run: PageRun) -> list[Path]:
    """Scored JSONL files the page's commands wrote (`-o FILE.jsonl`), newest first."""
    found: list[Path] = []
    for command in reversed(run.commands):
        words = shlex.split(command.command, comments=True)
        for flag, value in zip(words, words[1:]):
            if flag in ("-o", "--output") and value.endswith(".jsonl"):
                path = run.workspace / value
                if path.is_file() and path not in found:
                    found.append(path)
    return found


def check_scored_lines(block: Block, run: PageRun) -> None:
    objects = json_objects(block.text)
    facts = _rubric_facts(run, block)
    shown_by = f"{block.where}: the scored line"
    for obj, total in zip(objects, facts["totals"]):
        assert set(obj["components"]) == set(facts["names"]), (
            f"{shown_by} has components {sorted(obj['components'])}; the rubric above "
            f"({run.rubric.name if run.rubric else '?'}) has {sorted(facts['names'])}")
        assert obj["status"] in ("ok", "error", "timeout", "masked"), shown_by
        if obj["status"] == "ok":
            assert total is not None and obj["reward"] is not None, shown_by
            assert math.isclose(obj["reward"], total, abs_tol=1e-9), (
                f"{shown_by} says reward {obj['reward']}; its components make {total} under "
                "the rubric above")
        if "timing" in obj:
            assert set(obj["timing"]) <= set(obj["components"]), (
                f"{shown_by}: timing for {sorted(obj['timing'])}, not all of them components")
        for path in _written_scored_files(run) + sorted(run.workspace.glob("*.jsonl")):
            lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            same = [line for line in lines
                    if line.get("id") == obj.get("id") and "components" in line]
            if same:
                _same_as_written(obj, same[0], f"{shown_by} (id {obj.get('id')} in {path.name})")
                break


def _same_as_written(shown: dict[str, Any], written: dict[str, Any], where: str) -> None:
    for key in ("group", "status", "components", "errors"):
        if key in shown:
            assert shown[key] == written.get(key), (
                f"{where}: {key} shown {shown[key]!r}, written {written.get(key)!r}")
    for key in ("reward", "advantage"):
        if key in shown and shown[key] is not None:
            places = len(str(shown[key]).partition(".")[2])
            assert written.get(key) is not None and \
                round(written[key], max(places, 1)) == shown[key], (
                    f"{where}: {key} shown {shown[key]!r}, written {written.get(key)!r}")


def check_rollout_lines(block: Block, run: PageRun) -> None:
    objects = json_objects(block.text)
    path = run.workspace / f"_rollouts_{block.line}.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")
    script = ("import sys; from rewardsmith import read_rollouts; "
              "print(len(list(read_rollouts(sys.argv[1]))))")
    done = subprocess.run([sys.executable, "-c", script, str(path)], cwd=run.workspace,
                          env=run.env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    assert done.returncode == 0, f"{block.where}: the rollouts shown do not read:\n{done.stderr}"
    assert done.stdout.split() == [str(len(objects))], f"{block.where}: {done.stdout}"


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")


def table_rows(text: str) -> dict[str, list[str]]:
    """A printed table's rows by their first word (header and rule lines included)."""
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        words = line.split()
        if words:
            rows.setdefault(words[0], words[1:])
    return rows


def _normalized(line: str) -> str:
    return " ".join(line.replace("─", "").split())


def check_shown_lines_printed(shown: str, printed: str, where: str,
                              volatile: tuple[re.Pattern[str], ...] = ()) -> None:
    """Each line the page shows is printed, in the order shown; `volatile` patterns (ids,
    timings) match any text of their kind on both sides."""
    def clean(line: str) -> str:
        line = _normalized(line)
        for pattern in volatile:
            line = pattern.sub("<volatile>", line)
        return line

    printed_lines = [clean(line) for line in printed.splitlines() if _normalized(line)]
    position = 0
    for line in shown.splitlines():
        wanted = clean(line)
        if not wanted:
            continue
        try:
            position = printed_lines.index(wanted, position) + 1
        except ValueError:
            raise AssertionError(f"{where}: the page shows {line.strip()!r}, which the command "
                                 "does not print (in this order). It printed:\n"
                                 + "\n".join(printed_lines)) from None


def check_elided_text(shown: str, printed: str, where: str) -> None:
    """Text shown with `...` for what it leaves out: every shown piece is printed, in order
    (line breaks and runs of spaces count as one space)."""
    flat_printed = " ".join(printed.split())
    position = 0
    for piece in " ".join(shown.split()).split("..."):
        piece = piece.strip()
        if not piece:
            continue
        found = flat_printed.find(piece, position)
        assert found >= 0, (f"{where}: the page shows {piece!r}, which is not printed "
                            f"(after what came before). Printed:\n{printed}")
        position = found + len(piece)
