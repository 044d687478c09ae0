"""Operating-system and runtime helpers that know nothing of rewards: who runs a job, the
garbage collector held off, a hard deadline for an awaitable, and what a reward does to its
process kept inside its own call."""
