"""``lake derive create|ls|refresh|drop``: derived pools, partial aggregations of a source
pool kept exact by refreshes, which ``lake query`` uses to answer aggregate queries (see
:mod:`lake_core.derived` and docs/derived.md)."""

from __future__ import annotations

import json

import click

from lake_cli.context import LakeContext, pass_lake, say
from lake_cli.options import argument, format_option, option
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
        f"derived pool {pool.name} created from {source}: {result.buckets:,} rows from "
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
        f"{result.buckets:,} rows written from {result.source_rows_read:,} source rows)"
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
        list_derived(lk.lake()), fmt, columns=["name", "source", "reflects", "current", "sql"]
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
