"""``ZooKeeperLockProvider``: per-pool locks through kazoo's ``Lock`` recipe, across machines.

The only module of the lake that imports kazoo. Locks live at

    /lakepool/<lake-id>/pools/<pool-id>/maintenance
    /lakepool/<lake-id>/pools/<pool-id>/journal

each a kazoo lock directory whose children are the contenders' ephemeral sequential nodes,
holding each contender's identifier (``user@host:pid``), so a waiter that times out can say
who holds the lock.

The provider connects lazily, on the first lock it is asked for, and keeps one session for all
its locks. A connection listener marks every held handle lost on ``SUSPENDED`` and on ``LOST``;
a handle once lost stays lost, even if the session later resumes, and
:meth:`~lake_core.locks.base.LockHandle.check` additionally asks the server (one round trip)
whether the lock node still exists and belongs to this session.

Error Handling
==============

- An unreachable ensemble gives :class:`~lake_core.errors.LockServiceUnavailableError`
  ("ZooKeeper at HOST:PORT cannot be reached") after ``connect_timeout`` seconds. It never
  falls back to local locks, which would exclude nobody on another machine.
- A lock not free within ``timeout`` gives :class:`~lake_core.errors.LockTimeoutError` naming
  the holder. kazoo restarts its wait when a contender ahead of us leaves, so a wait can exceed
  ``timeout`` when waiters queue up; it never ends early.
- :meth:`check` raises :class:`~lake_core.errors.LockLostError` after ``SUSPENDED`` or ``LOST``,
  or when the server no longer shows our node; abort the operation without committing.
- Release never raises and never blocks for long: if the lock node cannot be deleted within
  ``verify_timeout`` seconds the provider ends its session, which makes the server delete every
  node of that session (other locks held through this provider become lost too).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, LockTimeout, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from lake_core.errors import LockError, LockServiceUnavailableError, LockTimeoutError, UsageError
from lake_core.locks.base import (
    LockHandle,
    LockKind,
    LockProvider,
    default_identifier,
    validate_lock_id,
)

ROOT = "/lakepool"

_KAZOO_ERRORS = (KazooException, KazooTimeoutError)

# Why SUSPENDED counts as lost, not only LOST: SUSPENDED means we cannot hear from the server.
# The session may still be alive — or the server may already have expired it (expiry is decided
# by the server when our heartbeats stop, and the client learns of it only on reconnecting),
# deleted our ephemeral lock node, and handed the lock to another process that is compacting or
# cleaning the same pool right now. We cannot tell the two apart until we reconnect, so a holder
# must not commit: treat the lock as gone. Once lost, a handle stays lost; the operation aborts
# and can be retried with a fresh lock.
_LOST_REASONS = {
    KazooState.SUSPENDED: (
        "connection to ZooKeeper suspended; the session may already have expired on the "
        "server and another process may hold the lock"
    ),
    KazooState.LOST: "ZooKeeper session expired; the server has deleted the lock node",
}


class ZooKeeperLockHandle(LockHandle):
    """A lock node held by this provider's session."""

    def __init__(
        self,
        pool_id: str,
        kind: LockKind,
        identifier: str,
        provider: ZooKeeperLockProvider,
        node_path: str,
        session_id: int,
    ) -> None:
        super().__init__(pool_id, kind, identifier)
        self.node_path = node_path
        self.session_id = session_id
        self._provider = provider
        self._lost: str | None = None
        self._released = False

    def mark_lost(self, reason: str) -> None:
        """Called from kazoo's connection thread; the first reason wins."""
        if self._lost is None:
            self._lost = reason

    def lost_reason(self) -> str | None:
        if self._released:
            return "already released"
        if self._lost is not None:
            return self._lost
        return self._provider.verify(self.node_path, self.session_id)


