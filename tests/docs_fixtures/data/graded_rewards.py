# A reward module for the pages on testing rewards: `score` grades the last number of the
# completion against the answer's, and `custom_rm` is the same reward as slime and Miles call it.
import re

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def score(completion: str, answer: str) -> float:
    """1.0 when the completion's last number equals the answer's; a missing label is an error."""
    if answer is None:
        raise ValueError("missing label")
    said = _NUMBER.findall(completion)
    wanted = _NUMBER.findall(str(answer))
    if not said or not wanted:
        return 0.0
    return float(float(said[-1].replace(",", "")) == float(wanted[-1].replace(",", "")))


async def custom_rm(args, sample) -> float:
    return score(sample.response, sample.label)
