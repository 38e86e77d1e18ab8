"""Choose the lock provider for a lake: ZooKeeper when configured, else local file locks.

A configured ZooKeeper is never silently replaced by file locks: if it cannot be reached the
ZooKeeper provider raises :class:`~lake_core.errors.LockServiceUnavailableError` when a lock is
asked for. kazoo is imported only when ZooKeeper is configured.
"""

from __future__ import annotations

from lake_core.config import LakeConfig
from lake_core.locks.base import LockProvider
from lake_core.locks.local import FileLockProvider, lock_dir_for


def open_lock_provider(config: LakeConfig, lake_id: str, lake_uri: str) -> LockProvider:
    """The provider for the lake ``lake_id`` at ``lake_uri``. Lock holders are recorded as
    ``config.user@host:pid``. Connects to nothing until a lock is asked for."""
    if config.zookeeper:
        from lake_core.locks.zookeeper import ZooKeeperLockProvider

        return ZooKeeperLockProvider(config.zookeeper, lake_id, user=config.user)
    return FileLockProvider(lock_dir_for(lake_uri), user=config.user, clock=config.clock)
