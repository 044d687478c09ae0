"""Rewards for agents: how a multi-turn trajectory used its tools, its turns and its workspace.

``tool_calls`` (every call names a declared tool with arguments valid for its JSON schema),
``turn_budget`` (full credit up to N turns, falling linearly to 0 at M) and ``workspace_files``
(the files the agent wrote against an allowed list). A trajectory is a completion given as
OpenAI chat messages with ``tool_calls`` and ``tool`` replies (see ``rewardsmith.trajectory``).
"""

from __future__ import annotations

from .trajectory_rewards import tool_calls, turn_budget, workspace_files

__all__ = ["tool_calls", "turn_budget", "workspace_files"]
