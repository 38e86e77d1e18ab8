"""The lake's own metadata as Arrow tables ("Lake Introspection"): commits, objects, branches,
partitions and index entries of a pool, and the catalog's pools and views.

Each function returns a ``pyarrow.Table`` with a fixed, documented schema (docs/sql.md,
"Metadata tables"), usable on its own or as what SQL reads for ``flights$commits``,
``flights$objects``, ``flights$branches``, ``flights$partitions``, ``flights$indexes``,
``lake$pools`` and
``lake$views``. The values are those ``lake log``, ``lake objects``, ``lake branch`` and
``lake partitions`` print, typed for SQL rather than formatted for people:

- times are ``timestamp[us, UTC]``; free JSON (commit ``meta``) is JSON text;
- key bounds and column stats are typed as the pool's columns (a timestamp key's ``min`` is a
  timestamp, not the microsecond integer the stats store); a composite key's bound is a struct
  of its fields. Where one column's stats hold values of several types (a column that changed
  type), those values are JSON text instead;
- objects and partitions come from the snapshot's arrays (:mod:`lake_core.live`): listing
  10,000 objects builds no ``ObjectMeta``.

Invariants: every table is read from one snapshot (one commit, one catalog version), so its
rows are consistent with each other; nothing here writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from lake_core.errors import UsageError
from lake_core.names import LAKE, LAKE_TABLES, POOL_TABLES
from lake_core.stats import decode_value

if TYPE_CHECKING:
    from lake_core.catalog.state import CatalogSnapshot
    from lake_core.lake import Lake
    from lake_core.pool import Pool

TIMESTAMP = pa.timestamp("us", tz="UTC")


def _schema(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(name, type_) for name, type_ in fields])


COMMITS_SCHEMA = _schema(
    ("id", pa.string()),
    ("parent", pa.string()),
    ("author", pa.string()),
    ("date", TIMESTAMP),
    ("message", pa.string()),
    ("meta", pa.string()),
    ("adds", pa.int64()),
    ("deletes", pa.int64()),
    ("rows_added", pa.int64()),
    ("rows_removed", pa.int64()),
    ("added", pa.list_(pa.string())),
    ("deleted", pa.list_(pa.string())),
    ("kind", pa.string()),
    ("depth", pa.int64()),
    ("distance", pa.int64()),
    ("tip_of", pa.list_(pa.string())),
)
BRANCHES_SCHEMA = _schema(
    ("name", pa.string()),
    ("tip", pa.string()),
    ("date", TIMESTAMP),
    ("author", pa.string()),
    ("message", pa.string()),
    ("depth", pa.int64()),
    ("tail", pa.string()),
)
PARTITIONS_SCHEMA = _schema(
    ("partition", pa.string()),
    ("objects", pa.int64()),
    ("rows", pa.int64()),
    ("bytes", pa.int64()),
)
INDEXES_SCHEMA = _schema(
    ("object", pa.string()),
    ("rule", pa.string()),
    ("rule_id", pa.string()),
    ("kind", pa.string()),
    ("field", pa.string()),
    ("index_id", pa.string()),
    ("size", pa.int64()),
    ("object_rows", pa.int64()),
    ("object_bytes", pa.int64()),
)
POOLS_SCHEMA = _schema(
    ("name", pa.string()),
    ("namespace", pa.string()),
    ("pool", pa.string()),
    ("id", pa.string()),
    ("key", pa.list_(pa.string())),
    ("order", pa.string()),
    ("partition_by", pa.string()),
    ("target_size", pa.int64()),
    ("seek_stride", pa.int64()),
    ("schema_mode", pa.string()),
    ("unique", pa.bool_()),
    ("txn_retention_seconds", pa.int64()),
    ("created", TIMESTAMP),
    ("catalog_version", pa.int64()),
)
VIEWS_SCHEMA = _schema(
    ("name", pa.string()),
    ("namespace", pa.string()),
    ("view", pa.string()),
    ("sql", pa.string()),
    ("references", pa.list_(pa.string())),
    ("created", TIMESTAMP),
    ("catalog_version", pa.int64()),
)
#: The fixed columns of ``$objects``; ``min``/``max`` take the key's type and ``stats`` is a
#: struct with one field per pool column (see :func:`objects_table`).
OBJECTS_COLUMNS = ("id", "min", "max", "count", "size", "partition", "checksum", "stats")


# -- pools ---------------------------------------------------------------------------------


def commits_table(pool: Pool, ref: str | None = None, as_of: datetime | None = None) -> pa.Table:
    """The commits reachable from ``ref`` (branch or commit id; default main; a branch as of
    ``as_of``), newest first, as ``lake log`` walks them (stopping at vacated history).

    ``distance``: commits between the row and the starting commit (0 for it). ``tip_of``: the
    branches (at ``as_of``) whose tip the commit is. ``meta``: the commit's free JSON as text.
    ``adds``/``deletes``: objects the commit added and deleted (ids in ``added``/``deleted``);
    ``rows_added``/``rows_removed``: rows in them (``rows_removed`` null for commits written
    before it was recorded). ``kind``: a maintenance commit's kind (``compaction``, …)."""
    start = pool.resolve(ref, as_of)
    tips: dict[str, list[str]] = {}
    for name, tip in sorted(pool.branches(as_of).items()):
        if tip is not None:
            tips.setdefault(tip, []).append(name)
    rows: dict[str, list[Any]] = {f.name: [] for f in COMMITS_SCHEMA}
    commits = pool.log(start) if start is not None else iter(())
    for distance, c in enumerate(commits):
        deleted = c.deletes()
        added = [o.id for o in c.adds()]
        values: dict[str, Any] = {
            "id": c.id,
            "parent": c.parent,
            "author": c.author,
            "date": c.date,
            "message": c.message,
            "meta": None if c.meta is None else json.dumps(c.meta, sort_keys=True),
            "adds": len(added),
            "deletes": len(deleted),
            "rows_added": c.rows_added,
            "rows_removed": c.rows_removed,
            "added": added,
            "deleted": deleted,
            "kind": c.extra.get("kind"),
            "depth": c.depth,
            "distance": distance,
            "tip_of": tips.get(c.id, []),
        }
        for name, value in values.items():
            rows[name].append(value)
    return pa.Table.from_pydict(rows, schema=COMMITS_SCHEMA)


