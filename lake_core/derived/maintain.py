"""Derived pools: create, keep exact, drop.

A derived pool is an ordinary pool (branches, time travel, compaction) keyed ascending by
its definition's bucket and group columns (:mod:`lake_core.derived.spec`), recorded in the
catalog with its source pool's id and its definition (:class:`DerivedLink`). It follows the
source's ``main`` branch.

Every commit that changes it (:func:`refresh`) carries, in its ``meta``, the source commit it
reflects (:mod:`lake_core.derived.lineage`), so "how current is it" is a lookup; each also records the application transaction
``lake.derived`` with the next version, so a refresh with no row to change still commits (and
two refreshes planned on the same state cannot both land).

Refresh, from the reflected source commit ``A`` to the source tip ``B`` (under the derived
pool's maintenance lock):

* only objects added (a load, an upsert's or a merge's adds): their rows are aggregated
  alone, merged with the derived rows of the same buckets (count and sum add, min and max
  take the extreme), and those buckets' derived rows replaced;
* any object removed (delete, compaction, revert, upsert, partition drop): the buckets between
  the smallest and largest bucket-column value of the removed and added objects (from their
  column stats) are recomputed from the source rows at ``B`` (a scan pruned to that range)
  and replaced — the rest of the derived pool is untouched.

Replacing buckets ``[lo, hi]`` rewrites the derived objects whose key range meets it (read
once: their rows inside feed an incremental merge, those outside are kept) and adds the new
rows, in one commit. Objects written for a commit that certainly failed are removed; none
while its outcome is unknown (:func:`lake_core.committing.discarding_on_failure`). Invariant: after a refresh
that reflects ``B``, the derived pool's rows equal the definition evaluated on the source at
``B`` (tests/core/test_derived.py checks this after every kind of history change).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.committing import discarding_on_failure
from lake_core.derived.lineage import META_KEY, TXN_APP, reflected
from lake_core.derived.spec import DerivedLink, DerivedSpec, parse_definition, quote, scratch
from lake_core.errors import (
    CommitStateUnknownError,
    CorruptObjectError,
    NotFoundError,
    ObjectNotFoundError,
    UsageError,
)
from lake_core.keyset import KeySet
from lake_core.objects import ObjectMeta
from lake_core.pool import MAIN, Pool
from lake_core.snapshot import Snapshot
from lake_core.txn import Txn

if TYPE_CHECKING:
    from lake_core.lake import Lake


@dataclass(frozen=True)
class RefreshResult:
    """What one refresh did."""

    commit: str | None  # the derived pool's new commit (None: it was current)
    source_commit: str | None  # the source commit it reflects now
    mode: str  # "current", "initial", "incremental" or "recomputed"
    rows_written: int = 0  # derived rows written (the replaced buckets')
    source_rows_read: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "source_commit": self.source_commit,
            "mode": self.mode,
            "rows_written": self.rows_written,
            "source_rows_read": self.source_rows_read,
        }


def spec_of(pool: Pool) -> DerivedSpec:
    """The definition of a derived pool (UsageError for any other pool)."""
    link = pool.config.derived
    if link is None:
        raise UsageError(f"pool {pool.name} is not a derived pool")
    return parse_definition(link.sql)


def source_of(lake: Lake, pool: Pool) -> Pool:
    """The source pool of a derived pool. NotFoundError when it was dropped, naming it (as
    the definition reads it) and saying how to recover; a pool created since under the same
    name is another pool (another id), which the derived pool does not follow."""
    link = pool.config.derived
    if link is None:
        raise UsageError(f"pool {pool.name} is not a derived pool")
    pools = lake.pools()
    for config in pools:
        if config.id == link.source_id:
            return lake.pool(str(config.name))
    name = parse_definition(link.sql).source
    drop = f"lake derive drop {pool.name}"
    namesake = next((c for c in pools if str(c.name) == name), None)
    if namesake is None:
        detail = (
            f"dropped: {drop}, then create it again; or restore {name} with lake catalog rollback"
        )
    else:
        detail = (
            f"dropped; the pool now named {name} is another pool, id {namesake.id} ({pool.name} "
            f"follows id {link.source_id}): {drop}, then lake derive create {pool.name} "
            f"--from {name} --as … to derive from the new one"
        )
    raise NotFoundError(f"source pool of derived pool {pool.name}", name, detail)


def create_derived(lake: Lake, name: str, source: str, sql: str) -> tuple[Pool, RefreshResult]:
    """A new derived pool ``name`` over ``source`` computing ``sql`` (its FROM must name
    ``source``), filled from the source's main tip. Raises UsageError for a definition it
    cannot keep, PoolNotFoundError for the source, AlreadyExistsError; a refused create
    leaves nothing behind."""
    spec = parse_definition(sql)
    source_pool = lake.pool(source)
    if spec.source not in (source, source_pool.name, source_pool.config.name.name):
        raise UsageError(f"the query reads {spec.source!r}, not the source pool {source}")
    if source_pool.config.derived is not None:
        raise UsageError(f"pool {source} is itself derived: derive from its source")
    _check_columns(spec, source_pool)
    pool = lake.create_pool(
        name,
        ",".join(spec.key) + ":asc",
        txn_retention=None,
        derived=DerivedLink(source_pool.id, sql),
    )
    try:
        result = refresh(lake, pool)
    except CommitStateUnknownError:
        raise  # its first commit may be in: the pool stays; a refresh settles it
    except BaseException:
        lake.drop_pool(name)  # nothing committed: the create leaves nothing behind
        raise
    return lake.pool(name), result


def _check_columns(spec: DerivedSpec, source: Pool) -> None:
    schema = source.schema()
    if schema is None:
        return  # an empty source: its first load decides; refresh raises if it lacks them
    names = set(schema.names)
    wanted = [spec.bucket_column, *(c for _, c in spec.groups)]
    wanted += [a.column for a in spec.aggregates if a.column is not None]
    missing = [c for c in wanted if c not in names]
    if missing:
        raise UsageError(f"pool {source.name} has no column {', '.join(missing)}")
    t = schema.field(spec.bucket_column).type
    if not (pa.types.is_timestamp(t) or pa.types.is_date(t)):
        raise UsageError(
            f"the time bucket's column {spec.bucket_column} is {t}, not a timestamp or date"
        )


def refresh(
    lake: Lake,
    pool: Pool,
    *,
    lock_timeout: float | None = 600.0,
    rebuild: tuple[Any, Any] | None = None,
) -> RefreshResult:
    """Make the derived pool reflect its source's main tip (see the module docstring).
    ``rebuild``: bucket-column values ``(first, last)``: the buckets holding them and those
    between are recomputed from the source as well (a Dagster partition's backfill)."""
    spec = spec_of(pool)
    source = source_of(lake, pool)
    with pool.maintenance_lock(lock_timeout) as lock:
        target = source.tip(MAIN)
        was = reflected(pool)
        if was == target and pool.tip(MAIN) is not None and rebuild is None:
            return RefreshResult(None, target, "current")
        new = source.snapshot(target) if target is not None else Snapshot()
        old = _snapshot_or_none(source, was)
        derived_tip = pool.tip(MAIN)
        current = pool.snapshot(derived_tip) if derived_tip is not None else Snapshot()
        rows: pa.Table | None
        span: Span | None
        touched: _Touched | None = None
        if old is None:
            # First refresh, or the reflected commit's snapshot is gone (vacated and
            # cleaned up): everything, from the source rows at the tip.
            mode, span = "initial", None
            rows, read = _aggregate(spec, _read(source, new, new.objects))
        else:
            added = [o for i, o in new.objects.items() if i not in old.objects]
            removed = [o for i, o in old.objects.items() if i not in new.objects]
            if rebuild is not None:
                mode = "recomputed"
                span = _union(
                    _stats_span(spec, [*removed, *added], new.schema)
                    if added or removed
                    else EMPTY,
                    _value_span(spec, rebuild),
                )
                where = None if span is None else _range_where(spec.bucket_column, span, spec)
                rows, read = _aggregate(spec, _scan(source, target, where))
            elif not removed:
                mode = "incremental"
                partial, read = _aggregate(spec, _read(source, new, {o.id: o for o in added}))
                span = _bucket_span(partial, spec) or EMPTY
                touched = _touched(pool, current, spec, span)
                rows = _merge(spec, touched.inside, partial)
            else:
                mode = "recomputed"
                span = _stats_span(spec, [*removed, *added], new.schema)
                where = None if span is None else _range_where(spec.bucket_column, span, spec)
                rows, read = _aggregate(spec, _scan(source, target, where))
        if touched is None:
            touched = _touched(pool, current, spec, span)
        deletes = [o.id for o in touched.objects]
        version = current.txns.get(TXN_APP, -1) + 1
        written: list[ObjectMeta] = []
        # Written objects go if the commit certainly failed, never while its outcome is unknown.
        with discarding_on_failure(pool, written):
            schema = _write(pool, [touched.outside, rows], written.append)
            done = pool.commit(
                MAIN,
                written,
                deletes,
                message=f"derived from {source.name} at {target or 'its empty start'} ({mode})",
                meta={META_KEY: {"source": source.id, "commit": target, "mode": mode}},
                guard=lock.check,
                txn=Txn(TXN_APP, version),
                keys=KeySet(),  # an empty change still commits: it records the reflected commit
                read_ids=deletes,
                incoming_schema=schema,
            )
        return RefreshResult(done.id, target, mode, 0 if rows is None else rows.num_rows, read)


# -- reading ------------------------------------------------------------------------------


def _read(pool: Pool, snap: Snapshot, objects: Any) -> pa.Table | None:
    """The rows of ``objects`` (of ``snap``) as the pool's schema; None when there are none."""
    from lake_core.scan import Scan

    if not objects or snap.schema is None:
        return None
    part = Snapshot(snap.commit_id, snap.depth, MappingProxyType(dict(objects)), snap.schema)
    return Scan(pool.store, pool.id, pool.config.key, part, None).to_table()


def _scan(pool: Pool, commit: str | None, where: str | None) -> pa.Table | None:
    if commit is None:
        return None
    return pool.scan(commit, where=where).to_table()


def _aggregate(spec: DerivedSpec, rows: pa.Table | None) -> tuple[pa.Table | None, int]:
    """The derived rows of ``rows`` (None: no rows) and how many source rows that read."""
    if rows is None or rows.num_rows == 0:
        return None, 0 if rows is None else rows.num_rows
    return _duckdb(spec.partial_sql("src"), src=rows), rows.num_rows


def _merge(
    spec: DerivedSpec, existing: pa.Table | None, partial: pa.Table | None
) -> pa.Table | None:
    if partial is None:
        return existing
    if existing is None or existing.num_rows == 0:
        return partial
    both = pa.concat_tables(
        [existing.select(partial.schema.names), partial], promote_options="default"
    )
    return _duckdb(spec.merge_sql("src"), src=both)


def _duckdb(sql: str, **tables: pa.Table) -> pa.Table:
    """``sql`` over ``tables`` in a cursor of this thread's scratch database (UTC)."""
    con = scratch().cursor()
    try:
        # Per cursor: a cursor starts from the system's zone (Etc/UTC here), and timestamps
        # must come back as the pool stores them (UTC).
        con.execute("SET TimeZone='UTC'")
        for name, table in tables.items():
            con.register(name, table)
        result: pa.Table = con.sql(sql).to_arrow_table()
        return result
    finally:
        con.close()


# -- bucket ranges --------------------------------------------------------------------------


Span = tuple[Any, Any]  # the first and last bucket (inclusive), as Python values
EMPTY: Span = ("empty", "empty")  # no bucket


def _snapshot_or_none(pool: Pool, commit: str | None) -> Snapshot | None:
    """The snapshot of ``commit`` (the empty one for None, a pool's start), or None when
    it cannot be read any more."""
    if commit is None:
        return None
    try:
        return pool.snapshot(commit)
    except (NotFoundError, ObjectNotFoundError, CorruptObjectError):
        return None


def _bucket_span(rows: pa.Table | None, spec: DerivedSpec) -> Span | None:
    if rows is None or rows.num_rows == 0:
        return None
    import pyarrow.compute as pc

    bounds: Any = pc.min_max(rows.column(spec.bucket_name)).as_py()
    return bounds["min"], bounds["max"]


def _stats_span(
    spec: DerivedSpec, objects: Sequence[ObjectMeta], schema: pa.Schema | None
) -> Span | None:
    """The buckets the bucket column of ``objects`` spans, from their stats; None (all
    buckets) when any object's stats cannot say."""
    lo = hi = None
    for obj in objects:
        col = obj.columns.get(spec.bucket_column)
        if col is None:
            if obj.count and schema is not None and spec.bucket_column in schema.names:
                return None  # no stats: cannot bound it
            continue
        if col.min is None:
            if obj.count > col.nulls:
                return None
            continue
        a, b = col.decoded_min(), col.decoded_max()
        lo = a if lo is None or a < lo else lo
        hi = b if hi is None or b > hi else hi
    if lo is None:
        return EMPTY
    first = _duckdb(
        f"SELECT date_trunc('{spec.bucket_unit}', a) AS a, date_trunc('{spec.bucket_unit}', b) AS b "
        "FROM t",
        t=pa.table({"a": [lo], "b": [hi]}),
    ).to_pylist()[0]
    return first["a"], first["b"]


def _value_span(spec: DerivedSpec, values: tuple[Any, Any]) -> Span:
    """The buckets holding bucket-column values ``values[0]`` and ``values[1]``."""
    row = _duckdb(
        f"SELECT date_trunc('{spec.bucket_unit}', a) AS a, date_trunc('{spec.bucket_unit}', b) "
        "AS b FROM t",
        t=pa.table({"a": [values[0]], "b": [values[1]]}),
    ).to_pylist()[0]
    return row["a"], row["b"]


def _union(a: Span | None, b: Span | None) -> Span | None:
    """The buckets from the first of both spans to the last (None: every bucket)."""
    if a is None or b is None:
        return None
    if a == EMPTY:
        return b
    if b == EMPTY:
        return a
    return min(a[0], b[0]), max(a[1], b[1])


def _literal(value: Any) -> str:
    if isinstance(value, datetime):
        return f"'{value.isoformat()}'"
    if isinstance(value, date):
        return f"'{value.isoformat()}'"
    raise UsageError(f"cannot bound buckets by {value!r}")


def _range_where(column: str, span: Span, spec: DerivedSpec) -> str:
    """Source rows whose bucket lies in ``span``: from the first bucket's start to the end of
    the last (``date_trunc(unit, col) <= last`` as a range the pruning understands)."""
    if span == EMPTY:
        return "false"
    lo, hi = span
    end = (
        _duckdb(f"SELECT t.b + INTERVAL 1 {spec.bucket_unit} AS e FROM t", t=pa.table({"b": [hi]}))
        .column("e")[0]
        .as_py()
    )
    return f"{quote(column)} >= {_literal(lo)} AND {quote(column)} < {_literal(end)}"


# -- replacing buckets --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Touched:
    """The derived objects whose key range meets a span of buckets (they are rewritten), and
    their rows inside the span and outside it (read once; None when not read)."""

    objects: list[ObjectMeta]
    inside: pa.Table | None = None
    outside: pa.Table | None = None


def _touched(pool: Pool, snap: Snapshot, spec: DerivedSpec, span: Span | None) -> _Touched:
    """What replacing ``span`` (None: every bucket) rewrites in the derived snapshot."""
    import pyarrow.compute as pc

    from lake_core.scan import Scan

    if span == EMPTY or not snap.objects:
        return _Touched([])
    if span is None:
        return _Touched(list(snap.objects.values()))  # all replaced: nothing to keep
    where = (
        f"{quote(spec.bucket_name)} >= {_literal(span[0])} AND "
        f"{quote(spec.bucket_name)} <= {_literal(span[1])}"
    )
    objects = Scan(pool.store, pool.id, pool.config.key, snap, where).objects
    whole = _read(pool, snap, {o.id: o for o in objects})
    if whole is None:
        return _Touched(objects)
    bucket = whole.column(spec.bucket_name)
    within: Any = pc.and_(
        pc.greater_equal(bucket, pa.scalar(span[0], bucket.type)),
        pc.less_equal(bucket, pa.scalar(span[1], bucket.type)),
    )
    inside: Any = pc.fill_null(within, False)
    return _Touched(objects, whole.filter(inside), whole.filter(pc.invert(inside)))


def _write(
    pool: Pool, parts: list[pa.Table | None], on_object: Callable[[ObjectMeta], None]
) -> pa.Schema | None:
    """Write ``parts`` (kept rows, new rows) as sorted objects of the derived pool (each
    reported to ``on_object``); the schema written, None when there was nothing. The rows are
    in the lake's types (:mod:`lake_core.ingest.types`: DuckDB's naive bucket timestamps are
    UTC), so every object holds the pool schema's types and queries read the files as they
    are."""
    from lake_core.ingest.types import normalize_table
    from lake_core.writer import WriteOptions, write_objects

    source = f"derived pool {pool.name}"
    tables = [normalize_table(t, source) for t in parts if t is not None and t.num_rows]
    if not tables:
        return None
    table = pa.concat_tables(
        [t.select(tables[-1].schema.names) for t in tables], promote_options="default"
    )
    write_objects(
        pool.store,
        pool.id,
        table,
        pool.config.key.resolve(table.schema),
        WriteOptions(pool.config.target_size, pool.config.seek_stride),
        clock=pool.clock,
        on_object=on_object,
    )
    return table.schema


def drop_derived(lake: Lake, name: str) -> None:
    """Drop a derived pool (UsageError for any other pool: drop it with ``lake drop``)."""
    pool = lake.pool(name)
    if pool.config.derived is None:
        raise UsageError(f"pool {name} is not a derived pool")
    lake.drop_pool(name)


def list_derived(lake: Lake) -> list[dict[str, Any]]:
    """Every derived pool: name, source, definition, reflected source commit, whether it is
    current (the source's main tip) and whether its source is live. The source is named as
    the definition reads it, also once that pool is dropped (``source_live`` false: the
    derived pool can no longer refresh; a pool created since under the name is another
    pool, which it does not follow)."""
    out = []
    configs = lake.pools()
    by_id = {c.id: str(c.name) for c in configs}
    for config in configs:
        if config.derived is None:
            continue
        pool = lake.pool(str(config.name))
        live_name = by_id.get(config.derived.source_id)
        source_tip = lake.pool(live_name).tip(MAIN) if live_name else None
        at = reflected(pool)
        out.append(
            {
                "name": str(config.name),
                "source": live_name or parse_definition(config.derived.sql).source,
                "sql": config.derived.sql,
                "reflects": at,
                "current": live_name is not None and at == source_tip,
                "source_live": live_name is not None,
            }
        )
    return out


__all__ = [
    "DerivedLink",
    "RefreshResult",
    "create_derived",
    "drop_derived",
    "list_derived",
    "refresh",
    "source_of",
    "spec_of",
]
