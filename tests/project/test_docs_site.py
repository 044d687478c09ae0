"""The documentation site builds strictly, every page is reachable, and the README's links hold."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _nav_pages(node: object) -> set[str]:
    if isinstance(node, str):
        return {node}
    if isinstance(node, list):
        return set().union(*(_nav_pages(item) for item in node)) if node else set()
    if isinstance(node, dict):
        return set().union(*(_nav_pages(value) for value in node.values()))
    return set()


def _mkdocs_config() -> dict[str, object]:
    # mkdocs.yml holds no custom YAML tags, so the safe loader reads it.
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert isinstance(config, dict)
    return config


def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=240, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "index.html").is_file()
    assert (tmp_path / "reference" / "api" / "rewardsmith.html").is_file()


def test_every_page_is_in_the_navigation() -> None:
    nav = _nav_pages(_mkdocs_config()["nav"])
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert not pages - nav, f"pages missing from mkdocs.yml's nav: {sorted(pages - nav)}"
    assert not nav - pages, f"nav entries without a page: {sorted(nav - pages)}"


def test_the_build_needs_no_network() -> None:
    config = _mkdocs_config()
    names = {next(iter(p)) if isinstance(p, dict) else p for p in config["plugins"]}  # type: ignore[union-attr]
    assert not names & {"social", "privacy", "optimize"}, "plugins that fetch from the network"
    assert config["theme"]["font"] is False  # type: ignore[index]


def _github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation but - and _ dropped,
    spaces as hyphens (the same as this site's, for the headings used here)."""
    anchors = set()
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def test_readme_links_point_at_files_and_headings_that_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [t for t in _LINK.findall(readme) if not t.startswith(("http://", "https://", "#"))]
    assert targets, "the README links into the docs"
    for target in targets:
        file, _, anchor = target.partition("#")
        path = (ROOT / file).resolve()
        assert path.exists(), f"README links to {target}, which does not exist"
        if anchor:
            anchors = _github_anchors(path.read_text(encoding="utf-8"))
            assert anchor in anchors, f"README links to {target}: no such heading in {file}"


def test_readme_keeps_the_quickstart_commands_and_the_makefile_has_them() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("demo", "test", "test-slow", "check", "docs", "reference"):
        assert re.search(rf"^{re.escape(target)}:", makefile, re.MULTILINE), target
    for command in ("make demo", "make test", "make check", "make test-slow", "make docs"):
        assert command in readme, command


def test_the_site_shows_pipes_in_table_code_as_github_does() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from mkdocs_hooks import unescape_pipes_in_table_code
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    page = "\n".join([
        "| option | values |", "|---|---|", "| `--mode a\\|b` | a \\| b, `x\\|y` |",
        "```", "| `kept\\|as is` | in a fence |", "```", "text `c\\|d` outside a table"])
    assert unescape_pipes_in_table_code(page).split("\n") == [
        "| option | values |", "|---|---|", "| `--mode a|b` | a \\| b, `x|y` |",
        "```", "| `kept\\|as is` | in a fence |", "```", "text `c\\|d` outside a table"]
