"""The Python API pages: mkdocstrings directives for every name in ``rewardsmith.__all__``
(each at the module that defines it) and for the main subpackages (their own ``__all__``)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent / "src" / "rewardsmith"

# (page, title, modules documented on it, what the page is for). A module that does not exist
# (yet) is left out, and a page with none of its modules is not written.
SUBPACKAGES: list[tuple[str, str, list[str], str]] = [
    ("advantages.md", "Advantages", ["rewardsmith.advantages"],
     "Exact GRPO-family advantages and the trainer emulation ([guide](../../advantages.md))."),
    ("judge.md", "Judges", ["rewardsmith.judge"],
     "LLM judges and reward models as rubric components ([guide](../../judge.md))."),
    ("rescore.md", "Rescoring and diffs", ["rewardsmith.jobs.rescore", "rewardsmith.analysis.diff"],
     "Rescore a stored run with a new rubric; compare two scorings "
     "([guide](../../rescoring.md))."),
    ("testing.md", "Testing rewards", ["rewardsmith.testing"],
     "Hand-labeled cases, edge cases and hack probes ([guide](../../testing-rewards.md))."),
    ("files.md", "Files and trajectories", ["rewardsmith.files", "rewardsmith.trajectory"],
     "The JSONL reader and atomic writes; multi-turn trajectories for rewards "
     "([data formats](../../data-formats.md))."),
    ("integrations.md", "Trainer adapters",
     ["rewardsmith.integrations.trl", "rewardsmith.integrations.verl",
      "rewardsmith.integrations.slime", "rewardsmith.integrations.miles",
      "rewardsmith.integrations.openrlhf", "rewardsmith.integrations.flyte"],
     "The functions each trainer calls ([trainers](../../trainers.md))."),
    ("server.md", "Reward server", ["rewardsmith.server"],
     "The HTTP reward server in Python ([guide](../../server.md))."),
    ("report.md", "Reports", ["rewardsmith.report"], "The HTML report of a run."),
    ("tracking.md", "Tracking", ["rewardsmith.tracking"], "Logging a run to experiment trackers."),
    ("analysis.md", "Gates and drift", ["rewardsmith.analysis"],
     "Gates between two runs and drift watch."),
]


def _exists(module: str) -> bool:
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        return False
    return spec is not None and spec.origin is not None  # a folder without __init__.py: not yet


def _facade_sources() -> dict[str, str]:
    """Name -> the module ``rewardsmith/__init__.py`` imports it from (its typing imports)."""
    tree = ast.parse((SOURCE / "__init__.py").read_text(encoding="utf-8"))
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                found[alias.asname or alias.name] = f"rewardsmith.{node.module}"
    return found


def _defined_at(name: str, facade: dict[str, str]) -> str:
    import rewardsmith

    obj = getattr(rewardsmith, name)
    module = getattr(obj, "__module__", "") or ""
    qualname = getattr(obj, "__qualname__", "") or ""
    if module.startswith("rewardsmith") and qualname and "<" not in qualname:
        return f"{module}.{qualname}"
    if name not in facade:
        raise ValueError(f"rewardsmith.{name}: cannot tell which module defines it")
    return f"{facade[name]}.{name}"


# Sections of the facade page, by the package that defines a name (its second path part).
_SECTIONS = [
    ("types", "The data model"), ("rubric", "Rubrics and rewards"), ("engine", "Scoring"),
    ("jobs", "Scoring"), ("files", "Files"), ("judge", "Judges"), ("mathcheck", "Math answers"),
    ("advantages", "Advantages"), ("analysis", "Gates and drift"), ("report", "Reports"),
    ("errors", "Errors"),
]


def facade_page(header: str) -> str:
    """Every public name documented at its public path (``rewardsmith.Rubric``), so that moving
    the module that defines it changes nothing here; grouped by the package that defines it."""
    import rewardsmith

    facade = _facade_sources()
    titles = dict(_SECTIONS)
    by_section: dict[str, list[str]] = {}
    for name in sorted(n for n in rewardsmith.__all__ if not n.startswith("__")):
        package = _defined_at(name, facade).split(".")[1]
        if package not in titles:
            raise ValueError(f"rewardsmith.{name} is defined in rewardsmith.{package}, which "
                             f"has no section in scripts/reference_api.py _SECTIONS")
        by_section.setdefault(titles[package], []).append(name)
    out = [header, "# `rewardsmith`\n\n",
           "Everything in `rewardsmith.__all__`: import these from `rewardsmith` itself "
           "(`from rewardsmith import Rubric`). The module that defines each may move; this "
           "path does not.\n\n"]
    for title in dict.fromkeys(t for _, t in _SECTIONS):
        if title not in by_section:
            continue
        out.append(f"## {title}\n\n")
        for name in by_section[title]:
            out.append(f"::: rewardsmith.{name}\n    options:\n      heading_level: 3\n\n")
    return "".join(out).rstrip() + "\n"


def api_pages(header: str) -> dict[str, str]:
    pages = {"rewardsmith.md": facade_page(header)}
    listed = ["- [`rewardsmith`](rewardsmith.md): the public names, imported from "
              "`rewardsmith`\n"]
    for page, title, modules, what in SUBPACKAGES:
        present = [m for m in modules if _exists(m)]
        if not present:
            continue
        out = [header, f"# {title}\n\n", what, "\n\n"]
        for module in present:
            out.append(f"::: {module}\n    options:\n      heading_level: 2\n      "
                       "show_submodules: false\n\n")
        pages[page] = "".join(out).rstrip() + "\n"
        listed.append(f"- [{title}]({page}): " + ", ".join(f"`{m}`" for m in present) + "\n")
    pages["index.md"] = (header + "# Python API reference\n\nGenerated from the docstrings by "
                         "mkdocstrings.\n\n" + "".join(listed))
    return pages
