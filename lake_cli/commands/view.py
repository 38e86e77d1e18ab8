"""``lake view create|ls|drop``: SQL views kept in the catalog (see :mod:`lake_core.views`)."""

from __future__ import annotations

import click

from lake_cli.context import LakeContext, parse_time, pass_lake, say
from lake_cli.options import argument, format_option, option
from lake_cli.parsing import LakeGroup


@click.group(
    "view",
    cls=LakeGroup,
    help="SQL views in the catalog: create, ls, drop (query one by name with lake query)",
    short_help="SQL views in the catalog: create, ls, drop",
    epilog="examples:\n"
    "  lake view create jfk \"SELECT * FROM flights WHERE origin = 'JFK'\"\n"
    "  lake view ls\n  lake view ls --at-version 7 -f json\n  lake view drop jfk\n",
)
def view() -> None:
    pass


@view.command(
    "create",
    help="save a read-only SELECT as view NAME (the pools it names must exist)",
    short_help="save a read-only SELECT as view NAME",
    epilog="examples:\n"
    "  lake view create jfk \"SELECT * FROM flights WHERE origin = 'JFK'\"\n"
    "  lake view create ops.daily \"SELECT date_trunc('day', ts) AS d, count(*) AS n "
    'FROM ops.logs GROUP BY d"\n',
)
@argument("name", "NAME", "the view: NAME or NAMESPACE.NAME (pool-name rules)")
@argument("sql", "SQL", "one SELECT over pools, metadata tables and views")
@pass_lake
def view_create(lk: LakeContext, name: str, sql: str) -> None:
    lake = lk.lake()
    version = lake.create_view(name, sql)
    say(f"view {name} created (catalog version {version})")


@view.command(
    "ls",
    help="list views: name, SQL, the tables it names, created (now, or at a catalog version "
    "or time)",
    short_help="list views",
    epilog="examples:\n  lake view ls\n  lake view ls -f json\n  lake view ls --at-version 7\n"
    "  lake view ls --as-of 2026-01-05T10:00:00Z\n",
    exclusive=[("--at-version", "--as-of")],
)
@format_option("table", "json", "csv")
@option(
    "--at-version",
    metavar="N",
    help="the views at catalog version N (or at the version an export of that name recorded)",
)
@option("--as-of", metavar="TIME", help="the views at the catalog version of TIME")
@pass_lake
def view_ls(lk: LakeContext, fmt: str, at_version: str | None, as_of: str | None) -> None:
    from lake_cli.output import write_records  # deferred: pyarrow, numpy (lake --help)
    from lake_core.views import list_views  # deferred: protobuf (lake --help)

    snap = lk.lake().catalog.snapshot_at(at_version, parse_time(as_of))
    rows = [
        {
            "name": str(v.name),
            "sql": v.sql,
            "references": list(v.references) if fmt == "json" else ",".join(v.references),
            "created": v.created,
        }
        for v in list_views(snap)
    ]
    write_records(rows, fmt, columns=["name", "sql", "references", "created"])


@view.command(
    "drop",
    help="remove view NAME (a catalog rollback restores it)",
    short_help="remove view NAME",
    epilog="examples:\n  lake view drop jfk\n",
)
@argument("name", "NAME", "the view: NAME or NAMESPACE.NAME")
@pass_lake
def view_drop(lk: LakeContext, name: str) -> None:
    version = lk.lake().drop_view(name)
    say(f"view {name} dropped (catalog version {version})")
