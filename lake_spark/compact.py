"""Spark compaction: the LSM policy's runs merge-sorted by Spark tasks, committed once.

The driver plans exactly as :func:`lake_core.maintenance.compact` does (the policy's runs, or
the given objects per partition), under the caller's maintenance lock. Each run is one task:
lake_core's ``merge_run`` reads and merge-sorts the run's objects, lake_core's writer writes
the output near the target size, and the outputs carry the same ``plan_size`` tags, so the
policy reaches the same fixpoint. The driver then commits the new objects and the deletes of
every source in one commit, with the caller's ``guard`` checked at the commit point. If any
task fails, or the commit does (a concurrent delete of a source is a conflict), every object
any task wrote is removed and the error is raised as the task or the commit raised it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.config import LakeConfig
from lake_core.maintenance import CompactionResult, CompactionRun, plan_compaction
from lake_core.maintenance.compact import _explicit_runs, merge_run
from lake_core.maintenance.policy import PLAN_SIZE_TAG
from lake_core.objects import ObjectMeta
from lake_core.pool import MAIN, Pool
from lake_core.registry import PoolConfig
from lake_core.writer import WriteOptions, write_objects
from lake_spark.tasks import TaskError, task_store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class _Merged:
    run: int
    objects: tuple[dict[str, Any], ...]
    error: TaskError | None = None


def _merge(
    uri: str, config: PoolConfig, schema: pa.Schema
) -> Callable[[tuple[int, CompactionRun]], _Merged]:
    def run(item: tuple[int, CompactionRun]) -> _Merged:
        index, compaction_run = item
        written: list[ObjectMeta] = []
        try:
            pool = Pool(task_store(uri), config, LakeConfig(uri=uri))
            table = merge_run(pool, compaction_run, schema)
            target = config.target_size
            write_objects(
                pool.store,
                pool.id,
                table,
                config.key,
                WriteOptions(target, config.seek_stride),
                presorted=True,
                partition=compaction_run.partition,
                on_object=written.append,
            )
            # The size each output stands for, so the policy sees the same sums next time.
            plan = compaction_run.size if len(written) == 1 else target
            tagged = [replace(o, tags={**o.tags, PLAN_SIZE_TAG: str(plan)}) for o in written]
            return _Merged(index, tuple(o.to_json() for o in tagged))
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
    target = pool.config.target_size
    if object_ids:
        runs = _explicit_runs(pool, snap.objects, object_ids)
    else:
        runs = plan_compaction(list(snap.objects.values()), pool.config.key.fields, target)
    if not runs:
        return CompactionResult(None)
    schema = snap.schema or pa.schema([])
    sc = spark.sparkContext
    sc.setJobDescription(f"lakepool compact {pool.name}: {len(runs)} runs")
    results: list[_Merged] = (
        sc.parallelize(list(enumerate(runs)), len(runs))
        .map(_merge(pool.store.uri, pool.config, schema))
        .collect()
    )
    results.sort(key=lambda r: r.run)
    adds = [ObjectMeta.from_json(o) for r in results for o in r.objects]
    deletes = [o.id for run in runs for o in run.objects]
    try:
        for r in results:
            if r.error is not None:
                r.error.reraise()
        bytes_in = sum(o.size for run in runs for o in run.objects)
        bytes_out = sum(o.size for o in adds)
        stats = {
            "runs": len(runs),
            "objects_in": len(deletes),
            "objects_out": len(adds),
            "bytes_in": bytes_in,
            "bytes_out": bytes_out,
        }
        commit = pool.commit(
            branch,
            adds,
            deletes,
            author=author,
            guard=guard,
            message=message or f"compacted {len(deletes)} objects into {len(adds)}",
            meta={"compaction": stats},
            extra={"kind": "compaction"},
        )
    except BaseException:
        pool.discard_objects(adds)
        raise
    return CompactionResult(commit, len(runs), len(deletes), len(adds), bytes_in, bytes_out)
