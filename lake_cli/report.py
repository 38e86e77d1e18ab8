"""One-line reports of what a committing command did, printed before ``<id> committed``.

Counts come from the commit itself (``extra["rows"]``: rows in the objects it added and in
those it deleted), so what the CLI prints is what ``lake log`` shows later. Numbers print with
thousands separators; a noun is singular for exactly one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from lake_core.clock import to_iso
from lake_core.inflight import MIN_ORPHAN_AGE
from lake_core.units import counted, human_size

if TYPE_CHECKING:
    from lake_core.commit import Commit
    from lake_core.maintenance.cleanup import CleanupResult
    from lake_core.maintenance.compact import CompactionResult
    from lake_core.objects import ObjectMeta
    from lake_core.upsert import UpsertResult


def count(n: int, noun: str) -> str:
    """``1 row``, ``8,255 rows``."""
    return counted(n, noun)


def rows_removed(commit: Commit) -> int:
    """Rows in the objects ``commit`` deleted (0 when an old commit did not record it)."""
    return commit.rows_removed or 0


def loaded(commit: Commit, written: Sequence[ObjectMeta] | None = None) -> str:
    """``loaded … rows in … objects``: the commit's, or, when the load wrote fewer objects
    than the commit adds (a service with ``--group-commit`` landed it with other loads), the
    load's own and the commit's total."""
    mine = {o.id for o in written or ()}
    adds = commit.adds()
    if written and mine < {o.id for o in adds}:
        rows = sum(o.count for o in written)
        return (
            f"loaded {count(rows, 'row')} in {count(len(written), 'object')} "
            f"(in a commit of {len(adds):,} grouped objects, {commit.rows_added:,} rows)"
        )
    return f"loaded {count(commit.rows_added, 'row')} in {count(len(adds), 'object')}"


def deleted_objects(commit: Commit) -> str:
    return (
        f"deleted {count(rows_removed(commit), 'row')} in {count(len(commit.deletes()), 'object')}"
    )


def dropped_partition(value: str, commit: Commit) -> str:
    return (
        f"dropped partition {value}: {count(rows_removed(commit), 'row')} in "
        f"{count(len(commit.deletes()), 'object')}"
    )


def deleted_rows(commit: Commit) -> str:
    """A delete by predicate rewrites the objects that held matching rows: the rows it removed
    are those of the rewritten objects minus the survivors written back."""
    net = rows_removed(commit) - commit.rows_added
    return f"deleted {count(net, 'row')} in {count(len(commit.deletes()), 'object')}"


def compacted(result: CompactionResult) -> str:
    """Compaction moves rows, never changes them: the rows it read are the rows it wrote —
    except the older duplicates of a key a unique pool's compaction drops."""
    rows = result.commit.rows_removed if result.commit is not None else None
    dropped = (
        f", removed {count(result.duplicates_removed, 'duplicate row')}"
        if result.duplicates_removed
        else ""
    )
    return (
        f"compacted {count(result.objects_in, 'object')} ({count(rows or 0, 'row')}, "
        f"{human_size(result.bytes_in)}) into {result.objects_out} "
        f"({human_size(result.bytes_out)}) in {count(result.runs, 'run')}{dropped}"
    )


def changed(verb: str, commit: Commit) -> str:
    """For revert and merge, which may both add and delete objects: what each side held, and
    the net change in rows."""
    added, removed = commit.rows_added, rows_removed(commit)
    net = added - removed
    return (
        f"{verb}: added {count(added, 'row')} in {count(len(commit.adds()), 'object')}, "
        f"removed {count(removed, 'row')} in {count(len(commit.deletes()), 'object')} "
        f"(net {net:+,} rows)"
    )


def upsert_counts(commit: Commit) -> dict[str, int] | None:
    """``extra["upsert"]`` of an upsert commit (``lake upsert``, or a load into a unique
    pool): ``{"inserted", "updated", "deleted"}``; None for any other commit."""
    counts = commit.extra.get("upsert")
    if not isinstance(counts, dict):
        return None
    return {k: int(counts.get(k, 0)) for k in ("inserted", "updated", "deleted")}


def _upserted(counts: dict[str, int]) -> str:
    return (
        f"upserted: {counts['inserted']:,} inserted, {counts['updated']:,} updated, "
        f"{counts['deleted']:,} deleted"
    )


def upserted(result: UpsertResult) -> str:
    """What ``lake upsert`` prints before ``<id> committed``: the row counts, then how much of
    the pool it touched — the live objects it read (only those whose key range meets an
    incoming key) out of all it considered, and the objects it rewrote with their bytes."""
    counts = {"inserted": result.inserted, "updated": result.updated, "deleted": result.deleted}
    considered = result.objects_read + result.objects_skipped
    return (
        f"{_upserted(counts)} (read {result.objects_read:,} of {count(considered, 'object')}, "
        f"rewrote {result.objects_rewritten:,}, {human_size(result.bytes_rewritten)})"
    )


def loaded_or_upserted(commit: Commit, written: Sequence[ObjectMeta] | None = None) -> str:
    """A load's line: ``loaded … rows in … objects`` (:func:`loaded`; ``written``: the
    objects the load wrote), or for a load into a unique pool (an upsert) its counts and the
    objects it replaced (``rewrote N``)."""
    counts = upsert_counts(commit)
    if counts is None:
        return loaded(commit, written)
    return f"{_upserted(counts)} (rewrote {len(commit.deletes()):,})"


def log_counts(commit: Commit) -> str:
    """The counts line of a ``lake log`` entry (index entries only when the commit has some)."""
    objects = f"{len(commit.adds())} added, {len(commit.deletes())} deleted"
    removed = commit.rows_removed
    rows = f"rows +{commit.rows_added:,}"
    rows += f" -{removed:,}" if removed is not None else " (rows removed not recorded)"
    if commit.layout_only:
        rows += ", layout only"
    counts = upsert_counts(commit)
    if counts is not None:
        rows += f"; {_upserted(counts)}"
    indexed, unindexed = len(commit.index_adds()), len(commit.index_deletes())
    if indexed or unindexed:
        rows += f"; index entries +{indexed:,} -{unindexed:,}"
    return f"(objects {objects}; {rows})"


def compacted_lines(result: CompactionResult) -> list[str]:
    """What ``lake compact`` prints (local and Spark alike)."""
    if result.commit is None:
        return ["nothing to compact"]
    return [compacted(result), f"{result.commit.id} committed"]


def cleanup_lines(result: CleanupResult, pool: str, fmt: str) -> list[str]:
    """What ``lake cleanup`` prints (local and Spark alike): ``json`` one object with raw
    byte counts; ``table`` one line of what was reclaimed, then what was kept and how to
    release it."""
    if fmt == "json":
        return [json.dumps(result.to_json())]
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
