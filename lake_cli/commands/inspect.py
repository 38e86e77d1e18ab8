"""``lake schema``, ``count``, ``diff``, ``verify``: what a pool holds, read from commit
metadata (``verify`` reads the objects themselves)."""

from __future__ import annotations

import json
import sys

from lake_cli.context import LakeContext, parse_time, pass_lake, say
from lake_cli.options import argument, as_of_option, command, format_option, option, pool_option
from lake_core.errors import UsageError
from lake_core.names import split_ref
from lake_core.units import counted, human_size

_POOL_REF = "the pool, optionally @BRANCH or @COMMIT-ID (default main)"
_AS_OF = "the branch as it was at this ISO 8601 time, e.g. 2026-01-05T10:00:00Z"
_FORMAT = "output format (default table)"


@command(
    "schema",
    "print a pool's columns: type, nullability, and which are key fields",
    "  lake schema -p logs\n  lake schema -p logs@dev -f json\n"
    "  lake schema -p logs --as-of 2026-01-05T10:00:00Z\n",
)
@pool_option("POOL[@REF]", _POOL_REF)
@as_of_option(_AS_OF)
@format_option("table", "json", "csv", help=_FORMAT)
@pass_lake
def schema(lk: LakeContext, pool: str, as_of: str | None, fmt: str) -> None:
    from lake_cli.output import write_records  # deferred: pyarrow, numpy (lake --help)

    source, ref = lk.pool_ref(pool)
    snap = source.snapshot(source.resolve(ref, parse_time(as_of)))
    key = source.config.key.names(snap.schema)
    columns = snap.schema
    rows = []
    for f in columns if columns is not None else []:
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
    missing = [k for k in key if columns is None or k not in columns.names]
    if fmt == "table":
        write_records(
            [{**r, "key": r["key"] or ""} for r in rows],
            "table",
            columns=["name", "type", "nullable", "nulls", "key"],
        )
        for k in missing:
            say(f"(key field {k} is in no record yet)")
        otree = source.config.otree
        if otree is not None:
            say(
                f"(OTree over {', '.join(otree.columns)}, cube size {otree.cube_size}; "
                "_lake_weight is each row's weight: lake otree -p POOL)"
            )
        return
    write_records(rows, fmt, columns=["name", "type", "nullable", "nulls", "key"])


@command(
    "otree",
    "print an OTree pool's revisions and cubes (depth, blocks, rows, weight range)",
    "  lake otree -p trips\n  lake otree -p trips@dev -f json\n"
    "  lake query 'SELECT depth, sum(elements) FROM \"trips$cubes\" GROUP BY depth'\n",
)
@pool_option("POOL[@REF]", _POOL_REF)
@as_of_option(_AS_OF)
@format_option("table", "json", "csv", help=_FORMAT)
@pass_lake
def otree(lk: LakeContext, pool: str, as_of: str | None, fmt: str) -> None:
    from lake_cli.output import write_records  # deferred: pyarrow, numpy (lake --help)
    from lake_core.otree.introspect import cubes_table, revisions_table
    from lake_core.otree.settings import refuse_unless_otree

    source, ref = lk.pool_ref(pool)
    layout = refuse_unless_otree(source.config.otree, source.name)
    cubes = cubes_table(source, ref, parse_time(as_of)).to_pylist()
    revisions = revisions_table(layout).to_pylist()
    if fmt == "json":
        say(
            json.dumps(
                {
                    "columns": list(layout.columns),
                    "cube_size": layout.cube_size,
                    "weight": layout.weight,
                    "revisions": [{**r, "created": r["created"].isoformat()} for r in revisions],
                    "cubes": cubes,
                }
            )
        )
        return
    if fmt == "table":
        say(
            f"OTree over {', '.join(layout.columns)}; cube size {layout.cube_size}; "
            f"weight {layout.weight}"
        )
        for r in revisions:
            say(f"revision {r['revision']}: {r['transformations']}")
        if not cubes:
            say("(no rows yet)")
            return
    shown = [
        {
            **c,
            "cube": "(unindexed)" if c["revision"] == 0 else (c["cube"] or '""'),
            "min_fraction": None if c["min_fraction"] is None else round(c["min_fraction"], 6),
            "max_fraction": None if c["max_fraction"] is None else round(c["max_fraction"], 6),
        }
        for c in cubes
    ]
    write_records(
        shown,
        fmt,
        columns=[
            "revision",
            "cube",
            "depth",
            "blocks",
            "objects",
            "elements",
            "min_fraction",
            "max_fraction",
        ],
    )


