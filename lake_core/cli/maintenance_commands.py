"""``lake compact``, ``retain``, ``cleanup``, ``vacate``, ``purge``, ``partitions``,
``drop-partition``.

Every mutating maintenance command takes the pool's maintenance lock (ZooKeeper with ``--zk``
or ``LAKE_ZOOKEEPER``, else a local file lock), plans only once it holds it, and checks the
lock right before its commit point.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from lake_core.cli import report
from lake_core.cli.commands import _lake, _pool_ref, _say, _time
from lake_core.clock import to_iso
from lake_core.errors import UsageError
from lake_core.inflight import MIN_ORPHAN_AGE
from lake_core.locks import LockHandle
from lake_core.names import split_ref
from lake_core.output import write_records
from lake_core.pool import MAIN, Pool
from lake_core.units import human_size, parse_duration

if TYPE_CHECKING:
    from lake_core.maintenance.cleanup import CleanupResult


@contextmanager
def _maintenance(args: argparse.Namespace) -> Iterator[tuple[Pool, str, LockHandle]]:
    name, ref = split_ref(args.pool)
    lake = _lake(args)
    pool = lake.pool(name)
    with lake.locks() as locks, locks.maintenance_lock(pool.id, timeout=args.lock_timeout) as held:
        yield pool, ref or MAIN, held


def add_lock_timeout(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--lock-timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="how long to wait for the pool's maintenance lock (default 600)",
    )


def cmd_compact(args: argparse.Namespace) -> None:
    from lake_core.maintenance import compact

    def progress(i: int, n: int, run: Any) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\rcompacting run {i + 1}/{n} ({len(run.objects)} objects)")
            sys.stderr.flush()

    with _maintenance(args) as (pool, branch, held):
        result = compact(pool, branch, args.ids or None, guard=held.check, on_run=progress)
    if sys.stderr.isatty() and result.commit is not None:
        sys.stderr.write("\n")
    if result.commit is None:
        _say("nothing to compact")
        return
    _say(report.compacted(result))
    _say(f"{result.commit.id} committed")


def cmd_retain(args: argparse.Namespace) -> None:
    from lake_core.maintenance import retain

    older_than = parse_duration(args.older_than)
    with _maintenance(args) as (pool, branch, held):
        result = retain(pool, older_than, branch, guard=held.check)
    if result.commit is None:
        _say(f"nothing to retain: no {result.column} before {to_iso(result.cut)}")
        return
    parts = (
        f"; partitions dropped: {', '.join(result.partitions_dropped)}"
        if result.partitions_dropped
        else ""
    )
    _say(
        f"removed {report.count(result.rows_removed, 'row')} with {result.column} before "
        f"{to_iso(result.cut)}: {report.count(result.dropped, 'object')} dropped, "
        f"{report.count(result.rewritten, 'object')} rewritten "
        f"(kept {report.count(result.rows_kept, 'row')}){parts}"
    )
    _say(f"{result.commit.id} committed")


def cleanup_report(result: CleanupResult, pool: str) -> list[str]:
    """What cleanup did, as people read it: one line of what was reclaimed, then what was kept
    and how to release it."""
    verb = "would remove" if result.dry_run else "removed"
    lines = []
    if result.files:
        files = "file" if result.files == 1 else "files"
        lines.append(f"{verb} {result.files:,} {files}, {human_size(result.bytes)}")
    else:
        lines.append("nothing to remove")
    if result.held:
        what = "file is" if result.held == 1 else "files are"
        lines.append(
            f"{result.held:,} deleted {what} still referenced by retained history "
            f"({human_size(result.held_bytes)}); release them with "
            f"`lake vacate -p {pool} --before {to_iso(result.release_before or result.now)}`, "
            "then clean up again"
        )
    if result.pending:
        lines.append(
            f"kept {result.pending:,} unreachable {'file' if result.pending == 1 else 'files'} "
            f"({human_size(result.pending_bytes)}) "
            f"younger than the grace period or than the {_hours(MIN_ORPHAN_AGE)} minimum "
            "age of unreferenced files"
        )
    return lines


def _hours(d: timedelta) -> str:
    return f"{d.total_seconds() / 3600:g}h"


def cmd_cleanup(args: argparse.Namespace) -> None:
    from lake_core.maintenance.cleanup import cleanup

    grace = parse_duration(args.grace)
    with _maintenance(args) as (pool, _, held):
        result = cleanup(pool, grace, dry_run=args.dry_run, guard=held.check)
    print_cleanup(args, result, pool.name)


def print_cleanup(args: argparse.Namespace, result: CleanupResult, pool: str) -> None:
    """The output of ``lake cleanup`` (local and Spark alike): JSON keeps raw byte counts."""
    if args.format == "json":
        _say(json.dumps(result.to_json()))
        return
    for line in cleanup_report(result, pool):
        _say(line)


def cmd_vacate(args: argparse.Namespace) -> None:
    from lake_core.maintenance import vacate

    before = _time(args.before)
    assert before is not None
    with _maintenance(args) as (pool, _, held):
        result = vacate(pool, before, guard=held.check)
    for branch, tail in sorted(result.tails.items()):
        _say(f"branch {branch}: history before {tail} vacated")
    if not result.tails:
        _say("nothing to vacate: no commit at or before that time")


def cmd_purge(args: argparse.Namespace) -> None:
    from lake_core.maintenance.purge import purge

    if not args.force:
        raise UsageError(f"purge deletes the data of commit {args.commit} for good: add --force")
    with _maintenance(args) as (pool, _, held):
        result = purge(pool, args.commit, guard=held.check)
    _say(json.dumps(result.to_json()) if hasattr(result, "to_json") else str(result))


def cmd_partitions(args: argparse.Namespace) -> None:
    from lake_core.maintenance import list_partitions

    pool, ref = _pool_ref(args)
    parts = list_partitions(pool, ref, _time(args.as_of))
    if args.format == "json":
        write_records([p.to_json() for p in parts], "json")
        return
    for p in parts:
        _say(f"{p.value or 'null'}  objects={p.objects} rows={p.rows} size={human_size(p.bytes)}")


def cmd_drop_partition(args: argparse.Namespace) -> None:
    from lake_core.maintenance import drop_partition

    with _maintenance(args) as (pool, branch, held):
        commit = drop_partition(pool, args.value, branch, guard=held.check)
    _say(f"{commit.id} committed")
