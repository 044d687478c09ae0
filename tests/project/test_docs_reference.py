"""The generated reference pages match the code, and nothing the code reads goes undocumented."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
SCRIPTS = ROOT / "scripts"


@pytest.fixture(scope="module")
def reference_modules() -> object:
    sys.path.insert(0, str(SCRIPTS))
    try:
        import reference_env
        import reference_models
        import reference_rewards
        import reference_text

        yield reference_env, reference_models, reference_text, reference_rewards
    finally:
        sys.path.remove(str(SCRIPTS))


def test_committed_reference_pages_are_what_the_generator_writes_now() -> None:
    result = subprocess.run([sys.executable, str(SCRIPTS / "gen_reference.py"), "--check"],
                            capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, (
        "docs/reference/ is stale: run `make reference` and commit docs/reference/.\n"
        + result.stderr)


def test_every_environment_variable_read_in_the_source_is_described(reference_modules) -> None:
    reference_env, _, reference_text, _ = reference_modules
    reads = reference_env.find_env_reads()
    undocumented = set(reads.by_name) - set(reference_text.ENVIRONMENT)
    assert not undocumented, (
        f"environment variables read in src/ but not described in scripts/reference_text.py "
        f"(ENVIRONMENT): {sorted(undocumented)}; add them, then run `make reference`")
    by_user = set(reads.by_user_name) - set(reference_text.ENVIRONMENT_BY_USER_NAME)
    assert not by_user, f"modules reading a variable named at run time, undescribed: {by_user}"
    assert {"REWARDSMITH_RUBRIC", "REWARDSMITH_BACKEND", "REWARDSMITH_WORKERS"} <= set(reads.by_name)


def test_the_environment_scanner_finds_every_way_of_reading(reference_modules, tmp_path) -> None:
    reference_env = reference_modules[0]
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "names.py").write_text('SHARED = "PKG_SHARED"\n')
    (package / "reads.py").write_text(textwrap.dedent("""
        import os
        from os import environ, getenv
        from .names import SHARED
        from . import names
        LOCAL: str = "PKG_LOCAL"
        a = os.environ.get("PKG_LITERAL", "")
        b = os.environ[LOCAL]
        c = os.getenv(SHARED)
        d = "PKG_IN" in os.environ
        e = getenv("PKG_BARE")
        f = environ.get(names.SHARED)
        def user(name):
            return os.environ.get(name)
        os.environ["PKG_WRITTEN"] = "1"      # a write, not a read
    """))
    reads = reference_env.find_env_reads(package)
    assert set(reads.by_name) == {"PKG_LITERAL", "PKG_LOCAL", "PKG_SHARED", "PKG_IN", "PKG_BARE"}
    assert len(reads.by_name["PKG_SHARED"]) == 2
    assert list(reads.by_user_name) == ["pkg.reads"]


def test_every_rubric_key_is_on_the_rubric_page(reference_modules) -> None:
    reference_models = reference_modules[1]
    from rewardsmith.judge.config import JudgeConfig
    from rewardsmith.rubric._model import _ComponentModel, _RubricModel

    page = reference_models.rubric_page("", lambda text: text)
    for model in (_RubricModel, _ComponentModel, JudgeConfig):
        for key in model.model_fields:
            assert f"| `{key}` |" in page, f"rubric key {key!r} ({model.__name__}) not on the page"


def test_a_key_without_a_description_stops_the_generator(reference_modules, monkeypatch) -> None:
    _, reference_models, reference_text, _ = reference_modules
    trimmed = dict(reference_text.RUBRIC_KEYS)
    del trimmed[("component", "weight")]
    monkeypatch.setattr(reference_models, "RUBRIC_KEYS", trimmed)
    with pytest.raises(ValueError, match=r"component\.weight"):
        reference_models.rubric_page("", lambda text: text)


def test_every_param_of_every_built_in_is_described(reference_modules, monkeypatch) -> None:
    reference_rewards = reference_modules[3]
    page = reference_rewards.rewards_page("", lambda text: text)
    assert "| `time_limit` | float | `4.0` |" in page  # code's param, with its default
    assert page.count("## boxed_number\n") == 1
    trimmed = dict(reference_rewards.BUILTIN_PARAMS)
    del trimmed[("regex", "pattern")]
    monkeypatch.setattr(reference_rewards, "BUILTIN_PARAMS", trimmed)
    with pytest.raises(ValueError, match=r"regex\.pattern"):
        reference_rewards.rewards_page("", lambda text: text)


def test_cli_reference_has_every_verb() -> None:
    import typer

    from rewardsmith.cli import app

    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    for verb in typer.main.get_command(app).commands:  # type: ignore[attr-defined]
        assert f"## rewardsmith {verb}\n" in page, f"`rewardsmith {verb}` missing: run make reference"
    assert "\x1b[" not in page, "colour codes in the CLI reference"
    assert max(len(line) for line in page.splitlines() if line.startswith(("│", "╭", "╰"))) <= 100