def branches_table(pool: Pool, as_of: datetime | None = None) -> pa.Table:
    """The pool's branches (at ``as_of``), by name: the tip commit (null for a branch with no
    commits) with its date, author, message and depth (its ancestors), and ``tail`` (the
    branch's oldest readable commit after a vacate, else null)."""
    _, tails = pool.vacate_state()
    rows: dict[str, list[Any]] = {f.name: [] for f in BRANCHES_SCHEMA}
    for name, tip in sorted(pool.branches(as_of).items()):
        commit = pool.read_commit(tip) if tip is not None else None
        rows["name"].append(name)
        rows["tip"].append(tip)
        rows["date"].append(commit.date if commit else None)
        rows["author"].append(commit.author if commit else None)
        rows["message"].append(commit.message if commit else None)
        rows["depth"].append(commit.depth if commit else None)
        rows["tail"].append(tails.get(name))
    return pa.Table.from_pydict(rows, schema=BRANCHES_SCHEMA)


def partitions_table(pool: Pool, ref: str | None = None, as_of: datetime | None = None) -> pa.Table:
    """Partitions of the snapshot at ``ref``, sorted by value, as ``lake partitions`` lists
    them: objects, rows and bytes in each. ``partition`` is null for objects of an
    unpartitioned pool (``lake partitions`` prints ``null``; ``""`` with ``-f json``)."""
    objects = pool.snapshot(pool.resolve(ref, as_of)).object_table()
    if objects.num_rows == 0:
        return PARTITIONS_SCHEMA.empty_table()
    grouped = objects.select(["partition", "id", "count", "size"]).group_by(
        "partition", use_threads=False
    )
    agg = grouped.aggregate([("id", "count"), ("count", "sum"), ("size", "sum")])
    table = pa.table(
        {
            "partition": agg.column("partition").cast(pa.string()),
            "objects": agg.column("id_count").cast(pa.int64()),
            "rows": agg.column("count_sum").cast(pa.int64()),
            "bytes": agg.column("size_sum").cast(pa.int64()),
        },
        schema=PARTITIONS_SCHEMA,
    )
    # Nulls first, as the empty string sorts in lake partitions.
    nulls = table.filter(pc.is_null(table.column("partition")))
    values = table.filter(pc.is_valid(table.column("partition")))
    return pa.concat_tables([nulls, values.sort_by("partition")])


