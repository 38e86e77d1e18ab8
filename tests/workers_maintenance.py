"""Subprocess bodies for maintenance race tests (importable under ``spawn``)."""

from __future__ import annotations

from typing import Any

from lake_core import Lake, LakeConfig
from lake_core.errors import CommitConflictError
from lake_core.loading import load
from lake_core.maintenance import compact
from tests.workers import rows_for


def compact_loop(uri: str, zk: str | None, pool: str, stop: Any, out: Any) -> None:
    """Compact under the maintenance lock until ``stop`` is set; report commits made."""
    lake = Lake.open(LakeConfig(uri=uri, zookeeper=zk, user="compactor"))
    p = lake.pool(pool)
    made = []
    conflicts = 0
    with lake.locks() as locks:
        while not stop.is_set():
            with locks.maintenance_lock(p.id, timeout=60) as held:
                try:
                    r = compact(p, guard=held.check)
                except CommitConflictError:
                    conflicts += 1
                    continue
                if r.commit is not None:
                    made.append(r.commit.id)
    out.put(("compactor", made, conflicts))


def load_n(uri: str, pool: str, worker: int, n: int, out: Any) -> None:
    lake = Lake.open(LakeConfig(uri=uri, user=f"loader-{worker}"))
    p = lake.pool(pool)
    ids = [load(p, [rows_for(worker, i)]).id for i in range(n)]
    out.put(("loader", worker, ids))


def compact_once_at_barrier(uri: str, zk: str | None, pool: str, start: Any, out: Any) -> None:
    """Wait at the barrier, then compact once under the lock; report the commit or None."""
    lake = Lake.open(LakeConfig(uri=uri, zookeeper=zk, user="racer"))
    p = lake.pool(pool)
    start.wait()
    with lake.locks() as locks, locks.maintenance_lock(p.id, timeout=120) as held:
        r = compact(p, guard=held.check)
    out.put(r.commit.id if r.commit is not None else None)
