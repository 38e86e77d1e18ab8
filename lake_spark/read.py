"""A pool snapshot as a Spark DataFrame.

The snapshot is chosen by lake_core (a branch or commit, optionally as of a time) and pruned
by it: objects whose recorded stats prove that no row matches ``where`` are dropped before
Spark sees the file list. Then the rows are read one of two ways:

- ``"parquet"``: Spark's own Parquet reader over the object files (``Pool.files``), with the
  pool's schema and ``where`` as a Spark filter (pushed down to row groups by Spark). Needs
  paths every executor can open: a local lake (or one on a shared filesystem), and objects
  whose column types are the pool's (an object written before a column got its type keeps a
  ``null`` column, which Spark's reader cannot widen).
- ``"lake"``: Spark tasks (up to four per core, each a share of the objects) read the
  objects through lake_core (``mapInArrow`` over object ids: row-group pruning, then
  ``where`` applied with the lake's exact semantics). This is
  how S3 lakes are read: Spark would need the Hadoop S3A jars to open ``s3://`` paths itself,
  and lakepool does not ship them.

``"auto"`` picks ``"parquet"`` when it can and ``"lake"`` otherwise. The DataFrame is
unordered, like any Spark read; sort by the pool key if order matters.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.errors import UsageError
from lake_core.indexes.meta import IndexMeta
from lake_core.layout import LAKE_MARKER
from lake_core.objects import ObjectMeta
from lake_core.otree.settings import OTreeLayout
from lake_core.pool import Pool
from lake_core.poolkey import PoolKey
from lake_core.scan import Scan
from lake_core.snapshot import Snapshot
from lake_spark.predicate import spark_predicate
from lake_spark.tasks import task_store

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

READERS = ("auto", "parquet", "lake")


def _spark_schema(schema: pa.Schema) -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    try:
        return from_arrow_schema(schema)
    except (TypeError, NotImplementedError) as err:
        raise UsageError(f"the pool's schema has no Spark equivalent: {err}") from None


def _native_ok(pool: Pool, scan: Scan) -> bool:
    if pool.store.local_path(LAKE_MARKER) is None:
        return False
    types = {f.name: str(f.type) for f in scan.pool_schema}
    return all(
        types.get(name) == meta.type for o in scan.objects for name, meta in o.columns.items()
    )


class ReadCounters:
    """What the ``"lake"`` reader's tasks read, summed on the driver through Spark
    accumulators (the counters ``lake query --stats`` prints). ``objects_total`` and
    ``objects_planned`` are the driver's plan; the others grow as tasks finish, so read them
    after an action. A retried or recomputed task counts again (Spark's accumulator rule)."""

    FIELDS = ("objects_read", "row_groups_read", "rows_read", "bytes_read")

    def __init__(self, spark: SparkSession) -> None:
        self.objects_total = 0
        self.objects_planned = 0
        self._acc = {name: spark.sparkContext.accumulator(0) for name in self.FIELDS}

    def add(self, stats: dict[str, int]) -> None:
        """Called in tasks: add one scan's counters."""
        for name in self.FIELDS:
            self._acc[name].add(int(stats.get(name, 0)))

    def to_json(self) -> dict[str, int]:
        out = {"objects_total": self.objects_total}
        out.update({name: int(self._acc[name].value) for name in self.FIELDS})
        return out


def _read_objects(
    uri: str,
    pool_id: str,
    key: PoolKey,
    schema: pa.Schema,
    where: str | None,
    columns: list[str],
    counters: ReadCounters | None,
    otree: OTreeLayout | None = None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        store = task_store(uri)
        for batch in batches:
            for text in batch.column("meta").to_pylist():
                doc = json.loads(str(text))
                obj = ObjectMeta.from_json(doc["object"])
                # The object's index entries ride along: the task prunes its row groups by
                # them as the driver pruned objects (lake_core.indexes.pruner).
                indexes = {m.slot: m for m in map(IndexMeta.from_json, doc["indexes"])}
                snap = Snapshot(
                    None,
                    0,
                    MappingProxyType({obj.id: obj}),
                    schema,
                    indexes=MappingProxyType(indexes),
                )
                # An OTree pool's tasks prune row groups by block, as the driver did objects.
                scan = Scan(store, pool_id, key, snap, where, columns, otree=otree)
                yield from scan.batches()
                if counters is not None:
                    counters.add(scan.stats.to_json())

    return run


def spark_read(
    spark: SparkSession,
    pool: Pool,
    ref: str | None = None,
    *,
    as_of: datetime | None = None,
    where: str | None = None,
    columns: list[str] | None = None,
    reader: str = "auto",
    counters: ReadCounters | None = None,
    sample: float | None = None,
) -> DataFrame:
    """The rows of ``pool`` at ``ref`` (branch or commit; default main), as of ``as_of``,
    matching ``where`` (the lake's SQL predicate), with ``columns`` (default all), as a Spark
    DataFrame. Raises the local path's errors for a bad ref, time, predicate or column.
    ``counters`` (the ``"lake"`` reader only) collect what the tasks read. ``sample``: the
    OTree sample of that fraction (:mod:`lake_core.otree.sampling`), the same rows as
    ``Pool.scan(sample=…)``: the tasks read the planned row groups and filter by the cut."""
    if reader not in READERS:
        raise UsageError(f"reader must be one of {', '.join(READERS)}, not {reader!r}")
    if counters is not None and reader != "lake":
        raise UsageError("read counters need reader='lake' (Spark's own reader reports none)")
    scan = pool.scan(ref, as_of=as_of, where=where, columns=columns, sample=sample)
    if sample is not None and scan.expr is not None:
        where = str(scan.expr)  # the cut, AND-ed with the predicate, as the tasks parse it
    out = scan.out_schema
    spark_schema = _spark_schema(out)
    if counters is not None:
        counters.objects_total += scan.stats.objects_total
        counters.objects_planned += len(scan.objects)
    if not scan.objects:
        return spark.createDataFrame([], spark_schema)
    if reader == "parquet" or (reader == "auto" and _native_ok(pool, scan)):
        files = pool.files(ref, as_of=as_of, where=where)
        if any(f.startswith("s3://") for f in files):
            raise UsageError(
                "Spark cannot open s3:// objects without Hadoop S3A: use reader='lake'"
            )
        df = spark.read.schema(_spark_schema(scan.pool_schema)).parquet(*files)
        if scan.expr is not None:
            df = df.where(spark_predicate(scan.expr, scan.pool_schema))
        return df.select(*[f"`{n.replace('`', '``')}`" for n in out.names])
    by_object: dict[str, list[dict[str, Any]]] = {}
    for m in scan.snapshot.indexes.values():
        by_object.setdefault(m.object, []).append(m.to_json())
    metas = [
        (json.dumps({"object": o.to_json(), "indexes": by_object.get(o.id, [])}),)
        for o in sorted(scan.objects, key=lambda o: o.id)
    ]
    slices = min(len(metas), 4 * spark.sparkContext.defaultParallelism)
    ids = spark.createDataFrame(spark.sparkContext.parallelize(metas, slices), "meta string")
    return ids.mapInArrow(
        _read_objects(
            pool.store.uri,
            pool.id,
            pool.config.key,
            scan.pool_schema,
            where,
            out.names,
            counters,
            pool.config.otree,
        ),
        spark_schema,
    )
