"""SQL over pools on Spark: the same query text ``lake query "SQL"`` runs on DuckDB, run by
Spark SQL (``lake query --spark "SQL"``), local or on a cluster.

How a query runs:

1. DuckDB's parser reads the text and the lake's analysis (:func:`lake_core.sql.analyze.analyze`)
   refuses what the DuckDB path refuses (anything but one SELECT; file-reading table functions)
   with the same errors, names the tables, and gives, per pool, the WHERE conjuncts that
   constrain it. Each name is resolved as the DuckDB path resolves it
   (:func:`lake_core.sql.resolve.resolve_table`): a pool snapshot, a metadata table, a view.
   So both engines accept the same queries, read the same snapshots and prune the same way.
2. Each pool snapshot is read through :func:`lake_spark.read.spark_read` at the commit its
   name (``"flights@dev"``, ``"flights@<commit>"``) or ``as_of`` resolved to, pruned by the
   lake's planner with those conjuncts, projected to the columns the query mentions, by
   lake_core inside Spark tasks (the ``"lake"`` reader: local disk and S3 alike, row groups
   pruned, counters kept for ``--stats``); a metadata table (small) is handed over as a
   DataFrame; a view's SQL is planned the same way, recursively. Each becomes a temporary
   view with a generated name.
3. The text Spark runs is the user's, with every table reference (DuckDB reports where each one
   is and how long it is) replaced by the backquoted view name ``AS`` the backquoted alias
   (or table name) it had. So names Spark cannot take as written (``ns.flights`` is not a
   temporary view for Spark; ``@`` and ``$`` are not identifier characters) never reach
   Spark's parser, and qualified columns (``flights.carrier``, ``"flights@dev".carrier``)
   still bind. A name a CTE defines is left
   alone (Spark's CTE is what the query reads there).
4. Spark parses the rest with ANSI mode and ``spark.sql.ansi.doubleQuotedIdentifiers`` on,
   so ``"x"`` is an identifier and ``'x'`` a string, as in DuckDB and standard SQL: the same
   text means the same thing on both engines. (Backticks would work on Spark only.) Functions
   and syntax beyond standard SQL differ between the engines and are each engine's own (the
   column name of an unaliased ``count(*)``, for one).

Invariants: nothing is written (the analysis refuses every other statement, and Spark only
reads temporary views); the temporary views live until :meth:`SparkQuery.close`.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lake_core.errors import UsageError
from lake_core.sql.analyze import analyze, table_key
from lake_core.sql.errors import SqlError
from lake_core.sql.resolve import (
    PoolTable,
    TableTable,
    pool_schemas,
    resolve_tables,
)
from lake_spark.read import ReadCounters, spark_read

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from lake_core.expr import Expr
    from lake_core.lake import Lake
    from lake_core.pool import Pool

#: Spark settings the query runs under (see the module docstring, step 4).
SQL_CONF = {
    "spark.sql.ansi.enabled": "true",
    "spark.sql.ansi.doubleQuotedIdentifiers": "true",
}

#: How deep views may nest (a view naming itself, directly or not, stops there), as in DuckDB.
MAX_VIEW_DEPTH = 16

_names = itertools.count()


@dataclass
class SparkQuery:
    """A query planned on Spark: :attr:`frame` runs it (lazily, as any DataFrame); the read
    counters fill as Spark reads."""

    frame: DataFrame
    #: The text Spark parsed (table references replaced by the temporary views).
    spark_sql: str
    #: Per table name as the query wrote it: what the lake's tasks read of that pool.
    counters: dict[str, ReadCounters] = field(default_factory=dict)
    views: list[str] = field(default_factory=list)

    def stats(self) -> dict[str, dict[str, int]]:
        """``--stats``: per pool, objects_total / objects_read / row_groups_read / rows_read /
        bytes_read (after the frame has run)."""
        return {name: c.to_json() for name, c in self.counters.items()}

    def to_arrow(self) -> pa.Table:
        """Run the query; its rows as one Arrow table (collected on the driver)."""
        try:
            table: pa.Table = self.frame.toArrow()
        except Exception as err:
            raise _spark_error(err) from None
        return table

    def close(self) -> None:
        """Drop the query's temporary views."""
        spark = self.frame.sparkSession
        for view in self.views:
            spark.catalog.dropTempView(view)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _base_tables(tree: Any) -> Iterator[dict[str, Any]]:
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            if node.get("type") == "BASE_TABLE":
                yield node
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)


def rewrite(sql: str, tree: Any, views: dict[str, str], ctes: frozenset[str]) -> str:
    """``sql`` with each table reference whose key is in ``views`` replaced by its view, keeping
    the name the query binds it by (its alias, else its table name) and any column aliases.
    DuckDB's locations are byte offsets into the UTF-8 text."""
    raw = sql.encode()
    edits = []
    for node in _base_tables(tree):
        key = table_key(str(node.get("schema_name", "")), str(node.get("table_name", "")))
        if key not in views or key in ctes:
            continue
        start, length = node.get("query_location"), node.get("query_location_length")
        if not isinstance(start, int) or not isinstance(length, int) or length <= 0:
            raise UsageError(f"table {key}: DuckDB did not report where it is in the query")
        binding = str(node.get("alias") or node.get("table_name"))
        text = f"{_quote(views[key])} AS {_quote(binding)}"
        aliases = node.get("column_name_alias") or []
        if aliases:
            text += "(" + ", ".join(_quote(str(a)) for a in aliases) + ")"
        edits.append((start, start + length, text))
    edits.sort(reverse=True)
    for start, end, text in edits:
        raw = raw[:start] + text.encode() + raw[end:]
    return raw.decode()


