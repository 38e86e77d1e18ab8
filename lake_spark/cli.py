"""``lake load --spark``, ``lake compact --spark``, ``lake cleanup --spark``: the CLI's Spark paths.

``lake_core.cli`` imports this module only when ``--spark`` is given, so the CLI never imports
pyspark otherwise. The master is resolved here, at the edge: ``--spark-master``, else
``LAKE_SPARK_MASTER``, else ``local[*]``. Output and errors are the local commands' own.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

# The local commands' own helpers, so that both paths parse, resolve and print alike.
from lake_core.cli import report
from lake_core.cli.commands import _lake, _meta, _pool_ref, _say
from lake_core.names import split_ref
from lake_core.pool import MAIN
from lake_spark.session import SparkSettings, spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@contextmanager
def _spark(args: argparse.Namespace, what: str) -> Iterator[SparkSession]:
    settings = SparkSettings.resolve(getattr(args, "spark_master", None), app_name=f"lake {what}")
    spark = spark_session(settings)
    try:
        yield spark
    finally:
        spark.stop()


def cmd_load(args: argparse.Namespace) -> None:
    from lake_spark.ingest import spark_load

    pool, branch = _pool_ref(args, args.user)
    meta = _meta(args.meta)
    with _spark(args, "load") as spark:
        commit = spark_load(
            spark,
            pool,
            args.files,
            branch or MAIN,
            fmt=args.input_format,
            message=args.message,
            meta=meta,
        )
    _say(report.loaded(commit))
    _say(f"{commit.id} committed")


def cmd_compact(args: argparse.Namespace) -> None:
    from lake_spark.compact import spark_compact

    name, ref = split_ref(args.pool)
    lake = _lake(args)
    pool = lake.pool(name)
    # Spark starts before the lock is taken: the lock is held only while planning and working.
    with (
        _spark(args, "compact") as spark,
        lake.locks() as locks,
        locks.maintenance_lock(pool.id, timeout=args.lock_timeout) as held,
    ):
        result = spark_compact(spark, pool, ref or MAIN, args.ids or None, guard=held.check)
    if result.commit is None:
        _say("nothing to compact")
        return
    _say(report.compacted(result))
    _say(f"{result.commit.id} committed")


def cmd_cleanup(args: argparse.Namespace) -> None:
    from lake_core.cli.maintenance_commands import print_cleanup
    from lake_core.units import parse_duration
    from lake_spark.cleanup import spark_cleanup

    grace = parse_duration(args.grace)  # a usage error before Spark starts
    name, _ = split_ref(args.pool)
    lake = _lake(args)
    pool = lake.pool(name)
    with (
        _spark(args, "cleanup") as spark,
        lake.locks() as locks,
        locks.maintenance_lock(pool.id, timeout=args.lock_timeout) as held,
    ):
        result = spark_cleanup(spark, pool, grace, dry_run=args.dry_run, guard=held.check)
    print_cleanup(args, result, pool.name)