def indexes_table(pool: Pool, ref: str | None = None, as_of: datetime | None = None) -> pa.Table:
    """The index entries of the snapshot at ``ref`` (:mod:`lake_core.indexes`), sorted by
    object and rule, as ``lake index ls -p`` lists them: the data ``object``, the ``rule``
    (its name in the pool's namespace) and ``rule_id`` (the definition it was built for),
    ``kind``, ``field``, the index object's ``index_id`` and ``size`` (bytes), and the data
    object's ``object_rows`` and ``object_bytes``. Every entry names a live object."""
    snap = pool.snapshot(pool.resolve(ref, as_of))
    rows: dict[str, list[Any]] = {f.name: [] for f in INDEXES_SCHEMA}
    for (oid, rule), m in sorted(snap.indexes.items()):
        obj = snap.objects[oid]
        values: dict[str, Any] = {
            "object": oid,
            "rule": rule,
            "rule_id": m.rule_id,
            "kind": m.kind,
            "field": m.field,
            "index_id": m.id,
            "size": m.size,
            "object_rows": obj.count,
            "object_bytes": obj.size,
        }
        for name, value in values.items():
            rows[name].append(value)
    return pa.Table.from_pydict(rows, schema=INDEXES_SCHEMA)


def objects_table(pool: Pool, ref: str | None = None, as_of: datetime | None = None) -> pa.Table:
    """The live objects of the snapshot at ``ref``, sorted by id, as ``lake objects`` lists
    them: ``id``, ``min``, ``max`` (the first and last key, ``min <= max`` whatever the pool's
    order; typed as the key column, a struct of the key fields for a composite key; null when
    every key is null), ``count``, ``size`` (bytes), ``partition``, ``checksum``, and ``stats``:
    a struct with one field per pool column, each ``{min, max, nulls}`` typed as the column
    (the field is null where the object lacks the column; ``min``/``max`` null for columns
    whose type records no bounds)."""
    snap = pool.snapshot(pool.resolve(ref, as_of))
    table = snap.object_table()
    if table.num_rows:
        table = table.take(pc.sort_indices(table.column("id")))
    n = table.num_rows
    schema = snap.schema if snap.schema is not None else pa.schema([])
    key = pool.config.key.names(snap.schema)

    def target(name: str) -> pa.DataType | None:
        return schema.field(name).type if name in schema.names else None

    bounds = {}
    for which in ("min", "max"):
        present = _column(table, f"{which}_n")
        parts = [_typed(table, f"{which}.{i}", target(k)) for i, k in enumerate(key)]
        mask = pc.is_null(present) if present is not None else pa.array([True] * n)
        if len(parts) == 1:
            bounds[which] = parts[0]
        else:
            bounds[which] = pa.StructArray.from_arrays(parts, names=list(key), mask=mask)
    stats_fields = []
    for f in schema:
        kind = _column(table, f"stat:type:{f.name}")
        mask = pc.is_null(kind) if kind is not None else pa.array([True] * n)
        nulls = _column(table, f"stat:nulls:{f.name}")
        stat = pa.StructArray.from_arrays(
            [
                _typed(table, f"stat:min:{f.name}", f.type),
                _typed(table, f"stat:max:{f.name}", f.type),
                nulls.cast(pa.int64()) if nulls is not None else _nulls(n, pa.int64()),
            ],
            names=["min", "max", "nulls"],
            mask=mask,
        )
        stats_fields.append((f.name, stat))
    stats: pa.Array[Any]
    if stats_fields:
        stats = pa.StructArray.from_arrays(
            [s for _, s in stats_fields], names=[name for name, _ in stats_fields]
        )
    else:
        stats = _nulls(n, pa.struct([]))
    return pa.table(
        {
            "id": _column_or_nulls(table, "id", pa.string()),
            "min": bounds["min"],
            "max": bounds["max"],
            "count": _column_or_nulls(table, "count", pa.int64()),
            "size": _column_or_nulls(table, "size", pa.int64()),
            "partition": _column_or_nulls(table, "partition", pa.string()),
            "checksum": _column_or_nulls(table, "checksum", pa.string()),
            "stats": stats,
        }
    )


