"""Per-pool maintenance and journal locks: the contract and its providers.

``ZooKeeperLockProvider`` lives in :mod:`lake_core.locks.zookeeper` and is not re-exported, so
that importing the lake never imports kazoo; :func:`open_lock_provider` picks it when configured.
"""

from lake_core.locks.base import LockHandle, LockKind, LockProvider, default_identifier
from lake_core.locks.factory import open_lock_provider
from lake_core.locks.local import FileLockProvider, lock_dir_for

__all__ = [
    "FileLockProvider",
    "LockHandle",
    "LockKind",
    "LockProvider",
    "default_identifier",
    "lock_dir_for",
    "open_lock_provider",
]
