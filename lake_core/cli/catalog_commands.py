"""The ``lake catalog …`` commands and ``lake ls --at-version/--as-of``: the catalog's
versions, time travel, rollback and export."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lake_core.catalog import CatalogPoolRegistry
from lake_core.catalog.actions import describe, summary
from lake_core.cli.commands import _lake, _say, _time
from lake_core.lake import Lake
from lake_core.output import write_records
from lake_core.registry import PoolConfig
from lake_core.stores.factory import open_store


def _count(text: str) -> int:
    """``-n N``: a whole number, 0 or more (argparse reports the error as a usage error)."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number, 0 or more, not {text!r}")
    return n


def add_ls_time_travel(sp: argparse.ArgumentParser) -> None:
    """``--at-version N`` / ``--as-of TIME`` for ``lake ls``."""
    when = sp.add_mutually_exclusive_group()
    when.add_argument(
        "--at-version",
        metavar="N",
        help="the pools at catalog version N (or at the version an export of that name recorded)",
    )
    when.add_argument("--as-of", metavar="TIME", help="the pools at the catalog version of TIME")


def pools_for_ls(lake: Lake, args: argparse.Namespace) -> list[PoolConfig]:
    """The pools ``lake ls`` lists: now, or at the version ``--at-version``/``--as-of`` name."""
    at_version = getattr(args, "at_version", None)
    as_of = _time(getattr(args, "as_of", None))
    if at_version is not None:
        return CatalogPoolRegistry.list_at(lake.catalog.resolve(at_version))
    if as_of is not None:
        return CatalogPoolRegistry.list_at(lake.catalog.snapshot_as_of(as_of))
    return lake.pools()


def add_catalog_commands(sub: Any, cmd: Any) -> None:
    """Register ``lake catalog log|rollback|export`` (``cmd`` is app.py's helper)."""
    sp = cmd(
        "catalog",
        None,
        "the catalog's versions: log, rollback, export",
        "  lake catalog log\n  lake catalog rollback 7\n  lake catalog export /backups/cat --full\n",
    )
    inner = sp.add_subparsers(dest="catalog_command", metavar="COMMAND", parser_class=type(sp))
    inner.required = True

    def subcmd(name: str, func: Any, help_: str, examples: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = inner.add_parser(
            name,
            help=help_,
            description=help_,
            formatter_class=sp.formatter_class,
            epilog=f"examples:\n{examples}",
        )
        p.set_defaults(func=func)
        return p

    p = subcmd(
        "log",
        cmd_catalog_log,
        "catalog versions, newest first, with time and actions",
        "  lake catalog log\n  lake catalog log -n 5 -f json\n",
    )
    p.add_argument("-f", dest="format", default="table", choices=["table", "json", "csv"])
    p.add_argument(
        "-n", dest="limit", type=_count, metavar="N", help="only the newest N versions"
    )

    p = subcmd(
        "rollback",
        cmd_catalog_rollback,
        "commit a new catalog version equal to version N; prints the new version",
        "  lake catalog rollback 7\n",
    )
    p.add_argument("version", type=int, metavar="N")

    p = subcmd(
        "export",
        cmd_catalog_export,
        "copy the current catalog snapshot to DEST: its root only (minimal), or with --full "
        "everything it reaches",
        "  lake catalog export /backups/catalog-2026-01-05\n"
        "  lake catalog export s3://bucket/exports/cat --full\n",
    )
    p.add_argument("dest", metavar="DEST")
    p.add_argument("--full", action="store_true", help="copy every reachable file")
    p.add_argument("--name", metavar="NAME", help="name to record the export under (else DEST)")


def cmd_catalog_log(args: argparse.Namespace) -> None:
    lake = _lake(args)
    rows = []
    for snap in lake.catalog.log(args.limit):
        actions = [row.action for row in snap.root.actions]
        rows.append(
            {
                "version": snap.version,
                "time": snap.created_at,
                "rollback_from": snap.rollback_from,
                "actions": (
                    [describe(a) for a in actions]
                    if args.format == "json"
                    else "; ".join(summary(a) for a in actions)
                ),
            }
        )
    write_records(rows, args.format, columns=["version", "time", "rollback_from", "actions"])


def cmd_catalog_rollback(args: argparse.Namespace) -> None:
    _say(str(_lake(args).catalog.rollback(args.version)))


def cmd_catalog_export(args: argparse.Namespace) -> None:
    lake = _lake(args)
    dest = open_store(args.dest)
    result = lake.catalog.export(dest, full=args.full, name=args.name)
    kind = "full" if result.full else "minimal"
    sys.stdout.write(
        f"exported catalog version {result.version} to {result.destination} "
        f"({kind}, {result.files} files); recorded in catalog version "
        f"{result.recorded_version}\n"
    )
