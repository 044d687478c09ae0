"""Shared set-up for the repository-tests suites: a pytest environment the sandbox can read,
and the real sandbox (these tests fail without it unless REWARDSMITH_SKIP_SANDBOX_TESTS=1)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from rewardsmith.sandbox import SandboxUnavailable, get_sandbox
from rewardsmith.sandbox.pytest_env import make_pytest_environment


def require_sandbox() -> None:
    try:
        get_sandbox("bubblewrap").check("python")
    except SandboxUnavailable as exc:
        if os.environ.get("REWARDSMITH_SKIP_SANDBOX_TESTS") == "1":
            pytest.skip(f"no sandbox on this machine: {exc}")
        pytest.fail(f"these tests need the real sandbox: {exc}")


def pytest_environment() -> Iterator[str]:
    """A virtualenv with pytest under /tmp, readable by the sandbox's user; removed after."""
    folder = tempfile.mkdtemp(prefix="rs-repo-env-", dir="/tmp")
    os.chmod(folder, 0o755)
    try:
        yield make_pytest_environment(os.path.join(folder, "venv"))
    except RuntimeError as exc:
        pytest.skip(f"cannot make a pytest environment here: {exc}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
