"""Miles (the slime fork) uses slime's reward contract:
``--custom-rm-path rewardsmith.integrations.miles.custom_rm`` (or ``...slime.custom_rm``).

See ``rewardsmith.integrations.slime`` for the arguments, the return value and masking.
"""

from __future__ import annotations

from rewardsmith.integrations.slime import (
    ENV_MASKED_REWARD,
    MASKED_STATES,
    custom_rm,
    masked_reward,
    sample_state,
)

__all__ = ["ENV_MASKED_REWARD", "MASKED_STATES", "custom_rm", "masked_reward", "sample_state"]
