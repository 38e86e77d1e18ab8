"""Work in flight: how long a writer may hold objects that no commit references yet.

Every writer writes its data objects (and a commit object) *before* the journal append that
makes them reachable. Until then, cleanup sees unreferenced files exactly like the leftovers of
a killed load. The two are told apart by age alone, so both sides keep a bound:

- a writer that adds new objects reaches its commit point (the journal append, or the staging
  document for ``lake add``) within :data:`WRITE_WINDOW` of starting to write, or refuses to
  commit (:func:`write_window_guard`, passed as the commit's ``guard``);
- cleanup deletes an unreferenced file only once it is older than :data:`MIN_ORPHAN_AGE`,
  whatever grace period it was given.

``MIN_ORPHAN_AGE`` exceeds ``WRITE_WINDOW`` by a margin that covers clock skew between the
writer and cleanup (KSUIDs carry the writer's clock, S3 modification times the server's) and an
append already sent when the guard ran. The values are long on purpose: a large Spark load
spends minutes to hours between its first object and its commit, and leftovers of failed loads
are rare enough that keeping them a day costs nothing. See :mod:`lake_core.maintenance.cleanup`
for the whole argument.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from lake_core.clock import Clock, to_iso
from lake_core.errors import WriteWindowExpiredError

#: Longest time from a writer's start to its commit point.
WRITE_WINDOW = timedelta(hours=12)
#: Youngest unreferenced file cleanup may delete: the write window plus 12 h of margin.
MIN_ORPHAN_AGE = timedelta(hours=24)


def check_write_window(clock: Clock, started: datetime) -> None:
    """Raise WriteWindowExpiredError when ``started`` is more than the write window ago."""
    if clock.now() - started > WRITE_WINDOW:
        raise WriteWindowExpiredError(to_iso(started), _hours(WRITE_WINDOW))


def write_window_guard(clock: Clock, started: datetime) -> Callable[[], None]:
    """A commit guard that refuses the commit point past the write window (nothing commits)."""
    return lambda: check_write_window(clock, started)


def _hours(d: timedelta) -> str:
    return f"{d.total_seconds() / 3600:g}h"


__all__ = ["MIN_ORPHAN_AGE", "WRITE_WINDOW", "check_write_window", "write_window_guard"]
