"""MLflow: a run of its own in an experiment, or the run a trainer already started.

The tracking URI is any MLflow accepts (``http://host:5000``, ``sqlite:///mlflow.db``, ...);
a plain directory is a local file store. The client API (``MlflowClient``) is used rather than
``mlflow.start_run``, so rewardsmith never changes which run is active for the caller.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ..errors import ConfigError, LoadError
from .base import TrackerBase, TrackingError

__all__ = ["MlflowTracker", "tracking_uri_of"]

_BATCH = 1000  # MLflow's limit of metrics per log_batch call
# MLflow 3 refuses a file store unless this variable says the caller wants one.
_ALLOW_FILE_STORE = "MLFLOW_ALLOW_FILE_STORE"


def tracking_uri_of(location: str | os.PathLike[str] | None) -> str | None:
    """A URI as given (it has ``://`` or is ``file:``/``sqlite:``...), or a directory path as a
    ``file://`` URI (a local file store); None leaves MLflow's own default."""
    if location is None:
        return None
    text = os.fspath(location)
    if "://" in text or text.startswith(("file:", "sqlite:", "databricks")):
        return text
    return Path(text).expanduser().resolve().as_uri()


class MlflowTracker(TrackerBase):
    """Logs each step as a batch of metrics at that step.

    ``experiment`` is created when missing (default: MLflow's ``Default``). A directory as
    ``tracking_uri`` is a file store, which MLflow 3 accepts only with
    ``MLFLOW_ALLOW_FILE_STORE=true``: naming a directory asks for one, so that variable is set
    for this process unless it is set already. When ``attach`` is true and the caller has an
    active run (``mlflow.active_run()``, as a trainer's MLflow callback starts) in the same
    store (no ``tracking_uri``, or the caller's), the metrics go into that run under
    ``rewardsmith/`` and the run is left for its owner to end.
    """

    name = "mlflow"

    def __init__(self, experiment: str | None = None, run: str | None = None,
                 tracking_uri: str | os.PathLike[str] | None = None, *, attach: bool = True):
        super().__init__()
        try:
            from mlflow.tracking import MlflowClient
        except ImportError as exc:
            raise LoadError("logging to MLflow needs mlflow: pip install 'rewardsmith[mlflow]' "
                            "(or mlflow itself)") from exc
        uri = tracking_uri_of(tracking_uri)
        if uri is not None and uri.startswith("file:"):
            os.environ.setdefault(_ALLOW_FILE_STORE, "true")
        active = _active_run(uri) if attach else None
        self.attached = active is not None
        self.prefix = "rewardsmith/" if self.attached else ""
        try:
            if active is not None:
                self._client: Any = MlflowClient()
                self.run_id: str = active.info.run_id
                return
            self._client = MlflowClient(tracking_uri=uri)
            self.run_id = self._client.create_run(self._experiment_id(experiment),
                                                  run_name=run).info.run_id
        except Exception as exc:
            if isinstance(exc, (LoadError, ConfigError)):
                raise
            # MLflow raises its own exception types for a bad URI or an unreachable server.
            raise TrackingError(f"mlflow: cannot start a run at {uri or 'the default URI'}: "
                                f"{exc}") from exc

    def _experiment_id(self, name: str | None) -> str:
        if name is None:
            return "0"  # MLflow's Default experiment, present in every store
        found = self._client.get_experiment_by_name(name)
        if found is not None:
            return str(found.experiment_id)
        return str(self._client.create_experiment(name))

    def _write(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        rows = [Metric(f"{self.prefix}{key}", value, stamp, step)
                for key, value in metrics.items()]
        for start in range(0, len(rows), _BATCH):
            self._client.log_batch(self.run_id, metrics=rows[start:start + _BATCH])

    def _finish(self) -> None:
        if not self.attached:
            self._client.set_terminated(self.run_id)


def _active_run(uri: str | None) -> Any:
    """The caller's active run, when it lives where we were asked to log (anywhere, when no
    URI was given); a URI of its own asks for a run of its own."""
    import mlflow

    active = mlflow.active_run()
    if active is None or (uri is not None and uri != mlflow.get_tracking_uri()):
        return None
    return active
