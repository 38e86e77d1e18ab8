"""Pool handles kept across requests, so the service commits and reads like a long-lived
direct user rather than like a new process per request.

A :class:`~lake_core.pool.Pool` caches immutable things only (commits, snapshots) and the last
journal entry it saw, which every commit re-checks through the journal's put-if-missing
(:mod:`lake_core.journal`): sharing one handle between requests changes no outcome, it saves
the reads a new handle makes (the journal's HEAD, TAIL and probes, the tip's snapshot), and
lets concurrent loads of one pool share a commit when the server runs with ``--group-commit``.

Invariant: a request gets the held handle only while the catalog still gives its pool the
same definition (id, key, settings) and the same index rules; otherwise (a pool dropped and
made again under the name, settings altered, an index rule created) the new handle replaces
it. The catalog is read on every request, as before: only the pool's own state is kept.
"""

from __future__ import annotations

import threading

from lake_core.lake import Lake
from lake_core.pool import Pool


class PoolHandles:
    """One handle per pool name, reused while its definition holds (module docstring).
    Thread-safe: request handlers run on a thread pool."""

    #: Handles kept at most (least recently used dropped first): each holds up to a few
    #: thousand commits and a few snapshots in its caches.
    LIMIT = 32

    def __init__(self, lake: Lake) -> None:
        self._lake = lake
        self._lock = threading.Lock()
        self._held: dict[str, Pool] = {}

    def get(self, name: str) -> Pool:
        """The pool called ``name`` (PoolNotFoundError as :meth:`Lake.pool`)."""
        fresh = self._lake.pool(name)
        key = str(fresh.name)
        rules = fresh.index_rules  # read outside the lock (the held one's is cached)
        with self._lock:
            held = self._held.pop(key, None)
            if held is not None and held.config == fresh.config and held.index_rules == rules:
                fresh = held
            self._held[key] = fresh  # last: the most recently used
            while len(self._held) > self.LIMIT:
                self._held.pop(next(iter(self._held)))
        return fresh
