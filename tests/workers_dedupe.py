"""Subprocess bodies for the dedupe race test (importable under ``spawn``)."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa

from lake_core import Lake, LakeConfig
from lake_core.errors import CommitConflictError, RetriesExhaustedError


def upserter(uri: str, pool: str, worker: int, n: int, start: Any, out: Any) -> None:
    """``n`` upserts of a few random keys (0-59) each; report (commit id, {key: value})."""
    p = Lake.open(LakeConfig(uri=uri, user=f"upserter-{worker}")).pool(pool)
    rng = random.Random(worker)
    start.wait()
    done = []
    for i in range(n):
        keys = rng.sample(range(60), 4)
        value = f"u{worker}-{i}"
        result = p.upsert([pa.table({"id": pa.array(keys, pa.int64()), "v": [value] * 4})])
        assert result.commit is not None
        done.append((result.commit.id, {k: value for k in keys}))
    out.put(("upserter", worker, done))


def deduper(uri: str, pool: str, stop: Any, start: Any, out: Any) -> None:
    """Dedupe (under the maintenance lock) until ``stop``; report commits and conflicts."""
    p = Lake.open(LakeConfig(uri=uri, user="deduper")).pool(pool)
    start.wait()
    made, conflicts = [], 0
    while not stop.is_set() or not made:
        try:
            r = p.dedupe(lock_timeout=60)
        except (CommitConflictError, RetriesExhaustedError):
            conflicts += 1
            continue
        if r.commit is not None:
            made.append((r.commit.id, r.rows_removed, r.attempts))
    out.put(("deduper", made, conflicts))
