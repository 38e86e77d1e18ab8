"""Tombstone cleanup and vacate on Spark: deleting many files from Spark tasks.

The driver decides *what* to delete with lake_core's own planner (:func:`lake_core.maintenance.
cleanup`, under the pool's maintenance lock, with every safety rule of the local path: the
re-read of staging and the journal, the minimum orphan age, the guard); this only spreads the
deletes over tasks, each opening the lake's store through lake_core and deleting a batch of
keys (S3 takes up to 1000 keys per request). Deletes are idempotent, so a retried task is
harmless. So the result — which files go, and the counts reported — is the local path's.

Vacate writes a handful of tail snapshots and one journal entry: it stays on the driver
(:func:`spark_retention` runs it there, then the Spark cleanup).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from lake_core.maintenance import CleanupResult, VacateResult, cleanup, vacate
from lake_core.pool import Pool
from lake_spark.tasks import TaskError, task_store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Below this many keys a single process deletes faster than a Spark job starts.
SPARK_DELETE_THRESHOLD = 10_000
#: Keys per task.
BATCH_KEYS = 5_000


def _delete(uri: str) -> Callable[[list[str]], tuple[int, TaskError | None]]:
    def run(keys: list[str]) -> tuple[int, TaskError | None]:
        try:
            task_store(uri).delete_many(keys)
        except Exception as exc:  # noqa: BLE001 - reported to the driver, which re-raises it
            return 0, TaskError.capture(exc)
        return len(keys), None

    return run


def spark_delete_keys(
    spark: SparkSession, lake_uri: str, keys: Sequence[str], batch: int = BATCH_KEYS
) -> int:
    """Delete ``keys`` (store keys relative to the lake, e.g. ``pools/<id>/data/<id>.parquet``)
    of the lake at ``lake_uri`` from Spark tasks; returns how many were deleted. Raises the
    first store error after every task has finished (what the other tasks deleted stays
    deleted: deletes are idempotent, so running it again completes the job)."""
    if not keys:
        return 0
    batches = [list(keys[i : i + batch]) for i in range(0, len(keys), batch)]
    sc = spark.sparkContext
    sc.setJobDescription(f"lakepool delete {len(keys)} files")
    results = sc.parallelize(batches, len(batches)).map(_delete(lake_uri)).collect()
    for _, error in results:
        if error is not None:
            error.reraise()
    return sum(n for n, _ in results)


def spark_cleanup(
    spark: SparkSession,
    pool: Pool,
    grace: timedelta,
    *,
    dry_run: bool = False,
    guard: Callable[[], None] | None = None,
    now: datetime | None = None,
    batch: int = BATCH_KEYS,
) -> CleanupResult:
    """:func:`lake_core.maintenance.cleanup` with its deletes spread over Spark tasks
    (``batch`` keys a task). Same plan, same result; run it under the maintenance lock."""

    def delete(keys: Sequence[str]) -> None:
        spark_delete_keys(spark, pool.store.uri, keys, batch)

    return cleanup(pool, grace, dry_run=dry_run, guard=guard, now=now, delete_keys=delete)


def spark_retention(
    spark: SparkSession,
    pool: Pool,
    before: datetime,
    grace: timedelta,
    *,
    guard: Callable[[], None] | None = None,
) -> tuple[VacateResult, CleanupResult]:
    """Vacate history before ``before`` (on the driver: metadata only), then clean up on Spark.
    Run it under the pool's maintenance lock."""
    vacated = vacate(pool, before, guard=guard)
    return vacated, spark_cleanup(spark, pool, grace, guard=guard)