@command(
    "count",
    "print the number of records (from commit metadata where it can)",
    "  lake count -p logs\n"
    "  lake count -p logs --where \"ts >= '2026-01-05'\"\n"
    "  lake count -p logs@dev --as-of 2026-01-05T10:00:00Z --stats\n",
)
@pool_option("POOL[@REF]", _POOL_REF)
@as_of_option(_AS_OF)
@option("--where", metavar="SQL-EXPR", help="count only records for which it is true")
@option(
    "--stats",
    is_flag=True,
    help="print how many objects were counted from metadata and how many read, as JSON on stderr",
)
@pass_lake
def count(lk: LakeContext, pool: str, as_of: str | None, where: str | None, stats: bool) -> None:
    source, ref = lk.pool_ref(pool)
    result = source.count(where, ref, as_of=parse_time(as_of))
    say(str(result.rows))
    if stats:
        sys.stderr.write(json.dumps(result.to_json()) + "\n")


@command(
    "diff",
    "compare two refs: objects and rows added and removed from REF1 to REF2",
    "  lake diff -p logs main dev\n  lake diff -p logs 2Cp6AbqYy1bLoRLcTgqhAlYjKeM main -f json\n",
)
@pool_option("POOL", "the pool")
@argument("ref1", "REF1", "branch or commit id to compare from")
@argument("ref2", "REF2", "branch or commit id to compare to")
@format_option("table", "json", help=_FORMAT)
@pass_lake
def diff(lk: LakeContext, pool: str, ref1: str, ref2: str, fmt: str) -> None:
    if split_ref(pool)[1] is not None:
        raise UsageError("lake diff takes the two refs as arguments: lake diff -p POOL REF1 REF2")
    source = lk.pool(pool)
    found = source.diff(ref1, ref2)
    if fmt == "json":
        say(json.dumps(found.to_json()))
        return
    bytes_added = sum(o.size for o in found.added)
    bytes_removed = sum(o.size for o in found.removed)
    a, b = source.resolve(ref1), source.resolve(ref2)
    say(f"from {ref1} ({a or 'empty'}) to {ref2} ({b or 'empty'})")
    say(
        f"objects: +{len(found.added)} -{len(found.removed)}  "
        f"({human_size(bytes_added)} added, {human_size(bytes_removed)} removed)"
    )
    say(f"rows:    +{found.rows_added:,} -{found.rows_removed:,}  (net {found.net_rows:+,})")
    for o in sorted(found.added, key=lambda o: o.id):
        say(f"+ {o.id}  {counted(o.count, 'row')}  {human_size(o.size)}")
    for o in sorted(found.removed, key=lambda o: o.id):
        say(f"- {o.id}  {counted(o.count, 'row')}  {human_size(o.size)}")


@command(
    "verify",
    "read every live object whole and check it against its commit",
    "  lake verify -p logs\n  lake verify -p logs@dev -f json\n",
)
@pool_option(
    "POOL[@REF]",
    "the pool (every branch's live objects), or only those of @BRANCH or @COMMIT-ID",
)
@format_option("table", "json", help=_FORMAT)
@pass_lake
def verify(lk: LakeContext, pool: str, fmt: str) -> None:
    from lake_cli.output import write_records  # deferred: pyarrow, numpy (lake --help)
    from lake_core.integrity import raise_for_verdicts

    source, ref = lk.pool_ref(pool)
    verdicts = source.verify(ref, check=False)
    rows = [
        {
            "id": v.object_id,
            "size": v.size if fmt == "json" else human_size(v.size),
            "checksum": v.checksummed,
            "status": v.status,
            "problem": v.problem,
        }
        for v in verdicts
    ]
    if fmt == "json" or any(v.problem for v in verdicts):
        write_records(rows, fmt, columns=["id", "size", "checksum", "status", "problem"])
        sys.stdout.flush()
    raise_for_verdicts(verdicts, source.name)
    if fmt == "table":
        total = sum(v.size for v in verdicts)
        unsummed = sum(1 for v in verdicts if not v.checksummed)
        note = f"; {unsummed} written before checksums were recorded" if unsummed else ""
        say(f"verified {len(verdicts)} objects ({human_size(total)}): all intact{note}")
