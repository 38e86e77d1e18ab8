"""Deleting many files from Spark tasks (cleanup, purge).

The caller decides *what* to delete (under the pool's maintenance lock); this only spreads the
deletes over tasks, each opening the lake's store itself and deleting a batch of keys (S3 takes
up to 1000 keys per request). Deletes are idempotent, so a retried task is harmless.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

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
