"""``lake derive create|ls|refresh|drop``: derived pools, partial aggregations of a source
pool kept exact by refreshes, which ``lake query`` uses to answer aggregate queries (see
:mod:`lake_core.derived` and docs/derived.md); and ``lake histogram``, event counts over time
drawn in the terminal (answered from a derived pool when one can)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from lake_cli.context import LakeContext, parse_time, pass_lake, say
from lake_cli.options import (
    argument,
    as_of_option,
    command,
    format_option,
    option,
    pool_option,
    where_option,
)
from lake_cli.parsing import LakeGroup, Number


@click.group(
    "derive",
    cls=LakeGroup,
    help="derived pools: partial aggregations of a pool, kept exact, that answer queries",
    short_help="derived pools: create, ls, refresh, drop",
    epilog="examples:\n"
    "  lake derive create hourly_delays --from flights --as \"SELECT date_trunc('hour', ts) "
    "AS hour, carrier, count(*) AS n, sum(dep_delay) AS dep_delay_sum FROM flights GROUP BY "
    'ALL"\n'
    "  lake derive refresh hourly_delays\n"
    "  lake derive ls -f json\n"
    "  lake derive drop hourly_delays\n",
)
def derive() -> None:
    pass


@derive.command(
    "create",
    help="create derived pool NAME from pool --from by the aggregate query --as, filled from "
    "the source's main branch; lake query answers matching aggregate queries from it",
    short_help="create a derived pool",
    epilog="examples:\n"
    "  lake derive create daily --from flights --as \"SELECT date_trunc('day', ts) AS day, "
    'origin, count(*) AS n, min(dep_delay) AS lo, max(dep_delay) AS hi FROM flights GROUP BY ALL"\n'
    "\nThe query: one SELECT over the source, one time bucket date_trunc('UNIT', column),\n"
    "plain columns, and count(*), count(x), sum(x), min(x), max(x), each named with AS;\n"
    "GROUP BY ALL; no WHERE (docs/derived.md).\n",
)
@argument("name", "NAME", "the derived pool to create: NAME or NAMESPACE.NAME")
@option("--from", "source", required=True, metavar="POOL", help="the source pool")
@option("--as", "sql", required=True, metavar="SQL", help="the aggregate query it keeps")
@format_option("table", "json", help="table: one line; json: the refresh's numbers")
@pass_lake
def derive_create(lk: LakeContext, name: str, source: str, sql: str, fmt: str) -> None:
    from lake_core.derived.maintain import create_derived

    pool, result = create_derived(lk.lake(), name, source, sql)
    if fmt == "json":
        say(json.dumps({"name": pool.name, **result.to_json()}))
        return
    say(
        f"derived pool {pool.name} created from {source}: {result.rows_written:,} rows from "
        f"{result.source_rows_read:,} source rows"
    )


@derive.command(
    "refresh",
    help="make derived pool NAME reflect its source's main tip: new objects' rows are "
    "aggregated and merged; removed objects' buckets are recomputed",
    short_help="bring a derived pool up to date",
    epilog="examples:\n  lake derive refresh hourly_delays\n  lake derive refresh hourly_delays -f json\n",
)
@argument("name", "NAME", "the derived pool")
@option(
    "--lock-timeout",
    type=Number(float),
    default=600.0,
    metavar="SECONDS",
    help="wait this long for the derived pool's maintenance lock (default 600)",
)
@format_option("table", "json", help="table: one line; json: what it did")
@pass_lake
def derive_refresh(lk: LakeContext, name: str, lock_timeout: float, fmt: str) -> None:
    from lake_core.derived.maintain import refresh

    lake = lk.lake()
    result = refresh(lake, lake.pool(name), lock_timeout=lock_timeout)
    if fmt == "json":
        say(json.dumps({"name": name, **result.to_json()}))
        return
    if result.commit is None:
        say(f"{name} is current (reflects {result.source_commit})")
        return
    say(
        f"{result.commit} committed: {name} reflects {result.source_commit} ({result.mode}; "
        f"{result.rows_written:,} rows written from {result.source_rows_read:,} source rows)"
    )


@derive.command(
    "ls",
    help="list derived pools: source, the source commit each reflects, whether that is the "
    "source's main tip, and the query",
    short_help="list derived pools",
    epilog="examples:\n  lake derive ls\n  lake derive ls -f json\n",
)
@format_option("table", "json", "csv")
@pass_lake
def derive_ls(lk: LakeContext, fmt: str) -> None:
    from lake_cli.output import write_records  # deferred: pyarrow (lake --help)
    from lake_core.derived.maintain import list_derived

    write_records(
        list_derived(lk.lake()),
        fmt,
        columns=["name", "source", "source_live", "reflects", "current", "sql"],
    )


@derive.command(
    "drop",
    help="drop derived pool NAME (its data goes with lake cleanup, as a dropped pool's)",
    short_help="drop a derived pool",
    epilog="examples:\n  lake derive drop hourly_delays\n",
)
@argument("name", "NAME", "the derived pool")
@pass_lake
def derive_drop(lk: LakeContext, name: str) -> None:
    from lake_core.derived.maintain import drop_derived

    drop_derived(lk.lake(), name)
    say(f"derived pool {name} dropped")


@command(
    "histogram",
    "draw a pool's event counts over time, by category (from a derived pool when one answers)",
    "  lake histogram -p flights --by carrier --every 1d\n"
    "  lake histogram -p flights --every 1mo --where \"origin = 'JFK'\"\n"
    "  lake histogram -p logs --time received --every 1h -f json --stats\n",
)
@pool_option("POOL[@REF]", "the pool, optionally @BRANCH or @COMMIT-ID (default main)")
@option(
    "--every",
    required=True,
    metavar="UNIT",
    help="bucket width: 1h, 1d, 1w, 1mo, 1q, 1y (or minute, hour, day, week, month, …)",
)
@option("--by", metavar="COLUMN", help="count per value of this column (one bar segment each)")
@option(
    "--time", "time_column", metavar="COLUMN", help="the time column (default: the key's first)"
)
@where_option()
@as_of_option("as of this ISO 8601 time, e.g. 2026-01-05T10:00:00Z")
@option("--stats", is_flag=True, help="print the pools read (answered_from), as JSON on stderr")
@format_option("table", "json", "csv", help="table: a bar chart; json, csv: the counts")
@pass_lake
def histogram(
    lk: LakeContext,
    pool: str,
    every: str,
    by: str | None,
    time_column: str | None,
    where: str | None,
    as_of: str | None,
    stats: bool,
    fmt: str,
) -> None:
    from lake_cli.output import write_records  # deferred: pyarrow (lake --help)
    from lake_core.derived.histogram import histogram as counts

    result = counts(
        lk.lake(),
        pool,
        every,
        by=by,
        time_column=time_column,
        where=where,
        as_of=parse_time(as_of),
    )
    if fmt == "table":
        draw_histogram(result.table, by)
    else:
        write_records(result.table, fmt)
    if stats:
        sys.stderr.write(json.dumps({"answered_from": result.answered_from}) + "\n")


#: Bar characters per category when there is no colour (not a terminal).
_SHADES = "█▓▒░#=+*"
_COLOURS = ("cyan", "magenta", "yellow", "green", "blue", "red", "bright_black", "white")


def draw_histogram(table: Any, by: str | None) -> None:
    """One line per bucket: the bucket, a bar of its count split by category (a colour, or a
    shade without colour; the legend first), the count. The longest bar fills the width."""
    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False, soft_wrap=False)
    rows = table.to_pylist()
    if not rows:
        console.print("no rows")
        return
    categories = sorted(
        {r.get(by) for r in rows} if by else {None}, key=lambda v: (v is None, str(v))
    )
    shown = categories[: len(_SHADES) - 1]
    slot = {c: i for i, c in enumerate(shown)}
    other = len(shown)  # every further category shares the last shade
    buckets: dict[Any, dict[int, int]] = {}
    for r in rows:
        parts = buckets.setdefault(r["bucket"], {})
        i = slot.get(r.get(by) if by else None, other)
        parts[i] = parts.get(i, 0) + int(r["n"])
    colour = console.color_system is not None

    def piece(i: int, width: int) -> Text:
        return Text("█" * width, style=_COLOURS[i]) if colour else Text(_SHADES[i] * width)

    if by:
        legend = Text(f"{by}: ")
        for c, i in slot.items():
            legend += piece(i, 1) + Text(f" {c}  ")
        if len(categories) > len(shown):
            legend += piece(other, 1) + Text(f" {len(categories) - len(shown)} more")
        console.print(legend)
    labels = {b: _label(b) for b in buckets}
    totals = {b: sum(p.values()) for b, p in buckets.items()}
    label_width = max(len(v) for v in labels.values())
    count_width = max(len(f"{t:,}") for t in totals.values())
    room = max(10, console.width - label_width - count_width - 3)
    peak = max(totals.values()) or 1
    for b, parts in buckets.items():
        line = Text(labels[b].ljust(label_width) + " ")
        for i in sorted(parts):
            line += piece(i, round(parts[i] * room / peak))
        line += Text(" " + f"{totals[b]:,}".rjust(count_width))
        console.print(line)


def _label(bucket: Any) -> str:
    text = bucket.isoformat() if hasattr(bucket, "isoformat") else str(bucket)
    for tail in ("T00:00:00+00:00", "+00:00", ":00:00"):
        if text.endswith(tail) and tail != ":00:00":
            text = text[: -len(tail)]
    return text.replace("T", " ")