def _column(table: pa.Table, name: str) -> pa.Array[Any] | None:
    """One column of the snapshot's object table as one array (None if it has none)."""
    if name not in table.schema.names:
        return None
    col = table.column(name)
    if col.num_chunks == 1:
        return cast("pa.Array[Any]", col.chunk(0))
    return col.combine_chunks()


def _nulls(n: int, type_: pa.DataType) -> pa.Array[Any]:
    """``n`` nulls of ``type_``."""
    return pa.nulls(n).cast(type_)


def _column_or_nulls(table: pa.Table, name: str, type_: pa.DataType) -> pa.Array[Any]:
    col = _column(table, name)
    return col.cast(type_) if col is not None else _nulls(table.num_rows, type_)


def _typed(table: pa.Table, name: str, target: pa.DataType | None) -> pa.Array[Any]:
    """A stored value column (key bound or stat) as values of the pool column's type
    ``target``: stored timestamps (integer microseconds) become ``timestamp[us, UTC]``,
    dates (integer days) ``date32``. A column holding JSON (values of several types) decodes
    them, and stays JSON text if they fit no one type."""
    n = table.num_rows
    raw = _column(table, name)
    out_type = _out_type(target)
    if raw is None or pa.types.is_null(raw.type):
        return _nulls(n, out_type if out_type is not None else pa.null())
    field = table.schema.field(name)
    if field.metadata and field.metadata.get(b"enc") == b"json":
        return _from_json(raw, target)
    if target is None or out_type is None:
        return raw
    try:
        if pa.types.is_timestamp(target) and pa.types.is_integer(raw.type):
            return raw.cast(pa.int64()).cast(TIMESTAMP)
        if pa.types.is_date32(target) and pa.types.is_integer(raw.type):
            return raw.cast(pa.int32()).cast(pa.date32())
        if _same_kind(raw.type, out_type):
            return raw.cast(out_type)
    except pa.ArrowException:
        pass
    return raw  # stats of another type than the pool's column now: as stored


def _out_type(target: pa.DataType | None) -> pa.DataType | None:
    if target is None:
        return None
    if pa.types.is_timestamp(target):
        return TIMESTAMP
    return target


def _same_kind(a: pa.DataType, b: pa.DataType) -> bool:
    kinds: Sequence[Callable[[pa.DataType], bool]] = (
        pa.types.is_integer,
        pa.types.is_floating,
        lambda t: pa.types.is_string(t) or pa.types.is_large_string(t) or t == pa.string_view(),
        pa.types.is_boolean,
    )
    return any(k(a) and k(b) for k in kinds)


def _from_json(raw: pa.Array[Any], target: pa.DataType | None) -> pa.Array[Any]:
    type_str = str(target) if target is not None else ""
    values = [None if v is None else decode_value(type_str, json.loads(v)) for v in raw.to_pylist()]
    try:
        return pa.array(values, _out_type(target)) if target is not None else pa.array(values)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return raw


# -- the lake ------------------------------------------------------------------------------


