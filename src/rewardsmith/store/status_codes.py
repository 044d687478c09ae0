"""The one integer encoding of ``Status``: how statuses travel between processes and how the
store keeps them on disk.

The numbers are part of the store's file format: never renumber one. A new status gets the next
number and ``STATUS_ENCODING_VERSION`` goes up; the store records the version it was written
with and refuses one it does not know.
"""

from __future__ import annotations

from rewardsmith.types import Status

__all__ = ["STATUS_CODES", "STATUS_ENCODING_VERSION", "code_of", "status_of"]

STATUS_ENCODING_VERSION = 1
STATUS_CODES: tuple[Status, ...] = (Status.OK, Status.ERROR, Status.TIMEOUT, Status.MASKED)
_CODE_OF: dict[Status, int] = {status: code for code, status in enumerate(STATUS_CODES)}


def code_of(status: Status) -> int:
    """The integer for ``status``."""
    return _CODE_OF[status]


def status_of(code: int) -> Status:
    """The status for an integer; ``ValueError`` naming the code when it is not one."""
    if type(code) is not int or not 0 <= code < len(STATUS_CODES):
        raise ValueError(f"status code {code!r} is not one of 0..{len(STATUS_CODES) - 1} "
                         f"(status encoding version {STATUS_ENCODING_VERSION})")
    return STATUS_CODES[code]
