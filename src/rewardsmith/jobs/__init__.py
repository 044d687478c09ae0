"""The jobs the command line and the service run: ``score`` (rollouts in, scored file out),
``rescore`` (a stored run with a new rubric, computing only what changed), ``recording`` (runs
into the store) and ``summary`` (what a run did, in numbers)."""