def pools_table(snapshot: CatalogSnapshot) -> pa.Table:
    """The pools of one catalog version, by name, as ``lake ls`` lists them: ``name`` as
    ``ls`` prints it (``NAME`` in the default namespace, else ``NS.NAME``), ``namespace``,
    ``pool`` (the bare name), ``id``, ``key`` (fields in significance order), ``order``,
    ``partition_by``, ``target_size`` and ``seek_stride`` (bytes), ``schema_mode``, ``unique``
    (every load upserts by the key), ``txn_retention_seconds`` (null: remembered forever), ``created`` and ``catalog_version``
    (the version read)."""
    from lake_core.catalog.pools import CatalogPoolRegistry
    from lake_core.registry import retention_seconds

    rows: dict[str, list[Any]] = {f.name: [] for f in POOLS_SCHEMA}
    for p in CatalogPoolRegistry.list_at(snapshot):
        values: dict[str, Any] = {
            "name": str(p.name),
            "namespace": p.name.namespace,
            "pool": p.name.name,
            "id": p.id,
            "key": list(p.key.fields),
            "order": p.key.order,
            "partition_by": p.partition_by,
            "target_size": p.target_size,
            "seek_stride": p.seek_stride,
            "schema_mode": p.schema_mode,
            "unique": p.unique,
            "txn_retention_seconds": retention_seconds(p.txn_retention),
            "created": p.created,
            "catalog_version": snapshot.version,
        }
        for name, value in values.items():
            rows[name].append(value)
    return pa.Table.from_pydict(rows, schema=POOLS_SCHEMA)


def views_table(snapshot: CatalogSnapshot) -> pa.Table:
    """The SQL views of one catalog version, by name (``lake view ls``): ``name`` as ``ls``
    prints names, ``namespace``, ``view`` (the bare name), ``sql``, ``references`` (the
    tables its SQL names), ``created`` and ``catalog_version``."""
    from lake_core.views import list_views

    rows: dict[str, list[Any]] = {f.name: [] for f in VIEWS_SCHEMA}
    for v in list_views(snapshot):
        rows["name"].append(str(v.name))
        rows["namespace"].append(v.name.namespace)
        rows["view"].append(v.name.name)
        rows["sql"].append(v.sql)
        rows["references"].append(list(v.references))
        rows["created"].append(v.created)
        rows["catalog_version"].append(snapshot.version)
    return pa.Table.from_pydict(rows, schema=VIEWS_SCHEMA)


def catalog_snapshot(lake: Lake, version: int | None, as_of: datetime | None) -> CatalogSnapshot:
    """The catalog version a lake table reads: ``version``, else the one of ``as_of``, else
    the latest."""
    return lake.catalog.snapshot_at(version, as_of)


def metadata_table(
    lake: Lake,
    pool: str,
    table: str,
    ref: str | None = None,
    as_of: datetime | None = None,
) -> pa.Table:
    """``POOL[@REF]$TABLE`` (or ``lake[@VERSION]$pools|views``) as an Arrow table. ``pool`` is
    ``NS.NAME`` or ``NAME``; ``ref`` a branch or commit id (for ``lake``: a catalog version
    number); ``as_of`` applies as to a pool (a branch at that time) or to the catalog (its
    version then). Raises UsageError for an unknown table name, PoolNotFoundError, and what
    resolving the ref raises."""
    if pool == LAKE and table in LAKE_TABLES:
        version = None
        if ref is not None:
            if not ref.isdigit():
                raise UsageError(
                    f"lake@{ref}${table}: the ref of lake$ tables is a catalog version"
                )
            version = int(ref)
        snap = catalog_snapshot(lake, version, as_of)
        return pools_table(snap) if table == "pools" else views_table(snap)
    if table not in POOL_TABLES:
        known = ", ".join(
            [*(f"POOL${t}" for t in POOL_TABLES), *(f"lake${t}" for t in LAKE_TABLES)]
        )
        raise UsageError(f"{pool}${table}: no such metadata table (there are {known})")
    source = lake.pool(pool)
    if table == "commits":
        return commits_table(source, ref, as_of)
    if table == "objects":
        return objects_table(source, ref, as_of)
    if table == "partitions":
        return partitions_table(source, ref, as_of)
    if table == "indexes":
        return indexes_table(source, ref, as_of)
    if table == "cubes":
        from lake_core.otree.introspect import cubes_table

        return cubes_table(source, ref, as_of)
    if ref is not None:
        raise UsageError(f"{pool}@{ref}$branches: branches belong to the pool, not to a ref")
    return branches_table(source, as_of)
