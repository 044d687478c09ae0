"""Before launch: does this environment load the rubric and the reward the trainer will call?

A trainer imports its reward in its own processes (slime and Miles in Ray workers, with the
runtime environment's ``env_vars`` and ``PYTHONPATH``), and a reward that cannot be imported there
shows up only once the run is up: slime logs the ``ModuleNotFoundError`` and the job can sit for
hours with no rollout step. :func:`check_environment` does, in the calling process, what the
adapter does at its first call (choose the rubric as the adapters do, build it, import every
reward, start the sandbox check of code rewards) and imports the ``--custom-rm-path`` as slime
does; :func:`check_in_ray` runs the same in a Ray task with the trainer's runtime environment.
``rewardsmith check-env`` prints either.
"""

from __future__ import annotations

import importlib
import inspect
import os
import platform
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from rewardsmith.errors import RewardsmithError
from rewardsmith.integrations.adapters import ENV_RUBRIC, rubric_for

__all__ = ["EnvReport", "Finding", "check_environment", "check_in_ray"]


@dataclass(frozen=True)
class Finding:
    """One thing checked: what, whether it is fine, and what was found (or what to fix)."""

    what: str
    ok: bool
    detail: str


@dataclass
class EnvReport:
    """What :func:`check_environment` found, in one process."""

    where: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(finding.ok for finding in self.findings)

    def add(self, what: str, ok: bool, detail: str) -> None:
        self.findings.append(Finding(what, ok, detail))

    def to_dict(self) -> dict[str, Any]:
        return {"where": self.where, "ok": self.ok,
                "findings": [asdict(finding) for finding in self.findings]}


def _source_file(func: Any) -> str:
    try:
        return inspect.getsourcefile(func) or "?"
    except TypeError:
        return "?"


def _check_rubric(report: EnvReport, rubric: str | None) -> None:
    chosen = rubric or os.environ.get(ENV_RUBRIC, "").strip() or None
    if chosen is None:
        report.add("rubric", False, f"none chosen: set {ENV_RUBRIC} in the trainer's environment "
                   "(for Ray workers: --runtime-env-json '{\"env_vars\": {...}}') or pass --rubric")
        return
    try:
        built = rubric_for(rubric)  # None: REWARDSMITH_RUBRIC, named as such in errors
    except (RewardsmithError, ImportError, OSError, ValueError) as exc:
        report.add("rubric", False, str(exc))
        return
    report.add("rubric", True, f"{built.name!r} from {chosen} (id {built.id})")
    for component in built.components:
        if component.evaluator is not None:
            detail = f"evaluator {type(component.evaluator).__name__} (its endpoint is checked "
            detail += "when scoring starts)"
        else:
            detail = f"{component.spec or component.reward} ({_source_file(component.func)})"
        report.add(f"component {component.name}", True, detail)


def _check_custom_rm(report: EnvReport, path: str) -> None:
    """Import ``module.attr`` as slime's ``load_function`` does, and check what it finds."""
    module_name, _, attr = path.strip().rpartition(".")
    if not module_name or not attr:
        report.add("custom_rm", False, f"{path!r}: expected module.function, as slime's "
                   "--custom-rm-path takes it")
        return
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - whatever the import raises is the finding
        report.add("custom_rm", False, f"cannot import {module_name!r}: {type(exc).__name__}: "
                   f"{exc}. Python searched: {', '.join(sys.path) or '(nothing)'}. Add the folder "
                   f"that holds it to PYTHONPATH (for Ray workers: in the runtime env's env_vars)")
        return
    func = getattr(module, attr, None)
    if not callable(func):
        report.add("custom_rm", False, f"{module_name} ({_source_file(module)}) has no function "
                   f"{attr!r}")
        return
    if not inspect.iscoroutinefunction(func):
        report.add("custom_rm", False, f"{path} is a plain function; slime and Miles await the "
                   "reward, so write it with async def")
        return
    report.add("custom_rm", True, f"{path} ({_source_file(func)}), async")


def check_environment(rubric: str | None = None, custom_rm_path: str | None = None,
                      where: str = "this process") -> EnvReport:
    """Check this process: the rubric the adapters would use (``rubric`` or
    ``REWARDSMITH_RUBRIC``), every reward in it, and ``custom_rm_path`` imported as slime does."""
    import rewardsmith

    report = EnvReport(where)
    report.add("python", True, f"{platform.python_version()} at {sys.executable}")
    report.add("rewardsmith", True, f"{rewardsmith.__version__} at "
               f"{os.path.dirname(rewardsmith.__file__)}")
    report.add("working directory", True, os.getcwd())
    report.add("PYTHONPATH", True, os.environ.get("PYTHONPATH", "") or "(not set)")
    settings = sorted((k, v) for k, v in os.environ.items() if k.startswith("REWARDSMITH_"))
    report.add("settings", True, ", ".join(f"{k}={v}" for k, v in settings)
               or "(no REWARDSMITH_ variables)")
    if custom_rm_path:
        _check_custom_rm(report, custom_rm_path)
    _check_rubric(report, rubric)
    return report


def _in_worker(rubric: str | None, custom_rm_path: str | None) -> dict[str, Any]:
    node = platform.node()
    return check_environment(rubric, custom_rm_path, where=f"a Ray worker on {node}").to_dict()


def check_in_ray(rubric: str | None = None, custom_rm_path: str | None = None, *,
                 runtime_env: dict[str, Any] | None = None,
                 address: str | None = None) -> EnvReport:
    """:func:`check_environment` in a Ray task started with ``runtime_env`` (the trainer's
    ``--runtime-env-json``), on the cluster at ``address`` (default: a local one, or
    ``RAY_ADDRESS``)."""
    try:
        import ray
    except ImportError as exc:
        raise RewardsmithError("checking inside Ray needs ray: pip install "
                               "'rewardsmith[ray]'") from exc
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, runtime_env=runtime_env, include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    try:
        task = ray.remote(num_cpus=0)(_in_worker)
        if not started and runtime_env is not None:
            task = task.options(runtime_env=runtime_env)
        data = ray.get(task.remote(rubric, custom_rm_path))
    finally:
        if started:
            ray.shutdown()
    report = EnvReport(str(data["where"]))
    for finding in data["findings"]:
        report.add(str(finding["what"]), bool(finding["ok"]), str(finding["detail"]))
    return report
