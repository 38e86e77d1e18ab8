"""``lake compact``, ``dedupe``, ``retain``, ``cleanup``, ``vacate``, ``purge``,
``partitions``, ``drop-partition``.

Every mutating maintenance command takes the pool's maintenance lock (ZooKeeper with ``--zk``
or ``LAKE_ZOOKEEPER``, else a local file lock), plans only once it holds it, and checks the
lock right before its commit point.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from lake_cli import report
from lake_cli.context import LakeContext, parse_time, pass_lake, say
from lake_cli.options import (
    argument,
    as_of_option,
    command,
    format_option,
    lock_timeout_option,
    option,
    pool_option,
    spark_options,
)
from lake_core.clock import to_iso
from lake_core.errors import UsageError
from lake_core.names import MAIN
from lake_core.units import human_size, parse_duration


@command(
    "compact",
    "LSM-merge the given objects, or what the policy picks",
    "  lake compact -p logs\n  lake compact -p logs@dev ID1 ID2\n",
)
@pool_option("POOL[@BRANCH]", "the pool, optionally @BRANCH (default main)")
@argument(
    "ids",
    "OBJECT-ID",
    "compact exactly these objects (default: what the policy picks)",
    nargs=-1,
    required=False,
)
@lock_timeout_option()
@spark_options()
@pass_lake
def compact(
    lk: LakeContext,
    pool: str,
    ids: tuple[str, ...],
    lock_timeout: float,
    spark: bool,
    spark_master: str | None,
) -> None:
    if spark or spark_master:
        from lake_cli.commands import spark as on_spark

        on_spark.compact(lk, pool, list(ids), lock_timeout, spark_master)
        return

    def progress(i: int, n: int, run: Any) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\rcompacting run {i + 1}/{n} ({len(run.objects)} objects)")
            sys.stderr.flush()

    target, branch = lk.pool_ref(pool)
    result = target.compact(branch or MAIN, list(ids), lock_timeout=lock_timeout, on_run=progress)
    if sys.stderr.isatty() and result.commit is not None:
        sys.stderr.write("\n")
    for line in report.compacted_lines(result):
        say(line)


@command(
    "optimize",
    "rewrite an OTree pool as one tree in its latest revision (unindexed objects, older "
    "revisions and cubes split by appends): same rows, same samples, fewer bytes read",
    "  lake optimize -p trips\n  lake optimize -p trips@dev -f json\n"
    "\nNothing to do (exit 0) when every object is of the latest revision and no cube is split.\n"
    "It reads the branch into memory; rows and their weights are kept, so samples do not change.\n",
)
@pool_option("POOL[@BRANCH]", "the pool, optionally @BRANCH (default main)")
@lock_timeout_option()
@format_option("table", "json", help="table: what it did, in words; json: one object of the counts")
@pass_lake
def optimize(lk: LakeContext, pool: str, lock_timeout: float, fmt: str) -> None:
    target, branch = lk.pool_ref(pool)
    state = {"objects": 0, "rows": 0}

    def progress(obj: Any) -> None:
        state["objects"] += 1
        state["rows"] += obj.count
        if sys.stderr.isatty():
            sys.stderr.write(
                f"\rwrote {report.count(state['objects'], 'object')}, "
                f"{report.count(state['rows'], 'row')}"
            )
            sys.stderr.flush()

    result = target.optimize(branch or MAIN, lock_timeout=lock_timeout, on_object=progress)
    if sys.stderr.isatty() and state["objects"]:
        sys.stderr.write("\n")
    if fmt == "json":
        say(json.dumps(result.to_json()))
        return
    if result.commit is None:
        say("nothing to optimize")
        return
    say(f"{result.commit.id} committed")
    say(
        f"optimized {report.count(result.objects_in, 'object')} into {result.objects_out} "
        f"(revision {result.revision}; {report.count(result.rows, 'row')}; had {result.reason})"
    )


@command(
    "dedupe",
    "remove duplicate keys in one commit, keeping per key the row of the last commit",
    "  lake dedupe -p customers\n  lake dedupe -p customers@dev -f json\n",
)
@pool_option("POOL[@BRANCH]", "the pool, optionally @BRANCH (default main)")
@lock_timeout_option()
@format_option(
    "table", "json", help="table: what it removed, in words; json: one object of the counts"
)
@pass_lake
def dedupe(lk: LakeContext, pool: str, lock_timeout: float, fmt: str) -> None:
    target, branch = lk.pool_ref(pool)
    result = target.dedupe(branch or MAIN, lock_timeout=lock_timeout)
    if fmt == "json":
        say(json.dumps(result.to_json()))
        return
    if result.commit is None:
        say(
            f"no duplicates (examined {report.count(result.objects_examined, 'object')}, "
            f"skipped {result.objects_skipped})"
        )
        return
    say(
        f"removed {report.count(result.rows_removed, 'duplicate row')}: examined "
        f"{report.count(result.objects_examined, 'object')} (skipped {result.objects_skipped}), "
        f"rewrote {result.objects_rewritten} into {result.objects_written}"
    )
    if result.resolved_from_history or result.resolved_from_snapshot_order:
        by_order = result.resolved_from_snapshot_order
        say(
            f"newest row of {report.count(result.resolved_from_history, 'key')} from history "
            f"(walked {report.count(result.recency_commits_read, 'commit')}, read "
            f"{report.count(result.recency_objects_read, 'object')}), "
            f"{by_order} by snapshot order" + (" (history vacated)" if by_order else "")
        )
    say(f"{result.commit.id} committed")  # last, as every committing command's


@command(
    "retain",
    "commit the removal of data older than DURATION (by a timestamp pool key or a "
    "day/month/year partitioning)",
    "  lake retain -p logs --older-than 90d\n  lake retain -p logs@dev --older-than 12h\n",
)
@pool_option("POOL[@BRANCH]")
@option(
    "--older-than",
    required=True,
    metavar="DURATION",
    help="remove rows whose time is before now minus this, e.g. 90d, 12h",
)
@lock_timeout_option()
@pass_lake
def retain(lk: LakeContext, pool: str, older_than: str, lock_timeout: float) -> None:
    age = parse_duration(older_than)
    target, branch = lk.pool_ref(pool)
    result = target.retain(age, branch or MAIN, lock_timeout=lock_timeout)
    if result.commit is None:
        say(f"nothing to retain: no {result.column} before {to_iso(result.cut)}")
        return
    parts = (
        f"; partitions dropped: {', '.join(result.partitions_dropped)}"
        if result.partitions_dropped
        else ""
    )
    say(
        f"removed {report.count(result.rows_removed, 'row')} with {result.column} before "
        f"{to_iso(result.cut)}: {report.count(result.dropped, 'object')} dropped, "
        f"{report.count(result.rewritten, 'object')} rewritten "
        f"(kept {report.count(result.rows_kept, 'row')}){parts}"
    )
    say(f"{result.commit.id} committed")


@command(
    "cleanup",
    "delete tombstoned and orphaned files past the grace period (all branches, staged work)",
    "  lake cleanup -p logs --grace 7d --dry-run\n  lake cleanup -p logs --grace 2h\n"
    "  lake vacate -p logs --before 2026-01-01T00:00:00Z && lake cleanup -p logs --grace 0\n"
    "  lake cleanup -p logs --grace 1d --spark    # deletes spread over Spark tasks\n",
)
@pool_option("POOL", "the pool (every branch and staged work is considered)")
@option(
    "--grace",
    default="7d",
    metavar="DURATION",
    help="keep deleted files younger than this, e.g. 0, 2h, 7d (default 7d); files no "
    "commit references are always kept for at least 24h (loads in flight)",
)
@option("--dry-run", is_flag=True, help="report what would go; delete nothing")
@format_option(
    "table",
    "json",
    help="table: readable lines; json: one object with counts and raw byte sizes",
)
@lock_timeout_option()
@spark_options()
@pass_lake
def cleanup(
    lk: LakeContext,
    pool: str,
    grace: str,
    dry_run: bool,
    fmt: str,
    lock_timeout: float,
    spark: bool,
    spark_master: str | None,
) -> None:
    if spark or spark_master:
        from lake_cli.commands import spark as on_spark

        on_spark.cleanup(lk, pool, grace, dry_run, fmt, lock_timeout, spark_master)
        return
    keep = parse_duration(grace)
    target = lk.pool(pool)
    result = target.cleanup(keep, dry_run=dry_run, lock_timeout=lock_timeout)
    for line in report.cleanup_lines(result, target.name, fmt):
        say(line)


@command(
    "vacate",
    "cut history older than TIME on every branch",
    "  lake vacate -p logs --before 2026-01-01T00:00:00Z\n",
)
@pool_option("POOL", "the pool (every branch is cut)")
@option("--before", required=True, metavar="TIME", help="cut history older than this ISO 8601 time")
@lock_timeout_option()
@pass_lake
def vacate(lk: LakeContext, pool: str, before: str, lock_timeout: float) -> None:
    cut = parse_time(before)
    assert cut is not None
    result = lk.pool(pool).vacate(cut, lock_timeout=lock_timeout)
    for name, tail in sorted(result.tails.items()):
        say(f"branch {name}: history before {tail} vacated")
    if not result.tails:
        say("nothing to vacate: no commit at or before that time")


@command(
    "purge",
    "physically delete a commit's data now (danger zone)",
    "  lake purge -p logs 2Cp6AbqYy1bLoRLcTgqhAlYjKeM --force\n"
    "  lake purge -p logs 2Cp6AbqYy1bLoRLcTgqhAlYjKeM --force -f json   # for scripts\n",
)
@pool_option("POOL", "the pool")
@argument("commit_id", "COMMIT-ID", "id of the commit whose data to delete now")
@option("--force", is_flag=True, help="really delete the data (required)")
@lock_timeout_option()
@format_option("table", "json")
@pass_lake
def purge(
    lk: LakeContext, pool: str, commit_id: str, force: bool, lock_timeout: float, fmt: str
) -> None:
    if not force:
        raise UsageError(f"purge deletes the data of commit {commit_id} for good: add --force")
    result = lk.pool(pool).purge(commit_id, lock_timeout=lock_timeout)
    if fmt == "json":
        say(json.dumps(result.to_json()))
        return
    n = len(result.objects)
    say(
        f"purged {report.count(n, 'object')} ({human_size(result.bytes)}) "
        f"added by commit {result.commit_id}"
    )
    if result.record:
        say(f"purge record: {result.record}")


@command(
    "partitions",
    "list partitions, one a line, value first",
    "  lake partitions -p logs\n",
)
@pool_option("POOL[@REF]")
@as_of_option()
@format_option("table", "json")
@pass_lake
def partitions(lk: LakeContext, pool: str, as_of: str | None, fmt: str) -> None:
    from lake_cli.output import write_records  # deferred: pyarrow, numpy (lake --help)

    source, ref = lk.pool_ref(pool)
    found = source.partitions(ref, as_of=parse_time(as_of))
    if fmt == "json":
        write_records([p.to_json() for p in found], "json")
        return
    for p in found:
        say(f"{p.value or 'null'}  objects={p.objects} rows={p.rows} size={human_size(p.bytes)}")


@command(
    "drop-partition",
    "drop a partition in one metadata-only commit",
    "  lake drop-partition -p logs 2026-01-05\n",
)
@pool_option("POOL[@BRANCH]", "the pool, optionally @BRANCH to commit to (default main)")
@argument("value", "VALUE", "the partition value, as lake partitions prints it")
@lock_timeout_option()
@pass_lake
def drop_partition(lk: LakeContext, pool: str, value: str, lock_timeout: float) -> None:
    target, branch = lk.pool_ref(pool)
    done = target.drop_partition(value, branch or MAIN, lock_timeout=lock_timeout)
    say(report.dropped_partition(value, done))
    say(f"{done.id} committed")
