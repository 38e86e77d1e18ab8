"""One-line reports of what a committing command did, printed before ``<id> committed``.

Counts come from the commit itself (``extra["rows"]``: rows in the objects it added and in
those it deleted), so what the CLI prints is what ``lake log`` shows later. Numbers print with
thousands separators; a noun is singular for exactly one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lake_core.commit import Commit
from lake_core.units import format_size

if TYPE_CHECKING:
    from lake_core.maintenance.compact import CompactionResult


def count(n: int, noun: str) -> str:
    """``1 row``, ``8,255 rows``."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def rows_removed(commit: Commit) -> int:
    """Rows in the objects ``commit`` deleted (0 when an old commit did not record it)."""
    return commit.rows_removed or 0


def loaded(commit: Commit) -> str:
    return f"loaded {count(commit.rows_added, 'row')} in {count(len(commit.adds()), 'object')}"


def deleted_objects(commit: Commit) -> str:
    return (
        f"deleted {count(rows_removed(commit), 'row')} in {count(len(commit.deletes()), 'object')}"
    )


def deleted_rows(commit: Commit) -> str:
    """A delete by predicate rewrites the objects that held matching rows: the rows it removed
    are those of the rewritten objects minus the survivors written back."""
    net = rows_removed(commit) - commit.rows_added
    return f"deleted {count(net, 'row')} in {count(len(commit.deletes()), 'object')}"


def compacted(result: CompactionResult) -> str:
    """Compaction moves rows, never changes them: the rows it read are the rows it wrote."""
    rows = result.commit.rows_removed if result.commit is not None else None
    return (
        f"compacted {count(result.objects_in, 'object')} ({count(rows or 0, 'row')}, "
        f"{format_size(result.bytes_in)}) into {result.objects_out} "
        f"({format_size(result.bytes_out)}) in {count(result.runs, 'run')}"
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


def log_counts(commit: Commit) -> str:
    """The counts line of a ``lake log`` entry."""
    objects = f"{len(commit.adds())} added, {len(commit.deletes())} deleted"
    removed = commit.rows_removed
    rows = f"rows +{commit.rows_added:,}"
    rows += f" -{removed:,}" if removed is not None else " (rows removed not recorded)"
    if commit.layout_only:
        rows += ", layout only"
    return f"(objects {objects}; {rows})"
