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
    key's first field) and per ``by`` value. ``where``: a SQL condition on the rows. Raises
    UsageError for an unknown column or a time column that is not a timestamp or date."""
    from lake_core.names import split_ref
    from lake_core.sql import run_sql

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
    filter_ = f" WHERE {where}" if where else ""
    sql = (
        f"SELECT date_trunc('{unit}', {quote(column)}) AS bucket{group}, count(*) AS n "
        f'FROM "{pool}"{filter_} GROUP BY ALL ORDER BY ALL'
    )
    run = run_sql(sql, lake.pool, lake, as_of=as_of, derived=derived)
    table = run.relation.to_arrow_table()
    return Histogram(table, unit, by, run.answered_from, sql)


__all__ = ["EVERY", "Histogram", "histogram", "parse_every"]
