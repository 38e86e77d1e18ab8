"""A fake clock for tests of time-dependent history (vacate, cleanup, journal ages)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class FakeClock:
    """Starts at the real time (so files' real modification times are "now" too) and moves
    only when told to (``advance``) or when the code under test sleeps."""

    def __init__(self) -> None:
        self.t = datetime.now(UTC).replace(microsecond=0)

    def now(self) -> datetime:
        return self.t

    def advance(self, delta: timedelta) -> None:
        self.t += delta

    def sleep(self, seconds: float) -> None:
        self.t += timedelta(seconds=seconds)