def _columns(columns: frozenset[str] | None, schema: pa.Schema, key: list[str]) -> list[str] | None:
    """The pool columns the query mentions (case-insensitively, as both engines bind them), or
    None for all (``*``). At least one column: ``count(*)`` still needs rows."""
    if columns is None:
        return None
    mentioned = {c.lower() for c in columns}
    picked = [n for n in schema.names if n.lower() in mentioned]
    if picked:
        return picked
    first = next((k for k in key if k in schema.names), None)
    return [first or schema.names[0]]


class _Planner:
    """Registers what one query (and the views it names, recursively) reads as Spark
    temporary views, the way :mod:`lake_core.sql.engine` registers them in DuckDB."""

    def __init__(
        self, spark: SparkSession, open_pool: Callable[[str], Pool], lake: Lake | None,
        as_of: datetime | None,
    ) -> None:  # fmt: skip
        self.spark, self.open_pool, self.lake, self.as_of = spark, open_pool, lake, as_of
        self.counters: dict[str, ReadCounters] = {}
        self.views: list[str] = []

    def new_view(self, frame: DataFrame) -> str:
        view = f"lake_sql_{next(_names)}"
        frame.createOrReplaceTempView(view)
        self.views.append(view)
        return view

    def plan(self, sql: str, depth: int = 0) -> str:
        """Register the tables ``sql`` reads; the text Spark runs for it."""
        import duckdb

        with duckdb.connect() as con:
            analysis = analyze(con, sql)
        resolved = resolve_tables(
            analysis.tables, analysis.cte_names, self.open_pool, self.lake, self.as_of
        )
        for node in analysis.bases():
            key = table_key(str(node.get("schema_name", "")), str(node.get("table_name", "")))
            source = resolved.get(key)
            if (
                node.get("sample") is not None
                and isinstance(source, PoolTable)
                and source.pool.config.otree is not None
            ):
                # Spark would sample rows at random: the OTree cut runs in DuckDB only.
                raise UsageError(
                    f"{key}: TABLESAMPLE of an OTree pool is the OTree cut, which --spark does "
                    "not run yet: query without --spark (or read with spark_read(sample=…))"
                )
        schemas = pool_schemas(resolved)
        # All schemas at once: an unqualified column binds only to the one table that has it.
        predicates = analysis.predicates(schemas)
        targets: dict[str, str] = {}
        for key, source in resolved.items():
            if isinstance(source, PoolTable):
                frame = self.pool_frame(key, source, predicates.get(key), analysis.columns)
            elif isinstance(source, TableTable):
                frame = self.spark.createDataFrame(source.table)
            else:
                if depth >= MAX_VIEW_DEPTH:
                    raise SqlError(f"{key}: views nest more than {MAX_VIEW_DEPTH} deep")
                frame = self.sql(self.plan(source.sql, depth + 1))
            targets[key] = self.new_view(frame)
        return rewrite(sql, analysis.tree, targets, analysis.cte_names)

    def pool_frame(
        self, key: str, source: PoolTable, predicate: Expr | None, columns: frozenset[str] | None
    ) -> DataFrame:
        pool, schema = source.pool, source.snapshot.schema
        found = self.counters[key] = ReadCounters(self.spark)
        if source.commit_id is None or schema is None or not len(schema):
            # Nothing loaded yet: the key fields, typeless, so count(*) is 0 and names bind.
            found.objects_total = len(source.snapshot.objects)
            fields = ", ".join(f"{_quote(f)} void" for f in pool.config.key.fields)
            return self.spark.createDataFrame([], fields)
        return spark_read(
            self.spark,
            pool,
            source.commit_id,
            where=None if predicate is None else str(predicate),
            columns=_columns(columns, schema, list(pool.config.key.fields)),
            reader="lake",
            counters=found,
        )

    def sql(self, text: str) -> DataFrame:
        for name, value in SQL_CONF.items():
            self.spark.conf.set(name, value)
        try:
            return self.spark.sql(text)
        except Exception as err:
            raise _spark_error(err) from None


def spark_sql(
    spark: SparkSession,
    sql: str,
    open_pool: Callable[[str], Pool],
    lake: Lake | None = None,
    *,
    as_of: datetime | None = None,
) -> SparkQuery:
    """Plan ``sql`` (read-only SQL over the pools ``open_pool`` finds, as
    :func:`lake_core.sql.run_sql` takes it) on ``spark``. Raises the DuckDB path's errors for
    refused statements, syntax errors and unknown pools or refs before Spark reads anything;
    errors Spark's analyzer finds (an unknown column) are raised here too, as
    :class:`~lake_core.sql.errors.SqlError`."""
    _quiet_query_errors()
    planner = _Planner(spark, open_pool, lake, as_of)
    try:
        text = planner.plan(sql)
        frame = planner.sql(text)
    except BaseException:
        for view in planner.views:
            spark.catalog.dropTempView(view)
        raise
    return SparkQuery(frame, text, planner.counters, planner.views)


def _quiet_query_errors() -> None:
    """PySpark logs every failed query's error as a JSON record on stderr before raising it;
    spark_sql raises it as one line, so the log record is turned off."""
    from pyspark.logger import PySparkLogger

    PySparkLogger.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)


def _spark_error(err: Exception) -> Exception:
    """Spark's analysis or parse error as one line (``[UNRESOLVED_COLUMN…] A column … cannot
    be resolved``), an SqlError as the DuckDB path raises; anything else unchanged."""
    from pyspark.errors import PySparkException

    if isinstance(err, PySparkException):
        text = str(err).strip()
        return SqlError(f"Spark: {text.splitlines()[0] if text else type(err).__name__}")
    return err
