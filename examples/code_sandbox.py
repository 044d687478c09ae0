"""Code rewards: model-written programs run against tests inside the bubblewrap sandbox.

Five completions for one stdin/stdout task (sum the numbers on each line): a right program, a
wrong one, one that loops forever, one that reads an API key from the environment and one that
tries to reach a server listening on this machine. The last two print what they find instead
of the answers, so their full marks show they found no key and no network: the sandbox has an
empty environment and a network namespace of its own. The loop costs one time limit, then its remaining tests are skipped.

    python examples/code_sandbox.py

Needs bubblewrap (``make test`` installs it; ``apt-get install -y bubblewrap``): without it the
rubric is refused when it loads, with the command to run. Nothing falls back to running the
programs on this machine.
"""

from __future__ import annotations

import json
import os
import socket
import sys

from rewardsmith import Rollout, Rubric, score_rollouts

FENCE = "`" * 3
TESTS = {"inputs": ["1 2 3\n", "10 -4\n", "7\n"], "outputs": ["6\n", "6\n", "7\n"]}

RIGHT = "import sys\nfor line in sys.stdin:\n    print(sum(int(x) for x in line.split()))\n"
WRONG = "import sys\nfor line in sys.stdin:\n    print(max(int(x) for x in line.split()))\n"
LOOPS = "while True:\n    pass\n"
# These two print what they found instead of the sums, so a full reward shows they found nothing.
STEALS_KEY = (
    "import os, sys\n"
    "if os.environ.get('OPENAI_API_KEY'):\n"
    "    print(os.environ['OPENAI_API_KEY'])\n"
    "    sys.exit(0)\n" + RIGHT)
CALLS_HOME = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'x')\n"
    "    print('connected')\n"
    "    sys.exit(0)\n"
    "except OSError:\n"
    "    pass\n" + RIGHT)


def completion(program: str) -> str:
    return f"Here is my solution:\n\n{FENCE}python\n{program}{FENCE}\n"


def main() -> int:
    os.environ["OPENAI_API_KEY"] = "sk-example-secret"  # in the host's environment only
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0)
    port = listener.getsockname()[1]

    rubric = Rubric.single("code", params={"language": "python", "time_limit": 2})
    programs = {"right": RIGHT, "wrong": WRONG, "loops": LOOPS, "steals-key": STEALS_KEY,
                "calls-home": CALLS_HOME.format(port=port)}
    rollouts = [Rollout(id=name, group="sum-lines", prompt="Sum the numbers on each line.",
                        completion=completion(program), answer=json.dumps(TESTS))
                for name, program in programs.items()]
    scores = score_rollouts(rubric, rollouts, workers=2)

    try:
        listener.accept()
        reached = True
    except BlockingIOError:
        reached = False
    finally:
        listener.close()

    for score in scores:
        metrics = {k.split(".", 1)[1]: int(v) for k, v in score.metrics.items()}
        print(f"{score.id:11} reward {score.reward:.2f}  status {score.status}  "
              f"passed {metrics.get('passed')}/{metrics.get('total')}  timeouts "
              f"{metrics.get('timeouts')}  skipped {metrics.get('skipped')}")
    rewards = {score.id: round(score.reward or 0.0, 4) for score in scores}
    expected = {"right": 1.0, "wrong": 0.3333, "loops": 0.0, "steals-key": 1.0, "calls-home": 1.0}
    if rewards != expected or reached:
        print(f"unexpected: rewards {rewards}, host port reached: {reached}", file=sys.stderr)
        return 1
    print("the host's port was never reached; the key never entered the sandbox")
    return 0


if __name__ == "__main__":
    sys.exit(main())
