"""The read planner: the one place that decides which objects and row groups of a snapshot
must be read for a predicate.

Every read engine consumes a :class:`ReadPlan`: pyarrow for ``lake query -p`` (:mod:`lake_core.scan`),
DuckDB for SQL (:mod:`lake_core.sql`), Spark for the same SQL at scale. None of them prunes on
its own account, so ``--where`` and SQL skip exactly the same data, and ``--stats`` counts the
same way everywhere.

Pruning is a list of :class:`Pruner` rules, applied in order. Each may veto whole objects
(from the snapshot's metadata, before anything is read) and row groups (from an opened
object's footer, decided lazily when the engine opens it). :class:`StatsPruner` (min/max/null
counts of the commit and of Parquet's row groups) is the first; search indexes
(:class:`lake_core.indexes.pruner.IndexPruner`) the second; OTree cubes or sampling (issue 16)
plug in as further rules in this same list, which :func:`lake_core.indexes.pruner.read_pruners`
assembles for every engine. Each keeps its own counters (:attr:`ReadPlan.pruned`), so a plan
can say which rule skipped what.

Invariants:

* Soundness: a rule vetoes an object or a row group only when it proves that no row in it can
  make the predicate TRUE (or, for a sampling rule, when the sample it stands for excludes it).
  Engines still evaluate the full predicate on what is read, so results are exact.
* A rule's :meth:`Pruner.candidates` (a vectorised pre-filter over the snapshot's arrays) is a
  superset of what its :meth:`Pruner.keep_object` keeps: using it changes speed, never the plan.
* The plan names objects in snapshot order; counters only grow, and ``objects_total`` is the
  snapshot's live object count.
* :meth:`ReadPlan.row_ranges` narrows a kept row group to the rows a rule knows can match (an
  exact index's row slices): an engine may read only those (by pages, :meth:`ReadPlan.page_parts`)
  or the whole group; rows outside them never match, so the results are the same.

Engines that take a list of files and row groups (a pyarrow dataset for DuckDB on S3, Spark)
call :func:`open_fragments`, which opens the planned objects' footers in parallel and returns
:class:`Fragment` s (object, key, kept row groups, footer), counting as it goes; an engine that
reads as it opens (the pyarrow scan) calls :meth:`ReadPlan.row_groups` per object instead.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.expr import ColumnStats, Expr, ExpressionError, columns_of, key_range, may_match
from lake_core.live import LiveObjects
from lake_core.objects import ObjectMeta
from lake_core.reader import row_group_stats

if TYPE_CHECKING:
    import pyarrow.parquet as pq

    from lake_core.pages import ObjectPages
    from lake_core.poolkey import PoolKey
    from lake_core.snapshot import Snapshot
    from lake_core.stores.base import ObjectStore

__all__ = [
    "Fragment",
    "PruneCounts",
    "Pruner",
    "ReadPlan",
    "ReadStats",
    "RowGroupView",
    "StatsPruner",
    "object_stats",
    "open_fragments",
    "plan_read",
]


@dataclass
class ReadStats:
    """What a read read, as ``lake query --stats`` prints it (per pool): the counters below,
    then, for each :attr:`Pruner.reported` rule of the plan, ``<rule>_objects_pruned``,
    ``<rule>_row_groups_pruned`` and ``<rule>_bytes_read`` (what the rule vetoed and fetched
    to decide; current whenever :meth:`to_json` is called)."""

    objects_total: int = 0
    objects_read: int = 0
    row_groups_read: int = 0
    rows_read: int = 0
    bytes_read: int = 0
    #: The reported rules of the plan and their counts (set by :func:`plan_read`).
    reported: list[tuple[Pruner, PruneCounts]] = field(
        default_factory=list, repr=False, compare=False
    )

    def to_json(self) -> dict[str, int]:
        out = {f: getattr(self, f) for f in _COUNTERS}
        for rule, counts in self.reported:
            out[f"{rule.name}_objects_pruned"] = counts.objects
            out[f"{rule.name}_row_groups_pruned"] = counts.row_groups
            out[f"{rule.name}_bytes_read"] = rule.bytes_read
        return out


_COUNTERS = ("objects_total", "objects_read", "row_groups_read", "rows_read", "bytes_read")


@dataclass
class PruneCounts:
    """What one pruning rule skipped."""

    objects: int = 0
    row_groups: int = 0


@dataclass(frozen=True)
class RowGroupView:
    """One row group of an opened object, as pruning rules see it."""

    obj: ObjectMeta
    metadata: pq.FileMetaData
    index: int
    #: The columns the object's file holds (a column added to the pool later is absent).
    file_columns: frozenset[str]


def _utc(v: Any) -> Any:
    if isinstance(v, datetime) and v.tzinfo is None:
        return v.replace(tzinfo=UTC)
    return v


def object_stats(obj: ObjectMeta, schema: pa.Schema) -> dict[str, ColumnStats]:
    """Pruning stats for every pool column; a column the object lacks is all null."""
    out: dict[str, ColumnStats] = {}
    for name in schema.names:
        col = obj.columns.get(name)
        if col is None:
            out[name] = ColumnStats(None, None, obj.count, obj.count)
        else:
            out[name] = ColumnStats(col.decoded_min(), col.decoded_max(), col.nulls, obj.count)
    return out


def row_group_column_stats(
    group: RowGroupView, schema: pa.Schema, columns: Collection[str] | None = None
) -> dict[str, ColumnStats]:
    """Pruning stats of one row group from Parquet's statistics (of ``columns`` only, if
    given); a pool column the file lacks is all null."""
    raw = row_group_stats(group.metadata, group.index, columns)
    stats = {
        name: ColumnStats(_utc(lo), _utc(hi), nulls, rows)
        for name, (lo, hi, nulls, rows) in raw.items()
    }
    for name in schema.names:
        if name not in group.file_columns and (columns is None or name in columns):
            rows = group.metadata.row_group(group.index).num_rows
            stats[name] = ColumnStats(None, None, rows, rows)
    return stats


class Pruner:
    """One pruning rule. The base class keeps everything; a rule overrides what it can decide.

    ``name`` keys the rule's :class:`PruneCounts` in :attr:`ReadPlan.pruned`.
    """

    name = "pruner"
    #: Bytes the rule fetched to decide (an index's lookups); 0 for rules that read nothing.
    bytes_read = 0
    #: Whether ``--stats`` reports what this rule pruned (see :class:`ReadStats`).
    reported = False
    #: Whether its row-group vetoes go beyond Parquet's statistics: an engine that takes whole
    #: files and prunes them by their own statistics (DuckDB's read_parquet) would read row
    #: groups this rule skips, so it must be handed the planned row groups instead.
    beyond_statistics = False

    def candidates(self, objects: LiveObjects) -> list[ObjectMeta] | None:
        """A vectorised pre-filter: the objects that may survive :meth:`keep_object`, or None
        to test every object. Must never drop an object :meth:`keep_object` would keep."""
        return None

    def prepare(self, objects: Sequence[ObjectMeta]) -> None:
        """Called once with the objects that reached this rule, before :meth:`keep_object` is
        asked about each: a rule that must fetch something per object (an index) fetches it
        here, in parallel."""

    def keep_object(self, obj: ObjectMeta) -> bool:
        """False vetoes the object (nothing of it is read)."""
        return True

    def keep_row_group(self, group: RowGroupView) -> bool:
        """False vetoes the row group (decided when the object's footer is open)."""
        return True

    def row_ranges(self, group: RowGroupView) -> list[tuple[int, int]] | None:
        """The rows of a kept row group that may match, as sorted, disjoint ``[start, stop)``
        ranges (the last may pass the group's end), or None: any row may. Only a rule that
        knows rows narrows them (an exact index's row slices); an engine that reads whole
        row groups may ignore them (:meth:`ReadPlan.row_ranges`)."""
        return None


class StatsPruner(Pruner):
    """Min/max/null-count pruning for a predicate: objects by the stats their commit recorded
    (pre-filtered on the first key field's bounds, vectorised), row groups by Parquet's.
    Raises :class:`~lake_core.expr.ExpressionError` where the predicate does not fit the
    schema (as :func:`~lake_core.expr.may_match` does)."""

    name = "stats"

    def __init__(self, predicate: Expr, schema: pa.Schema, key: PoolKey) -> None:
        self.predicate, self.schema, self.key = predicate, schema, key
        self.columns = columns_of(predicate)
        self._memo: dict[tuple[int, int], tuple[Any, Any]] = {}  # see may_match

    def candidates(self, objects: LiveObjects) -> list[ObjectMeta] | None:
        column = self.key.names(self.schema)[0]
        if column not in self.schema.names:
            return None
        try:
            interval = key_range(self.predicate, column, self.schema)
        except ExpressionError:
            return None  # keep_object raises it, as before, if any object is live
        if interval is None:
            return None
        return objects.within(column, *interval)

    def keep_object(self, obj: ObjectMeta) -> bool:
        return may_match(self.predicate, object_stats(obj, self.schema), self.schema, self._memo)

    def keep_row_group(self, group: RowGroupView) -> bool:
        # Only the predicate's columns: the others' statistics cannot change the answer.
        stats = row_group_column_stats(group, self.schema, self.columns)
        return may_match(self.predicate, stats, self.schema, self._memo)


@dataclass
class ReadPlan:
    """The objects of one snapshot a read must open, and how to pick their row groups.

    Engines open each of :attr:`objects` (or only some: a LIMIT may stop early), call
    :meth:`row_groups` with its footer, read those groups, and report with
    :meth:`opened` / :meth:`read`, which keep :attr:`stats`.
    """

    schema: pa.Schema
    predicate: Expr | None
    objects: list[ObjectMeta]
    pruners: Sequence[Pruner]
    stats: ReadStats
    pruned: dict[str, PruneCounts] = field(default_factory=dict)

    def row_groups(self, obj: ObjectMeta, metadata: pq.FileMetaData) -> list[int]:
        """The row groups of ``obj`` (its footer ``metadata``) every rule keeps."""
        if not self.pruners:
            return list(range(metadata.num_row_groups))
        file_columns = frozenset(metadata.schema.to_arrow_schema().names)
        kept = []
        for rg in range(metadata.num_row_groups):
            view = RowGroupView(obj, metadata, rg, file_columns)
            for rule in self.pruners:
                if not rule.keep_row_group(view):
                    self.pruned[rule.name].row_groups += 1
                    break
            else:
                kept.append(rg)
        return kept

    def row_ranges(
        self, obj: ObjectMeta, metadata: pq.FileMetaData, group: int
    ) -> list[tuple[int, int]] | None:
        """The rows of kept row group ``group`` of ``obj`` that every rule lets through, as
        sorted ``[start, stop)`` ranges within the group, or None: all of them (as when the
        ranges cover the group). An engine that
        can read part of a row group (:mod:`lake_core.pages`) reads only these; one that
        cannot reads the group (rows outside the ranges cannot match: the engine's filter
        drops them either way)."""
        narrowing = [r for r in self.pruners if type(r).row_ranges is not Pruner.row_ranges]
        if not narrowing:
            return None
        rows = metadata.row_group(group).num_rows
        view = RowGroupView(obj, metadata, group, frozenset())
        out: list[tuple[int, int]] | None = None
        for rule in narrowing:
            found = rule.row_ranges(view)
            if found is None:
                continue
            found = [(a, min(b, rows)) for a, b in found if a < min(b, rows)]
            out = found if out is None else _intersect(out, found)
        # Every row of the group: read it whole (a page read would fetch more, not less).
        return None if out == [(0, rows)] else out

    def page_parts(
        self,
        store: ObjectStore,
        pool_id: str,
        obj: ObjectMeta,
        metadata: pq.FileMetaData,
        groups: Sequence[int],
        columns: Sequence[str],
    ) -> tuple[dict[int, list[tuple[int, int]]], ObjectPages | None]:
        """The kept ``groups`` of ``obj`` (of pool ``pool_id``, its footer ``metadata``) to
        read in part, by pages, with their rows (:meth:`row_ranges`), and the object's page
        reader (:class:`lake_core.pages.ObjectPages`; a footer it had to fetch is counted here);
        none where every group is read whole or the object's pages cannot serve ``columns``.
        The reader raises PurgedObjectError for an object purged since it was opened."""
        from lake_core.errors import ObjectNotFoundError, PurgedObjectError
        from lake_core.layout import PoolLayout
        from lake_core.pages import FETCH_THREADS, ObjectPages, PageLayoutError, may_read_by_pages
        from lake_core.purge_records import purged_by

        ranges = {}
        for g in groups:
            found = self.row_ranges(obj, metadata, g)
            if found is not None and may_read_by_pages(metadata, g, columns):
                ranges[g] = found
        if not ranges:
            return {}, None
        key = PoolLayout(pool_id).data(obj.id)

        def fetch(offset: int, length: int) -> bytes:
            try:
                return store.get_range(key, offset, length)
            except ObjectNotFoundError:  # purged after its footer was read
                raise PurgedObjectError(obj.id, purged_by(store, pool_id, obj.id)) from None

        try:
            pages = ObjectPages(
                fetch,
                obj.size,
                metadata,
                threads=1 if store.local_path(key) is not None else FETCH_THREADS,
            )
        except PageLayoutError:
            return {}, None
        self.stats.bytes_read += pages.fetched  # its footer, if it was fetched
        return {g: r for g, r in ranges.items() if pages.readable(g, columns)}, pages

    def opened(self) -> None:
        """Count an object opened (its footer read)."""
        self.stats.objects_read += 1

    def read_part(self, rows: int, fetched: int) -> None:
        """Count part of a row group read by pages: ``rows`` rows, ``fetched`` bytes (the
        pages, dictionaries and offset indexes fetched)."""
        self.stats.row_groups_read += 1
        self.stats.rows_read += rows
        self.stats.bytes_read += fetched

    def read(
        self, metadata: pq.FileMetaData, groups: Sequence[int], columns: Iterable[str], rows: int
    ) -> None:
        """Count ``groups`` of an object read, ``rows`` rows, in the file's ``columns``."""
        wanted = set(columns)
        self.stats.row_groups_read += len(groups)
        self.stats.rows_read += rows
        self.stats.bytes_read += sum(
            metadata.row_group(rg).column(i).total_compressed_size
            for rg in groups
            for i in range(metadata.num_columns)
            if metadata.row_group(rg).column(i).path_in_schema.split(".")[0] in wanted
        )


def _intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The rows in both sorted, disjoint range lists."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        start, stop = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < stop:
            out.append((start, stop))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def plan_read(
    snapshot: Snapshot,
    key: PoolKey,
    predicate: Expr | None = None,
    *,
    schema: pa.Schema | None = None,
    pruners: Sequence[Pruner] | None = None,
) -> ReadPlan:
    """Plan reading ``snapshot`` for rows where ``predicate`` may be TRUE.

    ``schema`` is the pool schema literals are typed by (default: the snapshot's). ``pruners``
    replaces the default rules (:class:`StatsPruner` when there is a predicate); later rules
    (indexes, sampling) are appended to that list by their callers.
    """
    schema = schema if schema is not None else (snapshot.schema or pa.schema([]))
    if pruners is None:
        pruners = [StatsPruner(predicate, schema, key)] if predicate is not None else []
    objects = snapshot.objects
    stats = ReadStats(objects_total=len(objects))
    pruned = {rule.name: PruneCounts() for rule in pruners}
    pool: Iterable[ObjectMeta] = objects.values()
    if pruners and isinstance(objects, LiveObjects):
        for rule in pruners:
            picked = rule.candidates(objects)
            if picked is not None:
                pruned[rule.name].objects += len(objects) - len(picked)
                pool = picked
                break
    chosen = list(pool)
    for rule in pruners:  # each rule sees what the rules before it kept, in snapshot order
        rule.prepare(chosen)
        kept = [obj for obj in chosen if rule.keep_object(obj)]
        pruned[rule.name].objects += len(chosen) - len(kept)
        chosen = kept
    stats.reported = [(rule, pruned[rule.name]) for rule in pruners if rule.reported]
    return ReadPlan(schema, predicate, chosen, pruners, stats, pruned)


@dataclass(frozen=True)
class Fragment:
    """One object to read and the row groups of it the plan keeps (never empty)."""

    obj: ObjectMeta
    #: The object's store key (:meth:`lake_core.layout.PoolLayout.data`).
    key: str
    row_groups: tuple[int, ...]
    #: Its footer, as opened (and checked against the commit) by :func:`open_fragments`.
    metadata: pq.FileMetaData
    #: With ``arrow_format``: the pyarrow fragment of the kept row groups, holding the footer
    #: read once (a scan of it does not fetch the footer again).
    arrow: Any = None
    #: With ``row_ranges``: the kept row groups to read in part, by pages (left out of
    #: ``row_groups`` and ``arrow``), with their rows (:meth:`ReadPlan.row_ranges`), and the
    #: object's page reader (:class:`lake_core.pages.ObjectPages`) to read them with.
    parts: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    pages: ObjectPages | None = None

    @property
    def whole(self) -> bool:
        """Whether every row group of the object is kept."""
        return not self.parts and len(self.row_groups) == self.metadata.num_row_groups


def open_fragments(
    plan: ReadPlan,
    store: ObjectStore,
    pool_id: str,
    pool_name: str,
    columns: Iterable[str] | None = None,
    threads: int = 16,
    arrow_format: Any = None,
    row_ranges: bool = False,
) -> list[Fragment]:
    """Open the footer of every planned object (checked against its commit, in parallel:
    on S3 each is a ranged GET), decide its row groups, and count what an engine reading
    the result reads (``columns``: the top-level columns it reads; None: all). Objects left
    with no row group are not returned. With ``arrow_format`` (a pyarrow ``ParquetFileFormat``)
    the footers are read through the store's Arrow filesystem as pyarrow fragments
    (:attr:`Fragment.arrow`) that keep them: an engine scanning those reads each footer once.
    With ``row_ranges``, the row groups the plan narrows to some rows
    (:meth:`ReadPlan.row_ranges`) that the object's pages can serve are handed over as
    :attr:`Fragment.parts` instead, for the engine to read and count
    (:meth:`ReadPlan.read_part`).
    Raises PurgedObjectError for an object purged since the snapshot, CorruptDataObjectError
    for one that is not what its commit recorded."""
    from lake_core.errors import ObjectNotFoundError, PurgedObjectError
    from lake_core.integrity import open_verified, open_verified_fragment
    from lake_core.layout import PoolLayout
    from lake_core.purge_records import purged_by

    layout = PoolLayout(pool_id)

    def footer(obj: ObjectMeta) -> tuple[pq.FileMetaData, Any]:
        try:
            if arrow_format is None:
                return open_verified(store, pool_id, obj, pool_name).metadata, None
            fragment = open_verified_fragment(store, pool_id, obj, pool_name, arrow_format)
            return fragment.metadata, fragment
        except ObjectNotFoundError:
            raise PurgedObjectError(obj.id, purged_by(store, pool_id, obj.id)) from None

    if not plan.objects:
        return []
    if len(plan.objects) == 1:
        footers = [footer(plan.objects[0])]
    else:
        with ThreadPoolExecutor(max_workers=min(threads, len(plan.objects))) as ex:
            footers = list(ex.map(footer, plan.objects))
    wanted = None if columns is None else {c.lower() for c in columns}
    out = []
    for obj, (metadata, whole) in zip(plan.objects, footers, strict=True):
        groups = plan.row_groups(obj, metadata)
        plan.opened()
        if not groups:
            continue
        names = metadata.schema.to_arrow_schema().names
        read = names if wanted is None else [n for n in names if n.lower() in wanted]
        key = layout.data(obj.id)
        # Every column of the file: an engine that reads parts hands the rows to a query
        # engine that picks its own columns (views, joins, ``SELECT t`` may name none).
        parts, pages = (
            plan.page_parts(store, pool_id, obj, metadata, groups, names)
            if row_ranges
            else ({}, None)
        )
        groups = [g for g in groups if g not in parts]
        rows = sum(metadata.row_group(g).num_rows for g in groups)
        plan.read(metadata, groups, read, rows)
        arrow = whole
        if whole is not None and len(groups) < metadata.num_row_groups:
            arrow = whole.subset(row_group_ids=groups)  # shares the parsed footer
        out.append(Fragment(obj, key, tuple(groups), metadata, arrow, parts, pages))
    return out
