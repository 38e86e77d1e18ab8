"""The everyday commands: ``init``, ``create``, ``drop``; ``load``, ``add``, ``status``,
``commit``; ``query``, ``objects``, ``log``; ``branch``, ``merge``, ``delete``, ``revert``.

Each resolves its settings at the edge, calls lake_core, and prints per the contract (the
last line of a committing command is ``<id> committed``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from lake_cli import report
from lake_cli.context import LakeContext, lake_class, parse_time, pass_lake, say
from lake_cli.options import (
    argument,
    as_of_option,
    command,
    commit_options,
    complete_pools,
    format_option,
    input_format_option,
    option,
    pool_option,
    spark_options,
    where_option,
)
from lake_cli.parsing import Choice, CommandLineError, Number
from lake_core.clock import to_iso
from lake_core.errors import NoRowsMatchedError, UsageError
from lake_core.names import MAIN
from lake_core.units import human_size, parse_duration, parse_fraction, parse_size

if TYPE_CHECKING:
    import pyarrow as pa

    from lake_core.pool import Pool

_TO_BRANCH = "the pool, optionally @BRANCH to commit to (default main)"
_FILES = "(ndjson, json, csv, parquet, arrow; .gz read too); - is stdin"


@command(
    "init",
    "create a lake at the URI (fails if one exists)",
    "  lake --lake /tmp/lake init\n  lake --lake s3://bucket/lake init\n",
)
@pass_lake
def init(lk: LakeContext) -> None:
    config = lk.config()
    lake_class().init(config)
    say(f"initialized lake at {config.uri}")


@command(
    "create",
    "create a pool with branch main",
    "  lake create logs\n  lake create ns1.events --orderby user,ts:asc --target-size 64MB\n"
    "  lake create metrics --orderby ts:asc --schema-mode strict\n"
    "  lake create events --orderby ts --txn-retention 90d\n"
    "  lake create customers --orderby id:asc --unique   # loads upsert by id\n"
    "  lake create seen --orderby this --unique   # the whole record is the key\n",
)
@argument("pool", "POOL", "name of the new pool: NAME or NAMESPACE.NAME")
@option(
    "--orderby",
    default="ts:desc",
    metavar="KEY[,KEY…][:asc|:desc]",
    help="the pool key: fields (distinct column names) and direction (default ts:desc); "
    "this: the whole record",
)
@option(
    "--partition-by",
    metavar="EXPR",
    help="partition objects by a column or day(ts)/month(ts)/year(ts)",
)
@option(
    "--target-size",
    default="128MB",
    metavar="SIZE",
    help="object size to aim for, e.g. 16KB, 64MB (default 128MB)",
)
@option(
    "--schema-mode",
    default="merge",
    type=Choice("merge", "strict"),
    help="merge (default): new columns union into the schema; strict: a load bringing "
    "columns the pool lacks, or with no row having the pool key, is refused (the first "
    "load into an empty pool defines the schema)",
)
@option(
    "--unique",
    is_flag=True,
    help="rows are unique by the pool key: every load upserts (a live key's row is "
    "replaced, the last of duplicate keys in one load wins; see lake upsert)",
)
@option(
    "--txn-retention",
    default="30d",
    metavar="DURATION|forever",
    help="how long application transaction ids (Pool.load(txn=…), the Dagster IO manager's "
    "exactly-once markers) are remembered: e.g. 7d, 90d, forever (default 30d)",
)
@option(
    "--seek-stride",
    default="4MB",
    metavar="SIZE",
    help="uncompressed bytes per row group, the smallest unit a read fetches (default 4MB); "
    "1MB suits lookups through a search index of values scattered over the key (they read "
    "a quarter as much) at some load time (docs/cli.md, Search indexes)",
)
@option(
    "--layout",
    default="sorted",
    type=Choice("sorted", "otree"),
    help="sorted (default): objects sorted by the pool key; otree: laid out in an OTree over "
    "the --index columns, for box queries over several columns and --sample (docs/otree.md)",
)
@option(
    "--index",
    "index_columns",
    metavar="A,B[,…]",
    help="with --layout otree: the columns the OTree indexes (1 to 6; 2 to 4 work best)",
)
@option(
    "--cube-size",
    type=Number(int),
    metavar="N",
    help="with --layout otree: rows per cube (default 100000); smaller cubes prune finer, "
    "larger ones make fewer, bigger row groups",
)
@option(
    "--weight",
    type=Choice("hash", "salted"),
    help="with --layout otree: hash (default) weighs a row by Spark's hash of its indexed "
    "columns; salted adds a random number per row (repeated values no longer sample alike)",
)
@pass_lake
def create(
    lk: LakeContext,
    pool: str,
    orderby: str,
    partition_by: str | None,
    target_size: str,
    schema_mode: str,
    unique: bool,
    txn_retention: str,
    seek_stride: str,
    layout: str,
    index_columns: str | None,
    cube_size: int | None,
    weight: str | None,
) -> None:
    retention = None if txn_retention.strip() == "forever" else parse_duration(txn_retention)
    otree = None
    if layout == "otree":
        from lake_core.otree.settings import parse_layout

        if index_columns is None:
            raise UsageError("--layout otree needs --index COLUMNS (e.g. --index lon,lat)")
        otree = parse_layout(index_columns, cube_size, weight)
    else:
        given = {"--index": index_columns, "--cube-size": cube_size, "--weight": weight}
        extra = [name for name, value in given.items() if value is not None]
        if extra:
            raise UsageError(f"{extra[0]} goes with --layout otree")
    created = lk.lake().create_pool(
        pool,
        orderby,
        target_size=parse_size(target_size),
        seek_stride=parse_size(seek_stride),
        partition_by=partition_by,
        schema_mode=schema_mode,
        unique=unique,
        txn_retention=retention,
        otree=otree,
    )
    say(f"pool {created.name} created")


@command(
    "drop",
    "remove a pool from the registry (data stays until cleanup)",
    "  lake drop logs --force\n",
)
@argument("pool", "POOL", "the pool to drop")
@option("--force", is_flag=True, help="really drop it (required)")
@pass_lake
def drop(lk: LakeContext, pool: str, force: bool) -> None:
    if not force:
        raise UsageError(f"dropping pool {pool} needs --force")
    config = lk.lake().drop_pool(pool)
    say(f"pool {config.name} dropped")


def _progress(quiet: bool) -> Any:
    if quiet or not sys.stderr.isatty():
        return None
    state = {"objects": 0, "rows": 0, "bytes": 0}

    def on_object(obj: Any) -> None:
        state["objects"] += 1
        state["rows"] += obj.count
        state["bytes"] += obj.size
        sys.stderr.write(
            f"\rwrote {report.count(state['objects'], 'object')}, "
            f"{report.count(state['rows'], 'row')}, {human_size(state['bytes'])}"
        )
        sys.stderr.flush()

    return on_object


@command(
    "load",
    "add files and commit them in one commit",
    "  lake load -p logs a.ndjson b.csv -m 'nightly'\n"
    "  cat x.ndjson | lake load -p logs@dev -\n"
    '  lake load -p logs data.parquet --meta \'{"source": "s3"}\'\n',
)
@pool_option("POOL[@BRANCH]", _TO_BRANCH)
@input_format_option()
@commit_options()
@option("-q", "quiet", is_flag=True, help="no progress on stderr")
@argument("files", "FILE", f"files to load {_FILES}", nargs=-1, type=click.Path())
@spark_options()
@pass_lake
def load(
    lk: LakeContext,
    pool: str,
    input_format: str,
    message: str,
    user: str | None,
    meta: dict[str, Any] | None,
    quiet: bool,
    files: tuple[str, ...],
    spark: bool,
    spark_master: str | None,
) -> None:
    if spark or spark_master:
        from lake_cli.commands import spark as on_spark

        on_spark.load(lk, pool, list(files), input_format, message, user, meta, spark_master)
        return
    target, branch = lk.pool_ref(pool, user)
    progress = _progress(quiet)
    written: list[Any] = []

    def on_object(obj: Any) -> None:
        written.append(obj)
        if progress is not None:
            progress(obj)

    commit = target.load(
        list(files),
        branch or MAIN,
        fmt=input_format,
        message=message,
        meta=meta,
        on_object=on_object,
    )
    if progress is not None:
        sys.stderr.write("\n")
    say(report.loaded_or_upserted(commit, written))
    say(f"{commit.id} committed")


@command(
    "upsert",
    "upsert files by the pool key in one commit (insert new keys, replace live ones)",
    "  lake upsert -p customers changes.ndjson -m 'nightly sync'\n"
    "  lake upsert -p customers@dev a.parquet b.csv\n"
    "  lake upsert -p customers cdc.ndjson --delete-when \"op = 'd'\"\n"
    "  cat cdc.ndjson | lake upsert -p customers - --delete-when \"op = 'd'\" -f json\n"
    "  lake upsert --spark -p customers s3://landing/cdc/   # merge-join per key range on Spark\n"
    "\nThe pool key identifies a row: an incoming row whose key is live replaces that row,\n"
    "a new key is inserted; of several incoming rows with one key the last in input order\n"
    "wins. Rows matching --delete-when delete their key and are not inserted (a change\n"
    "feed in one commit). Rows with a null key never match: they are inserted. Only the\n"
    "objects whose key range holds an incoming key are read and rewritten. A pool made\n"
    "with `lake create --unique` upserts on every `lake load`.\n",
)
@pool_option("POOL[@BRANCH]", _TO_BRANCH)
@input_format_option()
@option(
    "--delete-when",
    metavar="SQL-EXPR",
    help="a SQL boolean over the input rows, e.g. \"op = 'd'\": matching rows delete "
    "their key (and are not inserted)",
)
@commit_options()
@format_option(
    "table",
    "json",
    help="table: the counts in one line; json: one object with every count and byte size",
)
@option("-q", "quiet", is_flag=True, help="no progress on stderr")
@argument("files", "FILE", f"files to upsert {_FILES}", nargs=-1, type=click.Path())
@spark_options()
@pass_lake
def upsert(
    lk: LakeContext,
    pool: str,
    input_format: str,
    delete_when: str | None,
    message: str,
    user: str | None,
    meta: dict[str, Any] | None,
    fmt: str,
    quiet: bool,
    files: tuple[str, ...],
    spark: bool,
    spark_master: str | None,
) -> None:
    if spark or spark_master:
        from lake_cli.commands import spark as on_spark

        result = on_spark.upsert(
            lk, pool, list(files), input_format, delete_when, message, user, meta, spark_master
        )
    else:
        target, branch = lk.pool_ref(pool, user)
        on_object = _progress(quiet)
        result = target.upsert(
            list(files),
            branch or MAIN,
            fmt=input_format,
            delete_when=delete_when,
            message=message,
            meta=meta,
            on_object=on_object,
        )
        if on_object is not None:
            sys.stderr.write("\n")
    if fmt == "json":
        say(json.dumps(result.to_json()))
        return
    if result.commit is None:
        # Deleting keys that are already gone changes nothing: scripts re-run feeds.
        say("no rows changed")
        return
    say(report.upserted(result))
    say(f"{result.commit.id} committed")


@command(
    "add",
    "stage files as objects without committing",
    "  lake add -p logs a.ndjson\n  lake status -p logs\n  lake commit -p logs ID1 ID2\n",
)
@pool_option("POOL[@BRANCH]", "the pool, optionally @BRANCH the work is for (default main)")
@input_format_option()
@argument("files", "FILE", f"files to stage {_FILES}", nargs=-1, type=click.Path())
@pass_lake
def add(lk: LakeContext, pool: str, input_format: str, files: tuple[str, ...]) -> None:
    target, branch = lk.pool_ref(pool)
    staged = target.add(list(files), branch or MAIN, fmt=input_format)
    for o in staged.objects:
        say(f"{o.id} object ({o.count:,} records, {human_size(o.size)})")
    say(f"{staged.id} staged")


@command(
    "status",
    "list staged, uncommitted work",
    "  lake add -p logs a.ndjson\n  lake status -p logs\n  lake status -p logs -f json\n",
)
@pool_option("POOL", "the pool whose staged work to list")
@format_option("table", "json", "csv")
@pass_lake
def status(lk: LakeContext, pool: str, fmt: str) -> None:
    from lake_cli.output import write_records  # deferred: pyarrow, numpy (lake --help)

    rows = [
        {
            "id": s.id,
            "created": s.created,
            "objects": len(s.objects),
            "records": sum(o.count for o in s.objects),
            "sources": ", ".join(s.sources),
        }
        for s in lk.pool(pool).staged()
    ]
    if not rows and fmt == "table":
        say("nothing staged")
        return
    write_records(rows, fmt, columns=["id", "created", "objects", "records", "sources"])


@command(
    "commit",
    "commit staged work in one commit",
    "  lake commit -p logs 2Cp6AbqYy1bLoRLcTgqhAlYjKeM -m 'reviewed batch'\n"
    "  lake commit -p logs@dev ID1 ID2\n",
)
@pool_option("POOL[@BRANCH]", _TO_BRANCH)
@commit_options()
@argument("staged", "STAGED-ID", "ids printed by lake add", nargs=-1)
@pass_lake
def commit(
    lk: LakeContext,
    pool: str,
    message: str,
    user: str | None,
    meta: dict[str, Any] | None,
    staged: tuple[str, ...],
) -> None:
    target, branch = lk.pool_ref(pool, user)
    done = target.commit_staged(list(staged), branch or MAIN, message=message, meta=meta)
    say(report.loaded(done))  # add + commit is a load: it says what a load says
    say(f"{done.id} committed")


@command(
    "query",
    "run read-only SQL over pools, or print the records of a snapshot in pool-key order",
    '  lake query "SELECT carrier, count(*) AS n FROM flights GROUP BY carrier ORDER BY n DESC"\n'
    "  lake query \"SELECT count(*) FROM flights WHERE day = DATE '2026-01-05'\" --stats\n"
    "  lake query 'SELECT * FROM \"flights@dev\" EXCEPT SELECT * FROM flights' -f json\n"
    '  lake query "SELECT * FROM ns.logs LIMIT 10" --as-of 2026-01-05T10:00:00Z -f csv\n'
    '  lake query --spark "SELECT carrier, count(*) AS n FROM flights GROUP BY carrier"\n'
    "  lake query -p logs\n"
    '  lake query -p logs --where "ts > 400 AND ts <= 500" --stats\n'
    '  lake query -p trips --sample 1% --where "fare > 10" --stats\n'
    "  lake query -p logs@0ujtsYcgvSTl8PAuAdqWYSMnLOv -f json\n"
    "  lake query \"SELECT date_trunc('day', ts) d, count(*) FROM flights GROUP BY ALL\" --explain\n"
    "  lake query -p logs --as-of 2026-01-05T10:00:00Z --columns ts,msg -f csv\n"
    '\nSQL (docs/sql.md): one SELECT; tables are pools (flights, ns.flights, "flights@dev",\n'
    '"flights@<commit>"); WHERE prunes objects and row groups as --where does; writes,\n'
    "file-reading functions and settings are refused.\n",
)
@argument(
    "sql",
    "SQL",
    "a read-only SQL query over the lake's pools (instead of -p)",
    required=False,
)
@option(
    "-p",
    "pool",
    metavar="POOL[@REF]",
    help="print this pool's records (instead of SQL): "
    "the pool, optionally @BRANCH or @COMMIT-ID (default main)",
    shell_complete=complete_pools,
)
@as_of_option("as of this ISO 8601 time (every pool of a SQL query), e.g. 2026-01-05T10:00:00Z")
@where_option()
@option("--columns", metavar="A,B", help="only these columns, comma-separated, in this order")
@option("--order", type=Choice("asc", "desc"), help="key order of the output (default: the pool's)")
@option("--stats", is_flag=True, help="print what was read, as JSON on stderr")
@option(
    "--no-derived",
    "no_derived",
    is_flag=True,
    help="SQL: read the pools' rows even when a derived pool could answer (docs/derived.md)",
)
@option(
    "--explain",
    is_flag=True,
    help="SQL: say on stderr whether a derived pool answers the query, and why (or why not)",
)
@option(
    "--limit",
    type=Number(int),
    metavar="N",
    help="print at most N records (stops reading there)",
)
@option(
    "--sample",
    metavar="F",
    help="with -p on an OTree pool: the sample of fraction F (0 < F <= 1, or a percentage "
    "such as 1%): always the same rows for the same F, reading about F of the data",
)
@format_option("table", "json", "csv", "parquet")
@option("-o", "output", metavar="FILE", help="write to FILE (needed for -f parquet)")
@spark_options()
@pass_lake
def query(
    lk: LakeContext,
    sql: str | None,
    pool: str | None,
    as_of: str | None,
    where: str | None,
    columns: str | None,
    order: str | None,
    stats: bool,
    no_derived: bool,
    explain: bool,
    limit: int | None,
    sample: str | None,
    fmt: str,
    output: str | None,
    spark: bool,
    spark_master: str | None,
) -> None:
    if sql is None and (spark or spark_master):
        raise CommandLineError(
            '--spark runs SQL: lake query --spark "SELECT … FROM POOL"', click.get_current_context()
        )
    if sql is not None:
        from lake_cli.sqlquery import run_sql_query

        ctx = click.get_current_context()
        if pool is not None:
            raise CommandLineError(
                "a SQL query names its pools itself: give SQL or -p POOL, not both", ctx
            )
        given = {
            "--where": where,
            "--columns": columns,
            "--order": order,
            "--limit": limit,
            "--sample": sample,
        }
        extra = [name for name, value in given.items() if value is not None]
        if extra:
            raise CommandLineError(
                f"{extra[0]} goes with -p POOL; in SQL write it in the query", ctx
            )
        if (spark or spark_master) and (no_derived or explain):
            raise CommandLineError(
                "--spark reads the pools' rows: --no-derived and --explain go with DuckDB SQL",
                ctx,
            )
        if spark or spark_master:
            from lake_cli.commands import spark as on_spark

            on_spark.sql_query(lk, sql, parse_time(as_of), stats, fmt, output, spark_master)
            return
        run_sql_query(
            lk, sql, parse_time(as_of), stats, fmt, output, derived=not no_derived, explain=explain
        )
        return
    if pool is None:
        raise CommandLineError(
            "lake query needs a SQL query or -p POOL", click.get_current_context()
        )
    if no_derived or explain:
        raise CommandLineError(
            "--no-derived and --explain go with a SQL query", click.get_current_context()
        )
    import pyarrow as pa  # deferred, as write_records (lake --help)

    from lake_cli.output import check_writable, write_output  # deferred: pyarrow (lake --help)
    from lake_cli.progress import batch_progress

    source, ref = lk.pool_ref(pool)
    names = [c.strip() for c in columns.split(",")] if columns else None
    if limit is not None and limit < 0:
        raise UsageError("--limit must be 0 or more")
    scan = source.scan(
        ref,
        as_of=parse_time(as_of),
        where=where,
        columns=names,
        order=order,
        sample=None if sample is None else parse_fraction(sample),
    )
    check_writable(output)
    batches: Iterator[pa.RecordBatch] = scan.batches()
    if limit is not None:
        batches = _limited(batches, limit)
    # Progress only for a person watching: a terminal on stderr, and not when the records
    # themselves go to that terminal (they would interleave with the bar).
    show = sys.stderr.isatty() and (output is not None or not sys.stdout.isatty())
    with batch_progress(batches, len(scan.objects), lambda: scan.stats.objects_read, show) as shown:
        reader = pa.RecordBatchReader.from_batches(scan.out_schema, shown)
        write_output(reader, fmt, output)
    if stats:
        sys.stderr.write(json.dumps(scan.stats.to_json()) + "\n")


def _limited(batches: Iterator[pa.RecordBatch], limit: int) -> Iterator[pa.RecordBatch]:
    """The first ``limit`` records; stops reading once it has them."""
    left = limit
    for batch in batches:
        if left <= 0:
            return
        if batch.num_rows > left:
            batch = batch.slice(0, left)
        left -= batch.num_rows
        yield batch


def _bound(obj: Any, pool: Pool, which: str, schema: Any = None) -> Any:
    key = pool.config.key
    if key.is_this and schema is None:  # which column each value is needs the pool schema
        return obj.min if which == "min" else obj.max
    bound = obj.decoded_bound(key.names(schema), which)
    if bound is None:
        return None
    return bound[0] if len(bound) == 1 else bound


@command(
    "objects",
    "list the live data objects",
    "  lake objects -p logs\n  lake objects -p logs@dev -f json\n  lake objects -p logs --verify\n",
)
@pool_option("POOL[@REF]")
@as_of_option()
@format_option("table", "json", "csv")
@option(
    "--summary",
    is_flag=True,
    help="print fragmentation as one JSON line: objects, overlapping_objects, "
    "small_objects, pending_runs, write_amplification",
)
@option(
    "--verify",
    is_flag=True,
    help="read every listed object whole and check it against its commit (size, rows, "
    "columns, checksum); exit 1 if any is corrupt",
)
@pass_lake
def objects(
    lk: LakeContext, pool: str, as_of: str | None, fmt: str, summary: bool, verify: bool
) -> None:
    from lake_cli.output import write_records  # deferred: pyarrow, numpy (lake --help)

    source, ref = lk.pool_ref(pool)
    if summary:
        say(json.dumps(source.fragmentation(ref or MAIN).to_json()))
        return
    snap = source.snapshot(source.resolve(ref, parse_time(as_of)))
    metas = sorted(snap.objects.values(), key=lambda o: o.id)
    rows = [
        {
            "id": o.id,
            "min": _bound(o, source, "min", snap.schema),
            "max": _bound(o, source, "max", snap.schema),
            "count": o.count,
            # Bytes for scripts, readable sizes for people.
            "size": o.size if fmt != "table" else human_size(o.size),
        }
        for o in metas
    ]
    columns = ["id", "min", "max", "count", "size"]
    if verify:
        from lake_core.integrity import raise_for_verdicts, verify_objects

        verdicts = verify_objects(source.store, source.id, metas, source.name)
        for row, v in zip(rows, verdicts, strict=True):
            row["verified"] = "ok" if v.problem is None else f"{v.status}: {v.problem}"
        columns.append("verified")
        write_records(rows, fmt, columns=columns)
        sys.stdout.flush()
        raise_for_verdicts(verdicts, source.name)
        return
    write_records(rows, fmt, columns=columns)


def _readable_actions(commit: Any, pool: Pool) -> list[dict[str, Any]]:
    """A commit's actions with key bounds and column stats decoded as ``lake objects -f json``
    prints them (ISO timestamps, a composite key as a list), not in their stored encoding."""
    from lake_core.commit import Add  # deferred: pyarrow (lake --help)

    out = []
    for action, stored in zip(commit.actions, commit.actions_json(), strict=True):
        if isinstance(action, Add):
            meta = action.object
            stored = {
                **stored,
                "object": {
                    **stored["object"],
                    "min": _bound(meta, pool, "min"),
                    "max": _bound(meta, pool, "max"),
                    "columns": {
                        name: {**col.to_json(), "min": col.decoded_min(), "max": col.decoded_max()}
                        for name, col in meta.columns.items()
                    },
                },
            }
        out.append(stored)
    return out


@command(
    "log",
    "list commits, newest first",
    "  lake log -p logs\n  lake log -p logs@dev -f json\n",
)
@pool_option(
    "POOL[@BRANCH]", "the pool, optionally @BRANCH or @COMMIT-ID to start from (default main)"
)
@format_option("table", "json", "csv")
@pass_lake
def log(lk: LakeContext, pool: str, fmt: str) -> None:
    from lake_cli.output import write_records  # deferred: pyarrow, numpy (lake --help)

    source, ref = lk.pool_ref(pool)
    commits = list(source.log(ref))
    if fmt in ("json", "csv"):
        rows = [
            {
                "id": c.id,
                "parent": c.parent,
                "author": c.author,
                "date": c.date,
                "message": c.message,
                "meta": c.meta,
                "actions": _readable_actions(c, source),
                "rows": {"added": c.rows_added, "removed": c.rows_removed},
                # An upsert's row counts (null for other commits).
                "upsert": report.upsert_counts(c),
            }
            for c in commits
        ]
        write_records(
            rows,
            fmt,
            columns=["id", "parent", "author", "date", "message", "meta", "actions", "rows"]
            + ["upsert"],
        )
        return
    for c in commits:
        say(f"commit {c.id}")
        say(f"Author: {c.author}")
        say(f"Date:   {to_iso(c.date)}")
        if c.meta is not None:
            from lake_cli.textcols import jsonable  # deferred: numpy, pyarrow (lake --help)

            say(f"Meta:   {json.dumps(jsonable(c.meta))}")
        say("")
        for line in (c.message or "(no message)").splitlines():
            say(f"    {line}")
        say(f"    {report.log_counts(c)}")
        say("")


@command(
    "branch",
    "list, create or delete branches",
    "  lake branch -p logs\n  lake branch -p logs dev --from main\n  lake branch -p logs -d dev\n",
)
@pool_option("POOL", "the pool")
@argument(
    "name",
    "NAME",
    "create a branch of this name (without NAME: list branches)",
    required=False,
)
@option(
    "--from",
    "from_ref",
    metavar="REF",
    help="branch or commit id the new branch starts at (default main)",
)
@option(
    "-d", "delete", metavar="NAME", help="delete the branch NAME (its commits stay until cleanup)"
)
@format_option("table", "json", "csv")
@pass_lake
def branch(
    lk: LakeContext,
    pool: str,
    name: str | None,
    from_ref: str | None,
    delete: str | None,
    fmt: str,
) -> None:
    from lake_cli.output import write_records  # deferred: pyarrow, numpy (lake --help)

    source = lk.pool(pool)
    if delete:
        source.delete_branch(delete)
        say(f"branch {delete} deleted")
        return
    if name is not None:  # "" is a name to refuse, not a request for the list
        tip = source.create_branch(name, from_ref)
        say(f"branch {name} created at {tip or '(empty)'}")
        return
    rows = [{"name": b, "commit": c} for b, c in sorted(source.branches().items())]
    write_records(rows, fmt, columns=["name", "commit"])


@command(
    "merge",
    "merge branch SOURCE into TARGET in one commit (row-correct after compaction)",
    "  lake merge -p logs dev --into main\n"
    "  lake merge -p logs dev --into main --theirs   # dev's version of contested rows\n"
    "\nThree-way by rows: a row only one branch changed takes that branch's version; a\n"
    "row both changed the same way (both deleted it) is kept once; a row both changed\n"
    "differently (of two copies, one branch deleted one and the other both) is a\n"
    "conflict: the error names the rows' key range and a commit on each side, and\n"
    "nothing is committed. --theirs takes the source's version of those rows, --ours\n"
    "the target's. Compaction on either side is never a conflict.\n",
    exclusive=[("--theirs", "--ours")],
)
@pool_option("POOL", "the pool")
@argument("source", "SOURCE", "the branch whose changes to bring in")
@option("--into", required=True, metavar="TARGET", help="the branch to commit the merge to")
@option(
    "--theirs",
    "resolve",
    flag_value="theirs",
    help="on conflicting rows, the source branch's change wins",
)
@option(
    "--ours",
    "resolve",
    flag_value="ours",
    help="on conflicting rows, the target branch's version wins",
)
@commit_options()
@pass_lake
def merge(
    lk: LakeContext,
    pool: str,
    source: str,
    into: str,
    resolve: str | None,
    message: str,
    user: str | None,
    meta: dict[str, Any] | None,
) -> None:
    target = lk.pool(pool, user)
    done = target.merge(source, into, resolve=resolve, message=message, meta=meta)
    say(report.changed(f"merged {source} into {into}", done))
    say(f"{done.id} committed")


@command(
    "delete",
    "delete objects, or rows matching --where, in one commit",
    "  lake delete -p logs 2Cp6AbqYy1bLoRLcTgqhAlYjKeM\n"
    "  lake delete -p logs@dev --where \"user = 'bob' AND ts < '2026-01-01'\"\n",
)
@pool_option("POOL[@BRANCH]", _TO_BRANCH)
@argument(
    "ids",
    "OBJECT-ID",
    "ids of live data objects to delete (see lake objects)",
    nargs=-1,
    required=False,
)
@where_option("delete the rows matching this SQL expression")
@option(
    "--strict",
    is_flag=True,
    help="with --where: fail with `empty transaction` when no row matches "
    "(default: print `no rows matched`, exit 0)",
)
@commit_options()
@pass_lake
def delete(
    lk: LakeContext,
    pool: str,
    ids: tuple[str, ...],
    where: str | None,
    strict: bool,
    message: str,
    user: str | None,
    meta: dict[str, Any] | None,
) -> None:
    target, branch = lk.pool_ref(pool, user)
    if bool(ids) == bool(where):
        raise UsageError("give either OBJECT-IDs or --where, not both or neither")
    if where:
        try:
            done = target.delete(where, branch or MAIN, message=message, meta=meta)
        except NoRowsMatchedError:
            if strict:
                raise
            # Scripts re-run deletes: deleting what is already gone succeeds.
            say("no rows matched")
            return
        say(report.deleted_rows(done))
    else:
        done = target.delete(None, branch or MAIN, ids=list(ids), message=message, meta=meta)
        say(report.deleted_objects(done))
    say(f"{done.id} committed")


@command(
    "revert",
    "undo one commit's rows in a new commit (row-correct after compaction)",
    "  lake revert -p logs 2Cp6AbqYy1bLoRLcTgqhAlYjKeM\n"
    "\nRows the commit removed come back and rows it added leave, wherever compaction\n"
    "moved them since. Reverting a revert re-applies the original; reverting a merge\n"
    "removes what it brought in; a compaction or an already-reverted commit has nothing\n"
    "to revert (empty transaction).\n",
)
@pool_option("POOL[@BRANCH]", _TO_BRANCH)
@argument("commit_id", "COMMIT-ID", "id of the commit to undo (see lake log)")
@commit_options()
@pass_lake
def revert(
    lk: LakeContext,
    pool: str,
    commit_id: str,
    message: str,
    user: str | None,
    meta: dict[str, Any] | None,
) -> None:
    target, branch = lk.pool_ref(pool, user)
    done = target.revert(commit_id, branch or MAIN, message=message, meta=meta)
    say(report.changed(f"reverted {commit_id}", done))
    say(f"{done.id} committed")
