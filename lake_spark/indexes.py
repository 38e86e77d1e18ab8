"""``lake index apply --spark``: index a large pool's existing objects with one Spark task per
object, committed once by the driver.

Each task opens its object from the store (local disk or S3) and runs lake_core's own builder
(:func:`lake_core.indexes.building.build_indexes`), so an index built on Spark is byte for byte
the kind lake_core builds; it writes the index object under a fresh name and returns its entry.
The driver then commits every entry in one ``index`` commit through
:func:`lake_core.indexes.apply.apply_rule` (planned against the tip it lands on, as the local
path is). If a task fails, the driver re-raises its error and commits nothing: the index files
written by the tasks that succeeded are orphans that cleanup removes after its grace period.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lake_core.clock import SYSTEM_CLOCK
from lake_core.indexes.apply import ApplyResult, apply_rule
from lake_core.indexes.building import build_indexes
from lake_core.indexes.meta import IndexMeta
from lake_core.names import MAIN
from lake_core.objects import ObjectMeta
from lake_spark.tasks import TaskError, task_store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lake_core.indexes.rules import IndexRule
    from lake_core.pool import Pool


@dataclass(frozen=True)
class _Built:
    metas: tuple[dict[str, Any], ...]
    error: TaskError | None = None


def _task(
    uri: str, pool_id: str, pool_name: str, rule: IndexRule
) -> Callable[[dict[str, Any]], _Built]:
    def run(obj_json: dict[str, Any]) -> _Built:
        try:
            obj = ObjectMeta.from_json(obj_json)
            metas = build_indexes(
                task_store(uri), pool_id, pool_name, [obj], [rule], SYSTEM_CLOCK, threads=1
            )
            return _Built(tuple(m.to_json() for m in metas))
        except Exception as exc:  # noqa: BLE001 - reported to the driver, which re-raises it
            return _Built((), TaskError.capture(exc))

    return run


def spark_index_apply(
    spark: SparkSession,
    pool: Pool,
    rule: IndexRule,
    object_ids: Sequence[str] | None = None,
    *,
    branch: str = MAIN,
    author: str | None = None,
) -> ApplyResult:
    """:func:`lake_core.indexes.apply.apply_rule` with the indexes built by Spark tasks (one
    per object). Same result and guarantees as the local path."""

    def build(objects: Sequence[ObjectMeta]) -> list[IndexMeta]:
        if not objects:
            return []
        sc = spark.sparkContext
        sc.setJobDescription(f"lakepool index {pool.name} by {rule.full_name}: {len(objects)}")
        results: list[_Built] = (
            sc.parallelize([o.to_json() for o in objects], len(objects))
            .map(_task(pool.store.uri, pool.id, pool.name, rule))
            .collect()
        )
        failed = next((r.error for r in results if r.error is not None), None)
        if failed is not None:
            failed.reraise()
        return [IndexMeta.from_json(m) for r in results for m in r.metas]

    return apply_rule(pool, rule, object_ids, branch=branch, author=author, build=build)
