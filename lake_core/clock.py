"""Time and sleep, injectable so retention, retries and id ordering are testable without sleeping."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Where the lake gets the time (always tz-aware UTC) and how it waits."""

    def now(self) -> datetime: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


SYSTEM_CLOCK = SystemClock()


def to_iso(dt: datetime) -> str:
    """ISO 8601 UTC with microseconds and a ``Z``: the one way the lake prints a timestamp."""
    u = dt.astimezone(UTC)
    return f"{u.year:04d}-" + u.strftime("%m-%dT%H:%M:%S.%fZ")


def parse_iso(text: str) -> datetime:
    """Parse an ISO 8601 time; naive times are taken as UTC. Raises ValueError (also for a
    time that is out of range once converted to UTC, e.g. year 9999 west of Greenwich)."""
    s = text.strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    dt = datetime.fromisoformat(s)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    try:
        return dt.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"time {text!r} is out of range") from None
