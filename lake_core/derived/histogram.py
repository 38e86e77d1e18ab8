"""Event counts over time by category (the Brim app's histogram, seed 001): one SQL query,
answered from a derived pool whenever one can (:mod:`lake_core.derived.answer`), else from
the pool's rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import pyarrow as pa

from lake_core.derived.spec import UNITS, quote
from lake_core.errors import UsageError

if TYPE_CHECKING:
    from lake_core.lake import Lake

#: ``--every`` spellings: ``1h``, ``hour``, ``1d``, ``day`` ….
EVERY = {
    "1s": "second",
    "1m": "minute",
    "1min": "minute",
    "1h": "hour",
    "1d": "day",
    "1w": "week",
    "1mo": "month",
    "1q": "quarter",
    "1y": "year",
    **{u: u for u in UNITS},
}


@dataclass(frozen=True)
class Histogram:
    """Counts per (bucket, category): columns ``bucket``, the ``by`` column (when given) and
    ``n``, ordered by bucket then category. ``answered_from``: the pools the query read."""

    table: pa.Table
    unit: str
    by: str | None
    answered_from: list[str]
    sql: str


def parse_every(text: str) -> str:
    unit = EVERY.get(text.strip().lower())
    if unit is None:
        raise UsageError(
            f"--every {text!r}: say 1h, 1d, 1w, 1mo, 1y (or hour, day, week, month, year …)"
        )
    return unit


def histogram(
    lake: Lake,
    pool: str,
    every: str,
    *,
    by: str | None = None,
    time_column: str | None = None,
    where: str | None = None,
    as_of: datetime | None = None,
    derived: bool = True,
) -> Histogram:
    """Counts of ``pool``'s rows per ``every`` bucket of ``time_column`` (default: the pool
    key's first field) and per ``by`` value. ``where``: a ``--where`` predicate on the rows
    (:mod:`lake_core.expr`, as ``lake query -p POOL --where``). Raises UsageError for an
    unknown column, a time column that is not a timestamp or date, and ExpressionError (a
    UsageError) for a ``where`` that does not parse or does not fit the columns; SqlError
    when the query fails as it runs."""
    import duckdb

    from lake_core.names import split_ref
    from lake_core.sql import engine_error, run_sql

    unit = parse_every(every)
    name, ref = split_ref(pool)
    source = lake.pool(name)
    schema = source.snapshot(source.resolve(ref, as_of)).schema  # of the snapshot counted
    column = time_column or source.config.key.fields[0]
    if schema is None:
        raise UsageError(f"pool {name} has no rows yet")
    for c in (column, by):
        if c is not None and c not in schema.names:
            raise UsageError(f"pool {name} has no column {c}")
    kind = schema.field(column).type
    if not (pa.types.is_timestamp(kind) or pa.types.is_date(kind)):
        raise UsageError(f"{column} is {kind}, not a timestamp or date: name one with --time")
    group = f", {quote(by)}" if by else ""
    filter_ = f" WHERE {_condition(where, schema)}" if where else ""
    sql = (
        f"SELECT date_trunc('{unit}', {quote(column)}) AS bucket{group}, count(*) AS n "
        f'FROM "{pool}"{filter_} GROUP BY ALL ORDER BY ALL'
    )
    run = run_sql(sql, lake.pool, lake, as_of=as_of, derived=derived)
    try:
        table = run.relation.to_arrow_table()
    except duckdb.Error as e:
        raise engine_error(e) from None
    return Histogram(table, unit, by, run.answered_from, sql)


def _condition(where: str, schema: pa.Schema) -> str:
    """``where`` parsed and checked as ``lake query -p POOL --where`` does (the same
    messages, with positions in the user's text), rendered back as SQL: the user's text is
    never pasted into the query."""
    from lake_core.expr import columns_of, parse_predicate, to_sql

    expr = parse_predicate(where)
    unknown = sorted(columns_of(expr) - set(schema.names))
    if unknown:
        raise UsageError(f"unknown column {unknown[0]!r} in --where")
    return to_sql(expr, schema)


__all__ = ["EVERY", "Histogram", "histogram", "parse_every"]
