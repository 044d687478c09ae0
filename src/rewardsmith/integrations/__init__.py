"""One rubric for every trainer: adapters that call rewardsmith the way each trainer calls rewards.

=================  =====================================================================
trainer            use
=================  =====================================================================
TRL                ``GRPOTrainer(reward_funcs=trl_reward_funcs("rubric.yaml"))``
verl               ``reward.custom_reward_function.path=pkg://rewardsmith.integrations.verl``
slime / Miles      ``--custom-rm-path rewardsmith.integrations.slime.custom_rm``
OpenRLHF           ``--reward.remote_url`` the file of ``rewardsmith.integrations.openrlhf``
                   or ``http://HOST:PORT/get_reward`` of ``rewardsmith serve``
=================  =====================================================================

None of them imports its trainer. The rubric comes from the adapter's argument, the
environment variable ``REWARDSMITH_RUBRIC``, or a sample's own ``rubric``. Every adapter cuts
end-of-turn texts from the completion's end (``rewardsmith.integrations.endtext``) and logs a component named
like a trainer's own key as ``component_<name>``, so one rubric gives the same reward and the
same logged values in every trainer.

Each scoring call an adapter makes can also be one step of a W&B, MLflow or TensorBoard run:
``rewardsmith.tracking.track_scoring(tracker)``, ``trl_reward_funcs(..., tracker=...)``, or
``REWARDSMITH_LOG_TO`` in the trainer workers' environment (see docs/tracking.md).
"""

from __future__ import annotations

from .adapters import ENV_RUBRIC, ENV_WORKERS, close_engines, engine_for, rubric_for
from .openrlhf import reward_func as openrlhf_reward_func
from .slime import custom_rm as slime_custom_rm
from .trl import RewardFuncs, trl_reward_funcs
from .verl import compute_score as verl_compute_score

__all__ = [
    "ENV_RUBRIC",
    "ENV_WORKERS",
    "RewardFuncs",
    "close_engines",
    "engine_for",
    "openrlhf_reward_func",
    "rubric_for",
    "slime_custom_rm",
    "trl_reward_funcs",
    "verl_compute_score",
]
