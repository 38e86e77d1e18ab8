"""KSUIDs: the lake's ids for commits, data objects, staged work and pools.

A KSUID is 27 base-62 characters: a 32-bit second-resolution timestamp and 128 random bits.
Sorting KSUIDs sorts them roughly by creation time, but the lake never relies on that for
causality (clocks skew); order comes from the journal.
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime

from ksuid import Ksuid

from lake_core.clock import SYSTEM_CLOCK, Clock

KSUID_LENGTH = 27
_KSUID_RE = re.compile(r"^[0-9A-Za-z]{27}$")


def new_id(clock: Clock = SYSTEM_CLOCK) -> str:
    """A fresh KSUID stamped with ``clock``'s time."""
    return ksuid_text(clock.now(), secrets.token_bytes(16))


#: KSUID's epoch (seconds after the Unix epoch) and base-62 digits, as the ``ksuid`` package
#: encodes them (tests/core/test_ids.py compares the two).
_KSUID_EPOCH = 1_400_000_000
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
#: Every 2-digit base-62 string, by value: a KSUID is 13 of them and one digit, 13 divisions
#: instead of 27. (A table of 3-digit strings saves another microsecond per id but takes 45 ms
#: to build, which every CLI process would pay at import.)
_PAIRS = [a + b for a in _BASE62 for b in _BASE62]


def ksuid_text(when: datetime, payload: bytes) -> str:
    """The KSUID of time ``when`` and 16 bytes ``payload``: what ``str(Ksuid(datetime=when,
    payload=payload))`` gives, at a tenth of its cost (a commit makes two ids)."""
    stamp = int(when.timestamp() - _KSUID_EPOCH)
    n = int.from_bytes(stamp.to_bytes(4, "big") + payload, "big")
    digits = []
    for _ in range(13):
        n, r = divmod(n, 3_844)  # 62 ** 2
        digits.append(_PAIRS[r])
    digits.append(_BASE62[n])  # n < 62: 27 digits in all
    return "".join(reversed(digits))


def ksuid_time(text: str) -> datetime:
    """The creation time (second resolution, UTC) embedded in a KSUID."""
    return Ksuid.from_base62(text).datetime


def is_ksuid(text: str) -> bool:
    """Whether ``text`` has the shape of a KSUID (27 base-62 characters)."""
    return bool(_KSUID_RE.match(text))
