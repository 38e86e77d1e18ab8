"""``lake query "SQL"``: read-only SQL over the lake's pools, run by embedded DuckDB after the
lake has planned what to read (lake_core.sql). Output follows the contract of ``lake query``:
``-f table|json|csv|parquet``, ``-o FILE``, ``--stats`` as one JSON line on stderr (per
pool table, as the query names it, and ``answered_from``: the pools it read — a derived
pool when one answered it), ``--explain`` on stderr (whether a derived pool answered, and
why), errors as one ``error:`` line, exit 1."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, cast

from lake_cli.context import LakeContext
from lake_core.remote.uri import is_remote_uri

if TYPE_CHECKING:
    import pyarrow as pa

#: Rows per Arrow batch handed from DuckDB to the writers.
_BATCH_ROWS = 64 * 1024


def run_sql_query(
    lk: LakeContext,
    sql: str,
    as_of: datetime | None,
    stats: bool,
    fmt: str,
    output: str | None,
    *,
    derived: bool = True,
    explain: bool = False,
) -> None:
    import duckdb

    from lake_cli.output import check_writable, write_output  # deferred: pyarrow (lake --help)
    from lake_cli.progress import engine_progress
    from lake_core.sql import engine_error, run_sql

    check_writable(output)
    # Progress only for a person watching: a terminal on stderr, not when the records go to
    # that terminal too (they would interleave), never for JSON (read by programs).
    show = sys.stderr.isatty() and (output is not None or not sys.stdout.isatty())
    show = show and fmt != "json"
    if is_remote_uri(lk.config().uri):
        _run_remote(lk, sql, as_of, stats, fmt, output, derived=derived, explain=explain)
        return
    lake = lk.lake()
    run = run_sql(sql, lake.pool, lake, as_of=as_of, progress=show, derived=derived)
    if explain:
        _explain(run.derivation.reasons if run.derivation is not None else None)
    try:
        with engine_progress(run.connection.query_progress, show):
            reader = _engine_reader(run.relation.to_arrow_reader(_BATCH_ROWS))
            write_output(reader, fmt, output)
    except duckdb.Error as e:
        raise engine_error(e) from None
    if stats:
        sys.stderr.write(json.dumps({**run.stats(), "answered_from": run.answered_from}) + "\n")


def _engine_reader(reader: pa.RecordBatchReader) -> pa.RecordBatchReader:
    """``reader`` with DuckDB's failures while streaming made one-line errors. An error in
    the first batch is a ``duckdb.Error``; one in a later batch (a cast that fails on row
    100,000) reaches Arrow's stream as an ``OSError`` or ``ArrowException`` carrying
    DuckDB's message. Only reading raises here: the writers' own failures (a full disk, a
    closed pipe) are raised where they write, as they are."""
    import duckdb
    import pyarrow as pa

    from lake_core.sql import engine_error

    def batches() -> Iterator[pa.RecordBatch]:
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except (duckdb.Error, pa.ArrowException, OSError) as e:
                raise engine_error(e) from None
            yield batch

    return pa.RecordBatchReader.from_batches(reader.schema, batches())


def _explain(reasons: list[str] | None) -> None:
    for line in reasons or ["derived pools not considered (--no-derived)"]:
        sys.stderr.write(f"derived: {line}\n")


def _run_remote(
    lk: LakeContext,
    sql: str,
    as_of: datetime | None,
    stats: bool,
    fmt: str,
    output: str | None,
    *,
    derived: bool,
    explain: bool,
) -> None:
    """The same query through the lake service: its records, ``--stats`` and ``--explain``
    come from the server (which runs DuckDB next to the lake)."""
    from lake_cli.output import write_output  # deferred: pyarrow (lake --help)
    from lake_core.remote.lake import RemoteLake

    lake = cast(RemoteLake, lk.lake())
    result = lake.sql_run(sql, as_of=as_of, derived=derived)
    if explain:
        _explain(result.reasons)
    write_output(result.reader(), fmt, output)
    if stats:
        sys.stderr.write(json.dumps(result.stats.to_json()) + "\n")
