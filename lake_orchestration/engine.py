"""The engine seam: where ingest and compaction run.

``local`` calls lake_core in the run's process; ``spark`` calls lake_spark with the resource's
Spark session (lake_spark is imported only then, so the local engine never starts a JVM).
Cleanup plans locally either way and, on ``spark``, spreads its deletes over Spark tasks.
Partition rewrites, retain and vacate are metadata-heavy and always run locally.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from lake_core.commit import Commit
from lake_core.loading import Source, load
from lake_core.maintenance import CleanupResult, CompactionResult, cleanup, compact
from lake_core.pool import Pool
from lake_core.txn import Txn
from lake_core.upsert import UpsertResult, upsert
from lake_orchestration.resources import LakeResource


def load_sources(
    lake: LakeResource,
    pool: Pool,
    sources: Sequence[Source],
    *,
    branch: str,
    message: str,
    meta: Any,
    txn: Sequence[Txn] = (),
) -> Commit:
    """Ingest ``sources`` into ``branch`` as one commit landing the transactions ``txn``
    (TxnCommittedError when one is in already: see :mod:`lake_core.txn`). A unique pool
    (``lake create --unique``, whatever pools.yaml's mode says) upserts, as every load into
    one does: appending would keep two rows of a key."""
    if pool.config.unique:
        result = upsert_sources(
            lake,
            pool,
            sources,
            branch=branch,
            delete_when=None,
            message=message,
            meta=meta,
            txn=txn,
        )
        assert result.commit is not None  # without delete_when every row is written
        return result.commit
    if lake.engine == "spark":
        from lake_spark import spark_load

        return spark_load(
            lake.spark_session(),
            pool,
            [str(s) for s in sources],
            branch=branch,
            author=lake.user,
            message=message,
            meta=meta,
            txn=txn,
        )
    return load(pool, sources, branch, author=lake.user, message=message, meta=meta, txn=txn)


def upsert_sources(
    lake: LakeResource,
    pool: Pool,
    sources: Sequence[Source],
    *,
    branch: str,
    delete_when: str | None,
    message: str,
    meta: Any,
    txn: Sequence[Txn] = (),
) -> UpsertResult:
    """Upsert ``sources`` into ``branch`` by the pool key as one commit landing the
    transactions ``txn`` (:func:`lake_core.upsert.upsert`, or on ``spark``
    :func:`lake_spark.spark_upsert`, which merge-joins per key range on Spark tasks: same rows
    and counts; TxnCommittedError as for a load). ``.commit`` is None when nothing changes."""
    if lake.engine == "spark":
        from lake_spark import spark_upsert

        return spark_upsert(
            lake.spark_session(),
            pool,
            [str(s) for s in sources],
            branch,
            delete_when=delete_when,
            author=lake.user,
            message=message,
            meta=meta,
            txn=txn,
        )
    return upsert(
        pool,
        sources,
        branch,
        delete_when=delete_when,
        author=lake.user,
        message=message,
        meta=meta,
        txn=txn,
    )


def compact_pool(
    lake: LakeResource, pool: Pool, *, branch: str, guard: Callable[[], None]
) -> CompactionResult:
    """Compact what the policy picks, committing only while ``guard`` passes."""
    if lake.engine == "spark":
        from lake_spark import spark_compact

        return spark_compact(
            lake.spark_session(), pool, branch=branch, guard=guard, author=lake.user
        )
    return compact(pool, branch, guard=guard, author=lake.user)


def cleanup_pool(
    lake: LakeResource,
    pool: Pool,
    grace: timedelta,
    *,
    dry_run: bool,
    guard: Callable[[], None],
) -> CleanupResult:
    """Clean up ``pool`` (deletes over Spark tasks on the ``spark`` engine; same result)."""
    if lake.engine == "spark":
        from lake_spark import spark_cleanup

        return spark_cleanup(lake.spark_session(), pool, grace, dry_run=dry_run, guard=guard)
    return cleanup(pool, grace, dry_run=dry_run, guard=guard)
