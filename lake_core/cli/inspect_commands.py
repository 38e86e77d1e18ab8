"""``lake schema``, ``count`` and ``diff``: what a pool holds, read from commit metadata."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from lake_core.cli.commands import _pool_ref, _say, _time
from lake_core.errors import UsageError
from lake_core.names import split_ref
from lake_core.output import write_records
from lake_core.units import human_size


def add_inspect_commands(cmd: Any) -> None:
    """Register the commands on the ``cmd(name, func, help, examples)`` helper of app.py."""
    sp = cmd(
        "schema",
        cmd_schema,
        "print a pool's columns: type, nullability, and which are key fields",
        "  lake schema -p logs\n  lake schema -p logs@dev -f json\n"
        "  lake schema -p logs --as-of 2026-01-05T10:00:00Z\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL[@REF]", help=_POOL_REF)
    sp.add_argument("--as-of", metavar="TIME", help=_AS_OF)
    sp.add_argument(
        "-f", dest="format", default="table", choices=["table", "json", "csv"], help=_FORMAT
    )

    sp = cmd(
        "count",
        cmd_count,
        "print the number of records (from commit metadata where it can)",
        "  lake count -p logs\n"
        "  lake count -p logs --where \"ts >= '2026-01-05'\"\n"
        "  lake count -p logs@dev --as-of 2026-01-05T10:00:00Z --stats\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL[@REF]", help=_POOL_REF)
    sp.add_argument("--as-of", metavar="TIME", help=_AS_OF)
    sp.add_argument("--where", metavar="SQL-EXPR", help="count only records for which it is true")
    sp.add_argument(
        "--stats",
        action="store_true",
        help="print how many objects were counted from metadata and how many read, "
        "as JSON on stderr",
    )

    sp = cmd(
        "diff",
        cmd_diff,
        "compare two refs: objects and rows added and removed from REF1 to REF2",
        "  lake diff -p logs main dev\n"
        "  lake diff -p logs 2Cp6AbqYy1bLoRLcTgqhAlYjKeM main -f json\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL", help="the pool")
    sp.add_argument("ref1", metavar="REF1", help="branch or commit id to compare from")
    sp.add_argument("ref2", metavar="REF2", help="branch or commit id to compare to")
    sp.add_argument("-f", dest="format", default="table", choices=["table", "json"], help=_FORMAT)


    sp = cmd(
        "verify",
        cmd_verify,
        "read every live object whole and check it against its commit",
        "  lake verify -p logs\n  lake verify -p logs@dev -f json\n",
    )
    sp.add_argument(
        "-p",
        dest="pool",
        required=True,
        metavar="POOL[@REF]",
        help="the pool (every branch's live objects), or only those of @BRANCH or @COMMIT-ID",
    )
    sp.add_argument("-f", dest="format", default="table", choices=["table", "json"], help=_FORMAT)


_POOL_REF = "the pool, optionally @BRANCH or @COMMIT-ID (default main)"
_AS_OF = "the branch as it was at this ISO 8601 time, e.g. 2026-01-05T10:00:00Z"
_FORMAT = "output format (default table)"


def cmd_schema(args: argparse.Namespace) -> None:
    pool, ref = _pool_ref(args)
    snap = pool.snapshot(pool.resolve(ref, _time(args.as_of)))
    key = pool.config.key.fields
    schema = snap.schema
    rows = []
    for f in schema if schema is not None else []:
        # Records lacking a column read as null, as do objects written before it existed.
        nulls = sum(
            o.count if f.name not in o.columns else o.columns[f.name].nulls
            for o in snap.objects.values()
        )
        rows.append(
            {
                "name": f.name,
                "type": str(f.type),
                "nullable": f.nullable,
                "nulls": nulls,
                "key": key.index(f.name) + 1 if f.name in key else None,
            }
        )
    missing = [k for k in key if schema is None or k not in schema.names]
    if args.format == "table":
        write_records(
            [{**r, "key": r["key"] or ""} for r in rows],
            "table",
            columns=["name", "type", "nullable", "nulls", "key"],
        )
        for k in missing:
            _say(f"(key field {k} is in no record yet)")
        return
    write_records(rows, args.format, columns=["name", "type", "nullable", "nulls", "key"])


def cmd_count(args: argparse.Namespace) -> None:
    from lake_core.counting import count_rows

    pool, ref = _pool_ref(args)
    snap = pool.snapshot(pool.resolve(ref, _time(args.as_of)))
    result = count_rows(pool.store, pool.id, pool.config.key, snap, args.where)
    _say(str(result.rows))
    if args.stats:
        sys.stderr.write(json.dumps(result.to_json()) + "\n")


def cmd_diff(args: argparse.Namespace) -> None:
    from lake_core.diff import diff_snapshots

    if split_ref(args.pool)[1] is not None:
        raise UsageError("lake diff takes the two refs as arguments: lake diff -p POOL REF1 REF2")
    pool, _ = _pool_ref(args)
    a = pool.snapshot(pool.resolve(args.ref1))
    b = pool.snapshot(pool.resolve(args.ref2))
    diff = diff_snapshots(a, b)
    if args.format == "json":
        _say(json.dumps(diff.to_json()))
        return
    bytes_added = sum(o.size for o in diff.added)
    bytes_removed = sum(o.size for o in diff.removed)
    _say(f"from {args.ref1} ({a.commit_id or 'empty'}) to {args.ref2} ({b.commit_id or 'empty'})")
    _say(
        f"objects: +{len(diff.added)} -{len(diff.removed)}  "
        f"({human_size(bytes_added)} added, {human_size(bytes_removed)} removed)"
    )
    _say(f"rows:    +{diff.rows_added:,} -{diff.rows_removed:,}  (net {diff.net_rows:+,})")
    for o in sorted(diff.added, key=lambda o: o.id):
        _say(f"+ {o.id}  {o.count:,} rows  {human_size(o.size)}")
    for o in sorted(diff.removed, key=lambda o: o.id):
        _say(f"- {o.id}  {o.count:,} rows  {human_size(o.size)}")


def cmd_verify(args: argparse.Namespace) -> None:
    from lake_core.integrity import raise_for_verdicts, verify_objects

    pool, ref = _pool_ref(args)
    tips = [pool.resolve(ref)] if ref is not None else list(pool.branches().values())
    live: dict[str, Any] = {}
    for tip in tips:
        live.update(pool.snapshot(tip).objects)
    metas = sorted(live.values(), key=lambda o: o.id)
    verdicts = verify_objects(pool.store, pool.id, metas, pool.name)
    rows = [
        {
            "id": v.object_id,
            "size": v.size if args.format == "json" else human_size(v.size),
            "checksum": v.checksummed,
            "status": "ok" if v.problem is None else "corrupt",
            "problem": v.problem,
        }
        for v in verdicts
    ]
    if args.format == "json" or any(v.problem for v in verdicts):
        write_records(rows, args.format, columns=["id", "size", "checksum", "status", "problem"])
        sys.stdout.flush()
    raise_for_verdicts(verdicts, pool.name)
    if args.format == "table":
        total = sum(v.size for v in verdicts)
        unsummed = sum(1 for v in verdicts if not v.checksummed)
        note = f"; {unsummed} written before checksums were recorded" if unsummed else ""
        _say(f"verified {len(verdicts)} objects ({human_size(total)}): all intact{note}")
