"""A reward of about a millisecond of CPU per call, for ``bench_ray.py``."""

from __future__ import annotations

import hashlib


def millisecond(completion: str, answer: str) -> float:
    """About 1 ms of hashing (calibrated on a 2-core machine), then an exact match."""
    digest = completion.encode()
    for _ in range(300):
        digest = hashlib.sha256(digest).digest()
    return 1.0 if completion.strip().endswith(str(answer)) and digest else 0.0
