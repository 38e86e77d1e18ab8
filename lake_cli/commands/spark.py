"""The ``--spark`` paths: ``lake load --spark``, ``lake upsert --spark``, ``lake compact --spark``,
``lake cleanup --spark``, ``lake query --spark "SQL"`` (``--spark-master URL`` implies
``--spark``).

Only lake_spark's public API is used, imported when a command asks for Spark, so ``lake``
without ``--spark`` never imports pyspark. The master is resolved here, at the edge:
``--spark-master``, else ``LAKE_SPARK_MASTER``, else ``local[*]``. Output and errors are the
local commands' own (:mod:`lake_cli.report`).
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lake_cli import report
from lake_cli.context import LakeContext, say
from lake_cli.startup import let_pyarrow_see_pandas
from lake_core.errors import LakeError, UsageError
from lake_core.names import MAIN
from lake_core.units import parse_duration

if TYPE_CHECKING:
    from lake_core.upsert import UpsertResult


def _needs_pyspark() -> None:
    if importlib.util.find_spec("pyspark") is None:
        raise UsageError("--spark needs pyspark: pip install 'lakepool[spark]' (no pyspark)")


@contextmanager
def spark_session_for(
    master: str | None, what: str, conf: dict[str, str] | None = None
) -> Iterator[Any]:
    """A Spark session for one command (``master`` None: the environment's; ``conf``: extra
    Spark settings), stopped after."""
    from lake_spark import SparkSettings, spark_session

    let_pyarrow_see_pandas()  # PySpark hands pandas objects to pyarrow
    settings = SparkSettings.resolve(master, app_name=f"lake {what}", conf=conf)
    if not re.fullmatch(r"local(\[[0-9*]+(,[0-9]+)?\])?|spark://.+|yarn|k8s://.+", settings.master):
        # Spark's own refusal comes as a Java stack from its launcher: refuse first.
        raise UsageError(
            "--spark-master must be local, local[N], spark://HOST:PORT, yarn or k8s://URL, "
            f"not {settings.master!r}"
        )
    try:
        spark = spark_session(settings)
    except Exception as e:  # noqa: BLE001 - PySpark and py4j raise their own types here
        # A master Spark refuses (bogus://x) ends the JVM before the session exists: one
        # line, not a Java stack and a traceback.
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise LakeError(f"cannot start Spark (master {settings.master}): {first}") from None
    try:
        yield spark
    finally:
        spark.stop()


def load(
    lk: LakeContext,
    pool: str,
    files: list[str],
    input_format: str,
    message: str,
    user: str | None,
    meta: dict[str, Any] | None,
    master: str | None,
) -> None:
    _needs_pyspark()
    from lake_spark import spark_load, spark_upsert

    target, branch = lk.pool_ref(pool, user)
    with spark_session_for(master, "load") as spark:
        if target.config.unique:
            # A unique pool's loads are upserts, on Spark as locally (Pool.load).
            result = spark_upsert(
                spark,
                target,
                files,
                branch or MAIN,
                fmt=input_format,
                message=message,
                meta=meta,
            )
            assert result.commit is not None  # without delete_when every row is written
            commit = result.commit
        else:
            commit = spark_load(
                spark,
                target,
                files,
                branch or MAIN,
                fmt=input_format,
                message=message,
                meta=meta,
            )
    say(report.loaded_or_upserted(commit))
    say(f"{commit.id} committed")


def upsert(
    lk: LakeContext,
    pool: str,
    files: list[str],
    input_format: str,
    delete_when: str | None,
    message: str,
    user: str | None,
    meta: dict[str, Any] | None,
    master: str | None,
) -> UpsertResult:
    """``lake upsert --spark``: the merge-join per key range on Spark
    (:func:`lake_spark.upsert.spark_upsert`); the caller prints the result as for the local
    path."""
    _needs_pyspark()
    from lake_spark import spark_upsert

    target, branch = lk.pool_ref(pool, user)
    with spark_session_for(master, "upsert") as spark:
        return spark_upsert(
            spark,
            target,
            files,
            branch or MAIN,
            fmt=input_format,
            delete_when=delete_when,
            message=message,
            meta=meta,
        )


def compact(
    lk: LakeContext, pool: str, ids: list[str], lock_timeout: float, master: str | None
) -> None:
    _needs_pyspark()
    from lake_spark import spark_compact

    target, branch = lk.pool_ref(pool)
    # Spark starts before the lock is taken: the lock is held only while planning and working.
    with (
        spark_session_for(master, "compact") as spark,
        target.maintenance_lock(lock_timeout) as held,
    ):
        result = spark_compact(spark, target, branch or MAIN, ids or None, guard=held.check)
    for line in report.compacted_lines(result):
        say(line)


def index_apply(
    target: Any, rule: Any, object_ids: list[str] | None, branch: str, master: str | None
) -> Any:
    """``lake index apply --spark``: the indexes built by one Spark task per object
    (:func:`lake_spark.indexes.spark_index_apply`); returns its ApplyResult."""
    _needs_pyspark()
    from lake_spark.indexes import spark_index_apply

    if not rule.covers(target.config.name):  # before Spark starts
        raise UsageError(f"index rule {rule.full_name} does not cover pool {target.name}")
    with spark_session_for(master, "index apply") as spark:
        return spark_index_apply(spark, target, rule, object_ids, branch=branch)


def cleanup(
    lk: LakeContext,
    pool: str,
    grace: str,
    dry_run: bool,
    fmt: str,
    lock_timeout: float,
    master: str | None,
) -> None:
    _needs_pyspark()
    from lake_spark import spark_cleanup

    keep = parse_duration(grace)  # a usage error before Spark starts
    target = lk.pool(pool)
    with (
        spark_session_for(master, "cleanup") as spark,
        target.maintenance_lock(lock_timeout) as held,
    ):
        result = spark_cleanup(spark, target, keep, dry_run=dry_run, guard=held.check)
    for line in report.cleanup_lines(result, target.name, fmt):
        say(line)


def progress_conf(fmt: str, terminal: bool) -> dict[str, str]:
    """Spark's console progress bar (stages, tasks done) for a person watching a long query on
    a terminal (stderr), never with ``-f json``. The records are printed after the query ran,
    so the bar and the records never interleave."""
    show = terminal and fmt != "json"
    return {"spark.ui.showConsoleProgress": "true" if show else "false"}


def sql_query(
    lk: LakeContext,
    sql: str,
    as_of: datetime | None,
    stats: bool,
    fmt: str,
    output: str | None,
    master: str | None,
) -> None:
    """``lake query --spark "SQL"``: the DuckDB path's query, output and errors, run by Spark
    SQL (:mod:`lake_spark.sql`). The result is collected on the driver, then written."""
    _needs_pyspark()
    import pyarrow as pa

    from lake_cli.output import check_writable, write_output  # deferred: pyarrow (lake --help)
    from lake_spark.sql import spark_sql

    check_writable(output)  # before Spark starts
    lake = lk.lake()
    with spark_session_for(master, "query", progress_conf(fmt, sys.stderr.isatty())) as spark:
        query = spark_sql(spark, sql, lake.pool, lake, as_of=as_of)
        try:
            table = query.to_arrow()
            counts = query.stats()
        finally:
            query.close()
    write_output(pa.RecordBatchReader.from_batches(table.schema, table.to_batches()), fmt, output)
    if stats:
        sys.stderr.write(json.dumps(counts) + "\n")
