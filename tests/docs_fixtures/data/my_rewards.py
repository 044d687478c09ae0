# The reward the README and docs/writing-rewards.md show, for pages that name it without
# showing it.
import re


def cites_a_source(completion: str, metadata: dict) -> float:
    return 1.0 if re.search(r"\[\d+\]", completion) else 0.0
