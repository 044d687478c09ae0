"""The names of the kinds of reward ``rewardsmith test`` knows (see ``kinds``): here alone, so
that the CLI's help can list them without building the kinds themselves."""

from __future__ import annotations

__all__ = ["AGENT_KINDS", "CODE_KINDS", "FORMAT_KINDS", "HARBOR_KINDS", "KIND_NAMES",
           "REPO_KINDS", "STRUCTURED_KINDS", "VERIFIER_KINDS"]

VERIFIER_KINDS = ("number", "number-marker", "number-boxed", "text", "text-boxed", "choice",
                  "choice-boxed")
FORMAT_KINDS = ("marker", "think", "length", "pattern")
# Instruction-following and structured output (see kinds.structured_kinds).
STRUCTURED_KINDS = ("ifeval", "json-schema", "json-match", "tool-call")
CODE_KINDS = ("code",)  # programs run against tests (see kinds.code_kinds)
# Agent trajectories: tools, turns, files (see kinds.agent_kinds).
AGENT_KINDS = ("tool-use", "turn-budget", "workspace-files")
# An agent's final workspace graded by a task's own verifier script (see kinds.harbor_kinds).
HARBOR_KINDS = ("harbor-task",)
# A repository's tests after the agent's diff (see kinds.repo_kinds).
REPO_KINDS = ("repo-task",)
KIND_NAMES: tuple[str, ...] = (*VERIFIER_KINDS, *FORMAT_KINDS, *STRUCTURED_KINDS, *CODE_KINDS,
                               *AGENT_KINDS, *HARBOR_KINDS, *REPO_KINDS)
