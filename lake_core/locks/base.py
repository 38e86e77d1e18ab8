"""The lock contract: one maintenance lock and one journal lock per pool, from a provider.

A :class:`LockProvider` hands out exclusive locks as context managers that yield a
:class:`LockHandle`. Two locks exist per pool:

- the **maintenance** lock, held for the whole of compaction, partition drop/rewrite, cleanup,
  vacate and purge. It is one lock on purpose: separate merge and cleanup locks let a merge and
  a cleanup interleave, which is how IceDB duplicated rows;
- the **journal** lock, held only around one journal append on a store without conditional
  writes (where put-if-missing cannot arbitrate the race).

Holding a lock is a belief that can go stale: a ZooKeeper session can expire while the holder
is busy, and then another process may take the lock. So a holder calls
:meth:`LockHandle.check` immediately before its commit point (the journal append that makes the
work visible) and aborts if it raises. ``check`` narrows the window but cannot close it — no
lock service can without fencing tokens — which is why the commit itself is still a
put-if-missing journal append that fails on any concurrent commit.

Locks are not re-entrant: taking a lock the same process already holds waits for it.

Error Handling
==============

Every provider raises only these (all :class:`~lake_core.errors.LockError`):

- :class:`~lake_core.errors.LockTimeoutError` when the lock is not free within ``timeout``
  seconds; its ``holder`` names the current holder's identifier when the provider knows it.
- :class:`~lake_core.errors.LockLostError` from :meth:`LockHandle.check` once the lock can no
  longer be trusted (ZooKeeper connection suspended or session expired, lock file replaced,
  lock already released). Treat it as "abort, commit nothing, remove what you wrote".
- :class:`~lake_core.errors.LockServiceUnavailableError` when the lock service cannot be
  reached. Providers never fall back to a weaker lock: a local lock silently taken instead of a
  ZooKeeper one would not exclude processes on other machines.
- :class:`~lake_core.errors.LockError` for any other failure of the lock service.

Releasing a lock never raises; a provider that cannot release cleanly makes sure the lock
dies with its session (ZooKeeper) or its file descriptor (file locks).
"""

from __future__ import annotations

import abc
import os
import socket
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Literal

from lake_core.errors import LockLostError, UsageError

LockKind = Literal["maintenance", "journal"]


def default_identifier(user: str | None = None) -> str:
    """Who holds a lock, as other processes will read it: ``user@host:pid`` (``host:pid``
    without a user). Computed when a lock is taken, so a forked child names itself."""
    who = f"{socket.gethostname()}:{os.getpid()}"
    return f"{user}@{who}" if user else who


def validate_lock_id(what: str, value: str) -> str:
    """Ids become path segments (files, znodes): refuse anything that could escape one."""
    if not value or "/" in value or "\0" in value or value in (".", ".."):
        raise UsageError(f"invalid {what} for a lock: {value!r}")
    return value


#: The longest lock wait accepted (a week): longer ones are mistakes, and infinite ones
#: overflow deadline arithmetic.
MAX_LOCK_TIMEOUT = 7 * 86400.0

class LockHandle(abc.ABC):
    """One held lock, valid inside its ``with`` block. Used by one thread."""

    def __init__(self, pool_id: str, kind: LockKind, identifier: str) -> None:
        self.pool_id = pool_id
        self.kind: LockKind = kind
        self.identifier = identifier

    @property
    def name(self) -> str:
        """The lock as error messages name it."""
        return f"{self.kind} lock of pool {self.pool_id}"

    @abc.abstractmethod
    def lost_reason(self) -> str | None:
        """``None`` while the lock is still held; otherwise why it is not. May do one round
        trip to the lock service; never raises."""

    def check(self) -> None:
        """Raise :class:`~lake_core.errors.LockLostError` unless the lock is still held.
        Call it right before the commit point."""
        reason = self.lost_reason()
        if reason is not None:
            raise LockLostError(self.name, reason)


class LockProvider(abc.ABC):
    """Hands out per-pool exclusive locks. See the module docstring for the error contract.

    ``timeout`` everywhere is seconds to wait: ``None`` waits as long as it takes, ``0`` tries
    once. Use the provider as a context manager (or call :meth:`close`) to release its
    resources (a ZooKeeper session).

    Example::

        with open_lock_provider(config, lake.id, lake.config.uri) as locks:
            with locks.maintenance_lock(pool.id, timeout=30) as held:
                plan = plan_compaction(...)
                write_objects(plan)
                held.check()  # raises LockLostError: abort, delete what we wrote
                commit(plan)
    """

    def hold(
        self, pool_id: str, kind: LockKind, *, timeout: float | None = None
    ) -> AbstractContextManager[LockHandle]:
        """Take the ``kind`` lock of ``pool_id``; released when the ``with`` block exits."""
        validate_lock_id("pool id", pool_id)
        if kind not in ("maintenance", "journal"):
            raise UsageError(f"unknown lock kind {kind!r}")
        if timeout is not None and not 0 <= timeout <= MAX_LOCK_TIMEOUT:
            # NaN fails both comparisons; inf and absurd values would overflow deadlines.
            raise UsageError(
                f"lock timeout must be between 0 and {MAX_LOCK_TIMEOUT:g} seconds, not {timeout}"
            )
        return self._hold(pool_id, kind, timeout)

    def maintenance_lock(
        self, pool_id: str, *, timeout: float | None = None
    ) -> AbstractContextManager[LockHandle]:
        """The pool's single maintenance lock (compaction, partitions, cleanup, vacate, purge)."""
        return self.hold(pool_id, "maintenance", timeout=timeout)

    def journal_lock(
        self, pool_id: str, *, timeout: float | None = None
    ) -> AbstractContextManager[LockHandle]:
        """Serialises journal appends of ``pool_id`` on a store without conditional writes."""
        return self.hold(pool_id, "journal", timeout=timeout)

    @abc.abstractmethod
    def _hold(
        self, pool_id: str, kind: LockKind, timeout: float | None
    ) -> AbstractContextManager[LockHandle]:
        """The one primitive a provider implements; arguments are already validated."""

    def close(self) -> None:  # noqa: B027 - optional hook, most providers hold nothing
        """Release the provider's resources. Locks still held become lost."""

    def __enter__(self) -> LockProvider:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
