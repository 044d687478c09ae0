"""Every fenced block of README.md and docs/*.md runs here, or is marked as not runnable.

Page by page, in a fresh workspace, the blocks run in order (tests/docs_fixtures/runner.py):
files are written, commands and Python run with this project's environment, rubrics load, and
the output a page shows is checked against what its rubric and commands make. A block that
cannot run here (a GPU trainer, a cluster, a hosted API) carries `<!-- not-run: reason -->`
right before it. What a page needs that it does not show is in tests/docs_fixtures/pages.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from docs_fixtures.markdown import doc_pages, read_page, shell_commands
from docs_fixtures.pages import PAGES, setup_for
from docs_fixtures.runner import ROOT, PageSetup, block_kind, run_page

_ALL = doc_pages(ROOT)


def _runnable(page: str) -> bool:
    setup = setup_for(page)
    return any(block_kind(block, setup) != "not-run" for block in read_page(ROOT, page).blocks)


def test_every_block_is_run_or_marked_with_a_reason() -> None:
    problems: list[str] = []
    for page in _ALL:
        parsed = read_page(ROOT, page)
        setup = setup_for(page)
        problems += [f"{page}:{line}: a not-run marker before no block" for line in
                     parsed.stray_markers]
        for block in parsed.blocks:
            kind = block_kind(block, setup)
            if kind == "none":
                problems.append(f"{block.where}: a {block.lang or 'plain'} block that is "
                                "neither run nor marked <!-- not-run: reason -->")
            elif kind == "not-run" and not block.not_run:
                problems.append(f"{block.where}: a not-run marker without its reason")
    assert not problems, "\n".join(problems)


def test_page_setups_name_pages_that_exist() -> None:
    assert set(PAGES) <= set(_ALL), sorted(set(PAGES) - set(_ALL))


@pytest.mark.parametrize("page", [
    pytest.param(page, marks=[pytest.mark.slow] if setup_for(page).slow else [])
    for page in _ALL if _runnable(page)])
@pytest.mark.timeout(300)
def test_page_blocks_run(page: str, tmp_path: Path) -> None:
    run_page(page, setup_for(page), tmp_path / "workspace")


# The checks catch what they are for: pages written here, false in one way each.

_RUBRIC = """```yaml
# rubric.yaml
components:
  correct: {reward: gsm8k, weight: 1.0}
  format:  {reward: marker, weight: 0.5}
```
"""


def _page(tmp_path: Path, text: str) -> Path:
    root = tmp_path / "site"
    (root / "docs").mkdir(parents=True)
    (root / "docs/page.md").write_text(text, encoding="utf-8")
    return root


def _fails(tmp_path: Path, text: str, setup: PageSetup | None = None) -> str:
    root = _page(tmp_path, text)
    with pytest.raises(AssertionError) as failure:
        run_page("docs/page.md", setup or PageSetup(), tmp_path / "workspace", root=root)
    return str(failure.value)


def test_a_scored_line_that_does_not_follow_from_the_rubric_fails(tmp_path: Path) -> None:
    missing = _fails(tmp_path / "a", _RUBRIC + """```json
{"id": "a", "reward": 1.5, "status": "ok", "components": {"correct": 1.0}, "errors": {}}
```
""")
    assert "has components ['correct']; the rubric above" in missing
    wrong_total = _fails(tmp_path / "b", _RUBRIC + """```json
{"id": "a", "reward": 1.25, "status": "ok", "components": {"correct": 1.0, "format": 1.0}}
```
""")
    assert "says reward 1.25; its components make 1.5" in wrong_total


def test_a_block_neither_run_nor_marked_fails_and_a_marker_needs_a_reason(
        tmp_path: Path) -> None:
    assert "neither run nor marked" in _fails(tmp_path / "a", "```\nsome output\n```\n")
    root = _page(tmp_path / "b", "<!-- not-run -->\n```sh\nfalse\n```\n\n<!-- not-run: x -->\n"
                                 "Prose between.\n\n```sh\ntrue\n```\n")
    page = read_page(root, "docs/page.md")
    assert [b.not_run for b in page.blocks] == ["", None]
    assert page.stray_markers == [6]


def test_a_failing_command_or_a_wrong_shown_value_fails(tmp_path: Path) -> None:
    assert "exited 3, expected 0" in _fails(tmp_path / "a", "```sh\nexit 3\n```\n")
    assert "exited 0, expected 1" in _fails(tmp_path / "b", "```sh\ntrue\n```\n",
                                            PageSetup(exit_codes={"true": 1}))
    shown = _fails(tmp_path / "c", "```python\nsum([1, 2])   # 4\n```\n")
    assert "the page shows 4, the code gives 3" in shown


def test_commands_join_continuations_and_quoted_lines() -> None:
    text = "# a comment\nrewardsmith a \\\n  --b c   # says\ncurl -d '{\"x\":\n  1}'\n\nls\n"
    assert shell_commands(text) == ["rewardsmith a    --b c   # says",
                                    "curl -d '{\"x\":\n  1}'", "ls"]
