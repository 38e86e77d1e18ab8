"""``lake ls`` (pools and views, now or at a catalog version or time) and ``lake catalog log|rollback|export``:
the catalog's versions, time travel, rollback and export."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from lake_cli.context import LakeContext, parse_time, pass_lake, say
from lake_cli.options import argument, command, format_option, option
from lake_cli.parsing import Checked, LakeGroup, Number
from lake_core.units import human_size

if TYPE_CHECKING:
    from lake_core.lake import Lake
    from lake_core.registry import PoolConfig
    from lake_core.views import View


def _count(text: str) -> int:
    """``-n N``: a whole number, 0 or more."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise ValueError(f"must be a whole number, 0 or more, not {text!r}")
    return n


def _listing(
    lake: Lake, at_version: str | None, as_of: str | None
) -> tuple[list[PoolConfig], list[View]]:
    """The pools and views ``lake ls`` lists: now, or at the version ``--at-version`` or
    ``--as-of`` names."""
    return lake.listing(at_version, parse_time(as_of))


@command(
    "ls",
    "list pools and views (now, or at a catalog version or time)",
    "  lake ls\n  lake ls -f json\n  lake ls --at-version 12\n  lake ls --as-of 2026-01-05T10:00:00Z\n",
    exclusive=[("--at-version", "--as-of")],
)
@format_option("table", "json", "csv")
@option(
    "--at-version",
    metavar="N",
    help="the pools at catalog version N (or at the version an export of that name recorded)",
)
@option("--as-of", metavar="TIME", help="the pools at the catalog version of TIME")
@pass_lake
def ls(lk: LakeContext, fmt: str, at_version: str | None, as_of: str | None) -> None:
    from lake_cli.output import write_records  # deferred: pyarrow, numpy (lake --help)

    pools, views = _listing(lk.lake(), at_version, as_of)
    rows: list[dict[str, Any]] = [
        {
            "name": str(p.name),
            "id": p.id,
            "key": ",".join(p.key.fields),
            "order": p.key.order,
            "target_size": p.target_size if fmt != "table" else human_size(p.target_size),
            "created": p.created,
            "schema_mode": p.schema_mode,
            # A JSON boolean in -f json; true/false in text, as lake query prints booleans.
            "unique": p.unique if fmt == "json" else str(p.unique).lower(),
        }
        for p in pools
    ]
    columns = ["name", "id", "key", "order", "target_size", "created", "schema_mode", "unique"]
    if fmt == "json":
        # Scripts get the retention too (seconds; null: remembered forever); the table keeps
        # the contract's columns.
        columns.append("txn_retention_seconds")
        for row, p in zip(rows, pools, strict=True):
            retention = p.txn_retention
            row["txn_retention_seconds"] = (
                None if retention is None else int(retention.total_seconds())
            )
    if views:
        # A catalog version with views lists them after the pools, told apart by a last
        # column ``kind``; without views the listing is exactly as it always was.
        for row in rows:
            row["kind"] = "pool"
        rows += [
            {
                **dict.fromkeys(columns),
                "name": str(v.name),
                "id": v.id,
                "created": v.created,
                "kind": "view",
            }
            for v in views
        ]
        columns.append("kind")
    write_records(rows, fmt, columns=columns)


@click.group(
    "catalog",
    cls=LakeGroup,
    help="the catalog's versions: log, rollback, export",
    short_help="the catalog's versions: log, rollback, export",
    epilog="examples:\n"
    "  lake catalog log\n  lake catalog rollback 7\n  lake catalog export /backups/cat --full\n",
)
def catalog() -> None:
    pass


@catalog.command(
    "log",
    help="catalog versions, newest first, with time and actions",
    short_help="catalog versions, newest first, with time and actions",
    epilog="examples:\n  lake catalog log\n  lake catalog log -n 5 -f json\n",
)
@format_option("table", "json", "csv")
@option(
    "-n",
    "limit",
    type=Checked(_count, "count"),
    metavar="N",
    help="only the newest N versions",
)
@pass_lake
def catalog_log(lk: LakeContext, fmt: str, limit: int | None) -> None:
    from lake_cli.output import write_records  # deferred: pyarrow, numpy (lake --help)

    rows = [
        {
            "version": v.version,
            "time": v.time,
            "rollback_from": v.rollback_from,
            "actions": list(v.actions) if fmt == "json" else "; ".join(v.summaries),
        }
        for v in lk.lake().catalog_versions(limit)
    ]
    write_records(rows, fmt, columns=["version", "time", "rollback_from", "actions"])


@catalog.command(
    "rollback",
    help="commit a new catalog version equal to version N; prints the new version",
    short_help="commit a new catalog version equal to version N; prints the new version",
    epilog="examples:\n  lake catalog rollback 7\n",
)
@argument(
    "version",
    "N",
    "the catalog version to restore (see lake catalog log)",
    type=Number(int),
)
@pass_lake
def catalog_rollback(lk: LakeContext, version: int) -> None:
    say(str(lk.lake().catalog.rollback(version)))


@catalog.command(
    "export",
    help="copy the current catalog snapshot to DEST: its root only (minimal), or with --full "
    "everything it reaches",
    short_help="copy the current catalog snapshot to DEST: its root only (minimal), or with "
    "--full everything it reaches",
    epilog="examples:\n"
    "  lake catalog export /backups/catalog-2026-01-05\n"
    "  lake catalog export s3://bucket/exports/cat --full\n",
)
@argument("dest", "DEST", "directory or s3:// URI to copy the catalog to")
@option("--full", is_flag=True, help="copy every reachable file")
@option("--name", metavar="NAME", help="name to record the export under (else DEST)")
@pass_lake
def catalog_export(lk: LakeContext, dest: str, full: bool, name: str | None) -> None:
    from lake_core.stores.factory import open_store  # deferred: the S3 store (lake --help)

    lake = lk.lake()
    result = lake.catalog.export(open_store(dest), full=full, name=name)
    kind = "full" if result.full else "minimal"
    sys.stdout.write(
        f"exported catalog version {result.version} to {result.destination} "
        f"({kind}, {result.files} files); recorded in catalog version "
        f"{result.recorded_version}\n"
    )
