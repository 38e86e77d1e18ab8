"""Spark compaction: the LSM policy's runs merge-sorted by Spark tasks, committed once.

The driver plans exactly as :func:`lake_core.maintenance.compact` does (the policy's runs, or
the given objects per partition), under the caller's maintenance lock. Each run is one task:
lake_core's ``merge_run`` streams a k-way merge of the run's objects, lake_core's writer writes
the output near the target size, and the outputs carry the same ``plan_size`` tags, so the
policy reaches the same fixpoint. A run's objects travel in snapshot order, so a unique
pool's tasks keep the newest row per key exactly as the local compaction does (``write_run``
applies the same rule). The driver then commits the new objects and the deletes of
every source in one commit, with the caller's ``guard`` checked at the commit point. If any
task fails, or the commit does (a concurrent delete of a source is a conflict), every object
any task wrote is removed and the error is raised as the task or the commit raised it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.clock import SYSTEM_CLOCK
from lake_core.committing import discarding_on_failure
from lake_core.config import LakeConfig
from lake_core.indexes.building import build_indexes
from lake_core.indexes.meta import IndexMeta
from lake_core.indexes.rules import IndexRule
from lake_core.maintenance import CompactionResult, CompactionRun
from lake_core.maintenance.compact import commit_compaction, plan_runs, write_run
from lake_core.objects import ObjectMeta
from lake_core.pool import MAIN, Pool
from lake_core.registry import PoolConfig
from lake_spark.tasks import TaskError, task_store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class _Merged:
    run: int
    objects: tuple[dict[str, Any], ...]
    error: TaskError | None = None
    indexes: tuple[dict[str, Any], ...] = ()


def _merge(
    uri: str, config: PoolConfig, schema: pa.Schema, rules: tuple[IndexRule, ...]
) -> Callable[[tuple[int, CompactionRun]], _Merged]:
    def run(item: tuple[int, CompactionRun]) -> _Merged:
        index, compaction_run = item
        written: list[ObjectMeta] = []
        try:
            pool = Pool(task_store(uri), config, LakeConfig(uri=uri))
            tagged = write_run(pool, compaction_run, schema, on_object=written.append)
            # The outputs' indexes, built here: the driver commits them with the outputs.
            metas = build_indexes(
                pool.store, pool.id, pool.name, tagged, rules, SYSTEM_CLOCK, threads=1
            )
            return _Merged(
                index, tuple(o.to_json() for o in tagged), indexes=tuple(m.to_json() for m in metas)
            )
        except Exception as exc:  # noqa: BLE001 - reported to the driver, which re-raises it
            return _Merged(index, tuple(o.to_json() for o in written), TaskError.capture(exc))

    return run


def spark_compact(
    spark: SparkSession,
    pool: Pool,
    branch: str = MAIN,
    object_ids: list[str] | None = None,
    *,
    guard: Callable[[], None] | None = None,
    author: str | None = None,
    message: str = "",
) -> CompactionResult:
    """Compact ``object_ids`` (merged together per partition), or what the policy picks, with
    one Spark task per run. Same result and guarantees as
    :func:`lake_core.maintenance.compact`; run it under the pool's maintenance lock."""
    snap = pool.snapshot(pool.tip(branch))
    runs = plan_runs(pool, snap.objects, object_ids, snap.schema)
    if not runs:
        return CompactionResult(None)
    schema = snap.schema or pa.schema([])
    sc = spark.sparkContext
    sc.setJobDescription(f"lakepool compact {pool.name}: {len(runs)} runs")
    results: list[_Merged] = (
        sc.parallelize(list(enumerate(runs)), len(runs))
        .map(_merge(pool.store.uri, pool.config, schema, pool.index_rules))
        .collect()
    )
    results.sort(key=lambda r: r.run)
    adds = [ObjectMeta.from_json(o) for r in results for o in r.objects]
    failed = next((r.error for r in results if r.error is not None), None)
    if failed is not None:
        with discarding_on_failure(pool, adds):
            failed.reraise()
    metas = [IndexMeta.from_json(m) for r in results for m in r.indexes]
    return commit_compaction(
        pool, branch, runs, adds, guard=guard, author=author, message=message, index_adds=metas
    )
