"""``rewardsmith`` on the command line. Each verb lives in its own module and stays thin:
build the library object, call one method, map errors to a message and an exit status."""

from __future__ import annotations

from . import advantages_cmd as _advantages_cmd  # noqa: F401
from . import check_env_cmd as _check_env_cmd  # noqa: F401
from . import diff_cmd as _diff_cmd  # noqa: F401
from . import drift_cmd as _drift_cmd  # noqa: F401
from . import gate_cmd as _gate_cmd  # noqa: F401
from . import judge_eval_cmd as _judge_eval_cmd  # noqa: F401
from . import judge_serve_cmd as _judge_serve_cmd  # noqa: F401
from . import list_cmd as _list_cmd  # noqa: F401
from . import log_cmd as _log_cmd  # noqa: F401
from . import report_cmd as _report_cmd  # noqa: F401
from . import rescore_cmd as _rescore_cmd  # noqa: F401
from . import score_cmd as _score_cmd  # noqa: F401
from . import serve_cmd as _serve_cmd  # noqa: F401
from . import test_cmd as _test_cmd  # noqa: F401
from ._app import app

__all__ = ["app", "main"]


def main() -> None:
    app()
