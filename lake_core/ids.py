"""KSUIDs: the lake's ids for commits, data objects, staged work and pools.

A KSUID is 27 base-62 characters: a 32-bit second-resolution timestamp and 128 random bits.
Sorting KSUIDs sorts them roughly by creation time, but the lake never relies on that for
causality (clocks skew); order comes from the journal.
"""

from __future__ import annotations

import re
from datetime import datetime

from ksuid import Ksuid

from lake_core.clock import SYSTEM_CLOCK, Clock

KSUID_LENGTH = 27
_KSUID_RE = re.compile(r"^[0-9A-Za-z]{27}$")


def new_id(clock: Clock = SYSTEM_CLOCK) -> str:
    """A fresh KSUID stamped with ``clock``'s time."""
    return str(Ksuid(datetime=clock.now()))


def ksuid_time(text: str) -> datetime:
    """The creation time (second resolution, UTC) embedded in a KSUID."""
    return Ksuid.from_base62(text).datetime


def is_ksuid(text: str) -> bool:
    """Whether ``text`` has the shape of a KSUID (27 base-62 characters)."""
    return bool(_KSUID_RE.match(text))