class ZooKeeperLockProvider(LockProvider):
    """Per-pool locks in the ZooKeeper ensemble ``hosts`` (``HOST:PORT[,…][/chroot]``).

    ``session_timeout`` is requested from the server (which clamps it to
    ``[2, 20] × tickTime``); a holder cut off from the server learns it (SUSPENDED) after about
    two thirds of it. ``connect_timeout`` bounds the first connection, ``verify_timeout`` the
    round trips of :meth:`LockHandle.check` and of release.

    Example::

        with ZooKeeperLockProvider("zk1:2181,zk2:2181", lake.id) as locks:
            with locks.maintenance_lock(pool.id, timeout=60) as held:
                ...
                held.check()
                ...  # commit
    """

    def __init__(
        self,
        hosts: str,
        lake_id: str,
        *,
        identifier: str | None = None,
        user: str | None = None,
        connect_timeout: float = 10.0,
        session_timeout: float = 10.0,
        verify_timeout: float = 5.0,
    ) -> None:
        if not hosts.strip():
            raise UsageError("empty ZooKeeper address: expected HOST:PORT[,HOST:PORT…]")
        self.hosts = hosts
        self.lake_id = validate_lock_id("lake id", lake_id)
        self.connect_timeout = connect_timeout
        self.session_timeout = session_timeout
        self.verify_timeout = verify_timeout
        self._identifier = identifier
        self._user = user
        # Two locks on purpose: kazoo calls the state listener from its connection thread,
        # possibly while start() waits under _connect_lock; the listener takes only
        # _handles_lock, which nobody holds while waiting on kazoo.
        self._connect_lock = threading.Lock()
        self._handles_lock = threading.Lock()
        self._client: Any = None
        self._handles: set[ZooKeeperLockHandle] = set()
        self._closed = False

    def lock_path(self, pool_id: str, kind: LockKind) -> str:
        return f"{ROOT}/{self.lake_id}/pools/{pool_id}/{kind}"

    @contextmanager
    def _hold(self, pool_id: str, kind: LockKind, timeout: float | None) -> Iterator[LockHandle]:
        client = self._connected_client()
        identifier = self._identifier or default_identifier(self._user)
        path = self.lock_path(pool_id, kind)
        name = f"{kind} lock of pool {pool_id}"
        lock = client.Lock(path, identifier)
        try:
            if timeout == 0:
                got = lock.acquire(blocking=False)
            else:
                got = lock.acquire(blocking=True, timeout=timeout)
        except LockTimeout:
            got = False
        except _KAZOO_ERRORS as e:
            raise LockError(f"{name}: ZooKeeper at {self.hosts} failed: {_describe(e)}") from e
        if not got:
            raise LockTimeoutError(name, timeout or 0.0, _holder(lock))

        handle = ZooKeeperLockHandle(
            pool_id, kind, identifier, self, f"{path}/{lock.node}", client.client_id[0]
        )
        with self._handles_lock:
            self._handles.add(handle)
        if client.state != KazooState.CONNECTED:
            # A state change between acquiring and registering would have gone unseen.
            handle.mark_lost(_LOST_REASONS.get(client.state, f"ZooKeeper is {client.state}"))
        try:
            yield handle
        finally:
            self._release(client, handle)

    def verify(self, node_path: str, session_id: int) -> str | None:
        """Ask the server whether ``node_path`` exists and belongs to ``session_id``: ``None``
        if so, else why not."""
        client = self._client
        if client is None:
            return "the lock provider's ZooKeeper session has ended"
        if client.state != KazooState.CONNECTED:
            return _LOST_REASONS.get(client.state, f"ZooKeeper is {client.state}")
        if client.client_id is None or client.client_id[0] != session_id:
            return "ZooKeeper session was replaced; the lock node died with the old one"
        try:
            stat = client.exists_async(node_path).get(timeout=self.verify_timeout)
        except _KAZOO_ERRORS as e:
            return f"cannot confirm the lock with ZooKeeper: {_describe(e)}"
        if stat is None:
            return f"lock node {node_path} is gone (session expired or node deleted)"
        if stat.ephemeralOwner != session_id:
            return f"lock node {node_path} belongs to another session"
        return None

    def close(self) -> None:
        with self._connect_lock:
            self._closed = True
            self._end_session("the lock provider was closed")

    # -- internals ------------------------------------------------------------------------------

    def _connected_client(self) -> Any:
        with self._connect_lock:
            if self._closed:
                raise LockError("the ZooKeeper lock provider is closed")
            if self._client is not None:
                # Possibly SUSPENDED: kazoo keeps reconnecting, and lock.acquire retries.
                return self._client
            try:
                client = KazooClient(
                    hosts=self.hosts,
                    timeout=self.session_timeout,
                    # Reconnect forever in the background: a suspended provider must be able
                    # to recover for the next lock, not stay dead.
                    connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
                    command_retry={"max_tries": 3, "delay": 0.1, "max_delay": 1.0},
                )
            except (ValueError, KazooException) as e:
                raise UsageError(f"invalid ZooKeeper address {self.hosts!r}: {e}") from e
            client.add_listener(self._on_state)
            try:
                client.start(timeout=self.connect_timeout)
            except KazooTimeoutError:
                # kazoo's start() has already stopped and closed the client.
                raise LockServiceUnavailableError(
                    self.hosts, f"no connection within {self.connect_timeout:g}s"
                ) from None
            except Exception as e:  # noqa: BLE001 - any failure to connect means the same
                _stop_quietly(client)
                raise LockServiceUnavailableError(self.hosts, _describe(e)) from e
            self._client = client
            return client

    def _on_state(self, state: str) -> None:
        reason = _LOST_REASONS.get(state)
        if reason is None:
            return
        with self._handles_lock:
            handles = list(self._handles)
        for handle in handles:
            handle.mark_lost(reason)

    def _release(self, client: Any, handle: ZooKeeperLockHandle) -> None:
        handle._released = True
        with self._handles_lock:
            self._handles.discard(handle)
        if client is not self._client:
            return  # that session has ended, and its ephemeral nodes with it
        try:
            client.delete_async(handle.node_path).get(timeout=self.verify_timeout)
        except NoNodeError:
            pass  # the session expired and took the node with it
        except _KAZOO_ERRORS:
            # The node may outlive us for as long as this session does, keeping the pool locked.
            # Ending the session makes the server delete it (now, or at the session timeout).
            with self._connect_lock:
                if client is self._client:
                    self._end_session("the session was ended to release a stuck lock node")

    def _end_session(self, reason: str) -> None:
        """Drop the current client (caller holds ``_connect_lock``); held handles become lost."""
        client, self._client = self._client, None
        with self._handles_lock:
            handles, self._handles = list(self._handles), set()
        for handle in handles:
            handle.mark_lost(reason)
        if client is not None:
            _stop_quietly(client)


def _holder(lock: Any) -> str:
    """The identifier of the lock's current holder (first contender), or ``""``."""
    try:
        contenders = lock.contenders()
    except _KAZOO_ERRORS:
        return ""
    return str(contenders[0]) if contenders else ""


def _stop_quietly(client: Any) -> None:
    try:
        client.stop()
        client.close()
    except Exception:  # noqa: BLE001, S110 - best effort on a client we are abandoning
        pass


def _describe(e: BaseException) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
