"""Subprocess workers for the search-index races (tests/core/test_indexes_race.py)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lake_core import Lake, LakeConfig
from lake_core.errors import CommitConflictError, RetriesExhaustedError
from lake_core.indexes.apply import apply_rule


def _rows(worker: int, i: int, n: int = 20) -> pa.Table:
    base = worker * 100_000 + i * 100
    return pa.table(
        {
            "ts": pa.array([base + j for j in range(n)], pa.int64()),
            "user": [f"w{worker}-{i}-{j % 4}" for j in range(n)],
            "w": pa.array([worker] * n, pa.int64()),
        }
    )


def loader(uri: str, pool: str, worker: int, loads: int, start: Any, out: Any) -> None:
    """Commit ``loads`` loads (indexed by the rule covering the pool in their own commits)."""
    p = Lake.open(LakeConfig(uri=uri, user=f"loader-{worker}")).pool(pool)
    start.wait()
    ids = [p.load(_rows(worker, i), message=f"w{worker} load {i}").id for i in range(loads)]
    out.put(("load", worker, ids))


def applier(uri: str, pool: str, rule: str, rounds: int, start: Any, out: Any) -> None:
    """Run ``lake index apply`` ``rounds`` times while others load and compact."""
    lake = Lake.open(LakeConfig(uri=uri, user="applier"))
    p = lake.pool(pool)
    start.wait()
    indexed = 0
    for _ in range(rounds):
        try:
            indexed += apply_rule(p, lake.index_rule(rule)).indexed
        except (CommitConflictError, RetriesExhaustedError):
            pass
    out.put(("apply", 0, indexed))


def compactor(uri: str, pool: str, rounds: int, start: Any, out: Any) -> None:
    """Compact ``rounds`` times while others load and index."""
    p = Lake.open(LakeConfig(uri=uri, user="compactor")).pool(pool)
    start.wait()
    done = 0
    for _ in range(rounds):
        try:
            if p.compact().commit is not None:
                done += 1
        except (CommitConflictError, RetriesExhaustedError):
            pass
    out.put(("compact", 0, done))
